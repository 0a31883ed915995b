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
