"""The package registers itself the Airflow way and stays light to import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.airflow
def test_airflow_lists_the_provider(airflow_db: Path) -> None:
    airflow = Path(sys.executable).with_name("airflow")
    done = subprocess.run(
        [str(airflow), "providers", "list", "--output", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    providers = {entry["package_name"]: entry for entry in json.loads(done.stdout)}
    assert "airflow-retrywindow" in providers
    # the one version: airflow_retrywindow.__version__, which the package metadata reads
    from airflow_retrywindow import __version__

    assert providers["airflow-retrywindow"]["version"] == __version__


def test_provider_info_names_modules_that_exist() -> None:
    import importlib

    from airflow_retrywindow.get_provider_info import get_provider_info

    info = get_provider_info()
    assert info["package-name"] == "airflow-retrywindow"
    for kind in ("operators", "sensors", "hooks"):
        for module in info[kind][0]["python-modules"]:
            importlib.import_module(module)


def test_provider_info_registers_the_hook_with_its_connection_type() -> None:
    import importlib

    import airflow
    import jsonschema  # type: ignore[import-untyped]

    from airflow_retrywindow.get_provider_info import get_provider_info

    info = get_provider_info()
    schemas = Path(airflow.__file__).parent
    jsonschema.validate(info, json.loads((schemas / "provider_info.schema.json").read_text()))
    (entry,) = info["connection-types"]
    module, _, name = entry["hook-class-name"].rpartition(".")
    hook = getattr(importlib.import_module(module), name)
    assert entry["connection-type"] == hook.conn_type == "retrywindow_airflow_api"
    assert entry["hook-name"] == hook.hook_name == "Airflow REST API (retry window)"
    assert set(entry["conn-fields"]) == {"access_token", "verify_ssl", "ssl_ca_cert"}
    assert entry["conn-fields"]["access_token"]["schema"]["format"] == "password"  # masked
    # what Airflow 3.3 reads from the provider info and what the hook answers agree
    behaviour = hook.get_ui_field_behaviour()
    assert behaviour["hidden_fields"] == entry["ui-field-behaviour"]["hidden-fields"]
    assert behaviour["relabeling"] == entry["ui-field-behaviour"]["relabeling"]
    jsonschema.validate(
        behaviour,
        json.loads((schemas / "customized_form_field_behaviours.schema.json").read_text()),
    )


def _airflow(*args: str) -> str:
    airflow = Path(sys.executable).with_name("airflow")
    done = subprocess.run(
        [str(airflow), *args], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


#: what ``airflow providers hooks``, ``widgets`` and ``behaviours`` list, read where they read
#: it, Airflow's providers manager, in one process: each command discovers every installed
#: provider's hooks again, 23 CPU s for the three (the Google provider's among them). Our
#: form fields are JSON-schema ones (``conn-fields``), their type in ``schema``.
LISTINGS = """
import json
from airflow.providers_manager import ProvidersManager
manager = ProvidersManager()
hook = manager.hooks["retrywindow_airflow_api"]
widgets = manager.connection_form_widgets
print(json.dumps({
    "hook": {
        "class": hook.hook_class_name,
        "conn_id_attribute_name": hook.connection_id_attribute_name,
        "package_name": hook.package_name,
        "hook_name": hook.hook_name,
    },
    "widgets": {
        name: widget.field["schema"]["type"]
        for name, widget in widgets.items() if widget.package_name == "airflow-retrywindow"
    },
    "behaviours": sorted(manager.field_behaviours),
}))
"""


@pytest.mark.airflow
@pytest.mark.slow(minutes=1)
def test_airflow_lists_the_hook_its_form_fields_and_behaviour(airflow_db: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", LISTINGS], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    listed = json.loads(done.stdout.strip().splitlines()[-1])
    assert listed["hook"] == {
        "class": "airflow_retrywindow.hooks.airflow_api.AirflowApiHook",
        "conn_id_attribute_name": "airflow_conn_id",
        "package_name": "airflow-retrywindow",
        "hook_name": "Airflow REST API (retry window)",
    }
    assert listed["widgets"] == {
        "extra__retrywindow_airflow_api__access_token": ["string", "null"],
        "extra__retrywindow_airflow_api__ssl_ca_cert": ["string", "null"],
        "extra__retrywindow_airflow_api__verify_ssl": ["boolean", "null"],
    }
    assert "retrywindow_airflow_api" in listed["behaviours"]


@pytest.mark.airflow
def test_airflow_connections_keep_the_connection_type(airflow_db: Path) -> None:
    # an unknown --conn-type silently becomes "generic"; ours is known
    added = _airflow(
        "connections", "add", "rw_provider_probe", "--conn-type", "retrywindow_airflow_api",
        "--conn-host", "http://localhost:8080", "--conn-login", "rw_gate",
        "--conn-password", "probe-password",
    )  # fmt: skip
    try:
        assert "Successfully added" in added
        (row,) = json.loads(_airflow("connections", "get", "rw_provider_probe", "-o", "json"))
        assert row["conn_type"] == "retrywindow_airflow_api"
        assert row["get_uri"].startswith("retrywindow-airflow-api://")
    finally:
        _airflow("connections", "delete", "rw_provider_probe")


def test_the_reader_loads_without_airflow_and_the_hook_lives_where_the_provider_says() -> None:
    probe = (
        "import sys; from airflow_retrywindow.hooks import api_reader; "
        "import airflow_retrywindow.get_provider_info as info; found = info.get_provider_info(); "
        "loaded = lambda: sorted(m for m in sys.modules if m.split('.')[0] in "
        "('airflow', 'airflow_client')); assert loaded() == [], loaded(); "
        "assert not hasattr(api_reader, 'AirflowApiHook'); "
        "(module,) = found['hooks'][0]['python-modules']; "
        "from importlib import import_module; hook = import_module(module).AirflowApiHook; "
        "assert found['connection-types'][0]['hook-class-name'] == module + '.AirflowApiHook'; "
        "assert hook.__module__ == module and 'airflow.sdk' in sys.modules; "
        "print('ok')"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    )
    assert done.stdout.strip() == "ok", done.stderr


def test_public_names_load_lazily_without_airflow_until_asked() -> None:
    probe = (
        "import sys, airflow_retrywindow as rw; "
        "assert not any(m == 'airflow' or m.startswith('airflow.') for m in sys.modules); "
        "rw.Deadline; rw.Work; rw.OutcomeUnknown; "
        "assert not any(m == 'airflow' or m.startswith('airflow.') for m in sys.modules); "
        "rw.RetryWindowPolicy; assert 'airflow.sdk' in sys.modules; print('ok')"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    )
    assert done.stdout.strip() == "ok", done.stderr
