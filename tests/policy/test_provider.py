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
    assert providers["airflow-retrywindow"]["version"] == "0.1.0"


def test_provider_info_names_modules_that_exist() -> None:
    import importlib

    from airflow_retrywindow.get_provider_info import get_provider_info

    info = get_provider_info()
    assert info["package-name"] == "airflow-retrywindow"
    for kind in ("operators", "sensors"):
        for module in info[kind][0]["python-modules"]:
            importlib.import_module(module)


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
