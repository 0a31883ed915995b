"""Test-wide setup: a throwaway Airflow home with its own SQLite metadata DB.

Airflow reads its configuration when first imported, so the environment is set
here, at import time, before any test module can import Airflow.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="retrywindow-airflow-"))

os.environ.update(
    {
        "AIRFLOW_HOME": str(AIRFLOW_HOME),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{AIRFLOW_HOME}/airflow.db",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(AIRFLOW_HOME / "dags"),
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
    }
)


@pytest.fixture(scope="session")
def airflow_db() -> Iterator[Path]:
    """A migrated metadata DB in the throwaway Airflow home; yields the home."""
    (AIRFLOW_HOME / "dags").mkdir(exist_ok=True)
    airflow = Path(sys.executable).with_name("airflow")
    done = subprocess.run(
        [str(airflow), "db", "migrate"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    yield AIRFLOW_HOME


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Start the slow modules first.

    ``make test`` spreads the modules over its workers (pytest-xdist, ``--dist loadfile``:
    a module's tests stay together, in order, so its Airflow stack starts once). The
    modules that start an Airflow take minutes each, so they are handed out first and the
    quick unit tests fill the workers' last minutes. The sort is stable: the order inside
    a module, and of modules of one kind, stays as collected.
    """
    slow_modules = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in slow_modules)
