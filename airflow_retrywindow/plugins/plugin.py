"""The Airflow plugin that serves the Retry window view and adds its UI tabs.

Airflow finds it through the ``airflow.plugins`` entry point of this
package (``airflow plugins`` lists it as ``retry_window``). The API server
mounts the view under :data:`~airflow_retrywindow.links.addresses.MOUNT`; the
UI shows it as a "Retry window" tab on every task instance and every DAG run.

Every Airflow process loads plugins, task processes included, so this module
stays light: the view's application, and the API server modules it needs, are
imported only when the API server asks for them.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.configuration import conf
from airflow.plugins_manager import AirflowPlugin

from airflow_retrywindow.links.addresses import (
    MOUNT,
    RUN_TAB,
    RUN_VIEW_HREF,
    TASK_TAB,
    TASK_VIEW_HREF,
    under_base,
)

log = logging.getLogger(__name__)

TAB_NAME = "Retry window"
BASE_URL = conf.get("api", "base_url", fallback="/")


class RetryWindowPlugin(AirflowPlugin):
    """The Retry window view: every retry decision with its timeline, fixture and replay."""

    name = "retry_window"
    # Airflow declares every plugin attribute as a class-level list and reads it so
    external_views = [  # noqa: RUF012
        {
            "name": TAB_NAME,
            "href": under_base(BASE_URL, TASK_VIEW_HREF),
            "destination": "task_instance",
            "url_route": TASK_TAB,
        },
        {
            "name": TAB_NAME,
            "href": under_base(BASE_URL, RUN_VIEW_HREF),
            "destination": "dag_run",
            "url_route": RUN_TAB,
        },
    ]

    @property
    def fastapi_apps(self) -> list[dict[str, Any]]:  # type: ignore[override]
        """The view's application, built on first use (only the API server uses it).

        The API server reads this with no error handling when it starts: a view that
        cannot be built is logged and left out, so the server starts without it.
        """
        try:
            from airflow_retrywindow.plugins.app import view_app

            app = view_app()
        except Exception:
            log.exception("The Retry window view could not be built; it is not served")
            return []
        return [{"app": app, "url_prefix": MOUNT, "name": "Retry window view"}]
