"""Test-wide setup: a throwaway Airflow home with its own SQLite metadata DB.

Airflow reads its configuration when first imported, so the environment is set
here, at import time, before any test module can import Airflow.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devstack.stack import API_CONNECTION, POOL, PREPARED_FOLDER_ENV, prepared_sqlite_db
from tests.shared_stack import ModulesTogether, shared_stacks, stop_when_done

__all__ = ["shared_stacks"]  # a fixture of every module that shares a stack

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
# the run's workers inherit this process's environment: they share one prepared DB
if PREPARED_FOLDER_ENV not in os.environ:
    os.environ[PREPARED_FOLDER_ENV] = tempfile.mkdtemp(prefix="retrywindow-prepared-")


@pytest.fixture(scope="session")
def airflow_db() -> Iterator[Path]:
    """A migrated metadata DB in the throwaway Airflow home; yields the home.

    A copy of the run's prepared DB (:func:`devstack.stack.prepared_sqlite_db`, migrated
    once for every worker), without the pool and the connection a stack adds to it.
    """
    (AIRFLOW_HOME / "dags").mkdir(exist_ok=True)
    database = AIRFLOW_HOME / "airflow.db"
    shutil.copyfile(prepared_sqlite_db(), database)
    with sqlite3.connect(database) as db:
        db.execute("delete from connection where conn_id = ?", (API_CONNECTION,))
        db.execute("delete from slot_pool where pool = ?", (POOL[0],))
    yield AIRFLOW_HOME


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """A shared stack is stopped once the last test sharing it ran, its module's fixtures
    torn down."""
    stop_when_done(item, nextitem)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> ModulesTogether:
    """Hand out whole modules (``--dist loadfile``), those sharing a stack as one."""
    return ModulesTogether(config, log)


def has_retry_policies() -> bool:
    """Whether the installed Airflow has retry policies: 3.3 or later.

    Read only when a collected test needs it: the version module imports Airflow, seconds.
    """
    from airflow_retrywindow.version_compat import AIRFLOW_V_3_3_PLUS

    return AIRFLOW_V_3_3_PLUS


@pytest.fixture(scope="session")
def retry_policies() -> bool:
    """Whether the installed Airflow has retry policies (3.3 or later)."""
    return has_retry_policies()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip what needs Airflow 3.3 on older ones, and start the longest modules first.

    A test marked ``requires_airflow_3_3`` is skipped on Airflow 3.1 and 3.2 with the reason.

    ``make test`` spreads the modules over its workers (pytest-xdist, ``--dist loadfile``:
    a module's tests stay together, in order, so its Airflow stack starts once). The
    modules that start an Airflow take minutes each, so they are handed out first, the
    longest (``slow(minutes=N)``: N is what the module took in CI, on four workers beside
    the other steps) before the others, and the quick unit tests fill the workers' last
    minutes. The sort is stable: the order inside a module, and of modules
    of one length, stays as collected.
    """
    _skip_what_needs_airflow_3_3(items)
    minutes: dict[str, float] = {}
    for item in items:
        module = item.nodeid.split("::")[0]
        minutes[module] = max(minutes.get(module, 0.0), _minutes(item))
    items.sort(key=lambda item: -minutes[item.nodeid.split("::")[0]])


def _skip_what_needs_airflow_3_3(items: list[pytest.Item]) -> None:
    marked = [item for item in items if item.get_closest_marker("requires_airflow_3_3")]
    if not marked or has_retry_policies():
        return
    from airflow_retrywindow.version_compat import missing_retry_policies

    skip = pytest.mark.skip(reason=f"needs Airflow 3.3 or later: {missing_retry_policies()}")
    for item in marked:
        item.add_marker(skip)


def _minutes(item: pytest.Item) -> float:
    """How long the item's module takes, as its ``slow`` mark says: 0 when it is quick, a
    fraction of a minute when the mark gives no length."""
    mark = item.get_closest_marker("slow")
    if mark is None:
        return 0.0
    return float(mark.kwargs.get("minutes", 0.5))
