"""The provider's connection type, described once for Airflow's connection form.

Airflow (3.2 and later) reads a connection type's form from the provider info
(``conn-fields`` and ``ui-field-behaviour``) without importing the hook. The
provider info and :class:`~airflow_retrywindow.hooks.airflow_api.AirflowApiHook`
both take it from here, so the two cannot disagree. Nothing here imports Airflow.
"""

from __future__ import annotations

import copy
from typing import Any

#: the connection type (lower case and underscores: a connection URI spells it
#: ``retrywindow-airflow-api://...`` and Airflow turns the hyphens back)
CONN_TYPE = "retrywindow_airflow_api"
#: the name Airflow's connection form shows for the type
HOOK_NAME = "Airflow REST API (retry window)"
#: where the hook is found (the hook module imports it lazily, see ``airflow_api``)
HOOK_CLASS_NAME = "airflow_retrywindow.hooks.airflow_api.AirflowApiHook"

#: the extras the hook reads, as form fields (stored in ``extra`` under these names)
CONN_FIELDS: dict[str, dict[str, Any]] = {
    "access_token": {
        "label": "Access token",
        "description": "A JWT used as given instead of login and password; it cannot be "
        "renewed, so prefer login and password.",
        "schema": {"type": ["string", "null"], "format": "password"},
    },
    "verify_ssl": {
        "label": "Verify TLS certificate",
        "description": "Turn off only on a trusted network; prefer a CA bundle.",
        "schema": {"type": ["boolean", "null"], "default": True},
    },
    "ssl_ca_cert": {
        "label": "CA bundle",
        "description": "Path, on the workers and the triggerer, to the CA certificates "
        "(PEM) that signed the API server's certificate.",
        "schema": {"type": ["string", "null"]},
    },
}

#: how the standard fields show (schema and port: the host is a whole URL)
UI_FIELD_BEHAVIOUR: dict[str, Any] = {
    "hidden-fields": ["schema", "port"],
    "relabeling": {"host": "API server URL"},
    "placeholders": {
        "host": "http://airflow-apiserver:8080",
        "login": "a user that may read DAG runs, task instances, XComs and pools",
        "password": "that user's password",
        "ssl_ca_cert": "/opt/airflow/certs/ca.pem",
    },
}


def connection_type_info() -> dict[str, Any]:
    """The ``connection-types`` entry of the provider info."""
    return {
        "hook-class-name": HOOK_CLASS_NAME,
        "hook-name": HOOK_NAME,
        "connection-type": CONN_TYPE,
        "conn-fields": copy.deepcopy(CONN_FIELDS),
        "ui-field-behaviour": copy.deepcopy(UI_FIELD_BEHAVIOUR),
    }


def field_behaviour() -> dict[str, Any]:
    """The same behaviour in the spelling of ``BaseHook.get_ui_field_behaviour``."""
    return {
        "hidden_fields": list(UI_FIELD_BEHAVIOUR["hidden-fields"]),
        "relabeling": dict(UI_FIELD_BEHAVIOUR["relabeling"]),
        "placeholders": dict(UI_FIELD_BEHAVIOUR["placeholders"]),
    }
