"""The one version module, and every module of the package on the Airflow installed here.

These tests run on whichever Airflow the virtualenv holds (3.1, 3.2 or 3.3): the
package's modules are imported in a fresh interpreter, and every name the package
imports from Airflow or its client, in any function, is looked up there.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pendulum
import pytest

from airflow_retrywindow import version_compat
from tests.package import version_decisions
from tests.package.test_import_cycles import PACKAGE

ROOT = PACKAGE.parent
#: modules allowed to fail to import before Airflow 3.3: none, the view and the policy included
NEED_3_3_TO_IMPORT: frozenset[str] = frozenset()
#: modules whose imports inside functions need Airflow 3.3: each runs them only for a
#: RetryWindowPolicy (its classifier, its chain, a resumable job's status), which cannot
#: be built before 3.3
NEED_3_3_TO_USE = frozenset(
    {
        "airflow_retrywindow/policies/classify.py",
        "airflow_retrywindow/policies/composition.py",
    }
)
#: names imported only where the caller says Airflow is 3.3 or newer (the view's task state
#: store, ``airflow_internals.metadata_tables``): absent before it
NEED_3_3_NAMES = frozenset({"airflow.models.task_state_store.TaskStateStoreModel"})

SWEEP = """
import importlib, json, pkgutil, sys
import airflow_retrywindow

failed = {}
for module in pkgutil.walk_packages(airflow_retrywindow.__path__, "airflow_retrywindow."):
    try:
        importlib.import_module(module.name)
    except BaseException as error:
        failed[module.name] = f"{type(error).__name__}: {error}"

missing = {}
for name, where in json.loads(sys.argv[1]):
    module, _, attribute = name.rpartition(".")
    try:
        found = importlib.import_module(module)
        if not hasattr(found, attribute):
            importlib.import_module(name)
    except BaseException as error:
        missing.setdefault(name, []).append(where)
print(json.dumps({"failed": failed, "missing": missing}))
"""


def _type_checking_only(tree: ast.Module) -> set[ast.AST]:
    """The nodes inside ``if TYPE_CHECKING:`` blocks, which only mypy reads (on 3.3)."""
    skipped: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for inner in node.body:
                skipped.update(ast.walk(inner))
    return skipped


def airflow_names() -> list[tuple[str, str]]:
    """Every ``from airflow... import name`` of the package outside ``version_compat``, with
    where it is; imports for the type checker only are left out."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = str(path.relative_to(ROOT))
        if path.name == "version_compat.py" or where in NEED_3_3_TO_USE:
            continue
        tree = ast.parse(path.read_text())
        skipped = _type_checking_only(tree)
        for node in ast.walk(tree):
            if node in skipped or not isinstance(node, ast.ImportFrom) or not node.module:
                continue
            if node.module.split(".")[0] in ("airflow", "airflow_client"):
                found.extend(
                    (f"{node.module}.{alias.name}", f"{where}:{node.lineno}")
                    for alias in node.names
                )
    return found


def run_script(script: str, *args: str) -> dict[str, Any]:
    """The JSON a script prints last, run by a fresh interpreter of this virtualenv."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


#: a name no Airflow has, swept with the package's: the sweep must find it missing
PLANTED = ("airflow.sdk.NoSuchName", "here.py:1")


@pytest.fixture(scope="module")
def sweep() -> dict[str, Any]:
    """What a fresh interpreter of this virtualenv could not import (one interpreter:
    each imports Airflow, seconds of a core)."""
    return run_script(SWEEP, json.dumps([*airflow_names(), PLANTED]))


def test_every_module_imports_on_this_airflow(sweep: dict[str, Any]) -> None:
    allowed = set() if version_compat.AIRFLOW_V_3_3_PLUS else NEED_3_3_TO_IMPORT
    failed = {name: error for name, error in sweep["failed"].items() if name not in allowed}
    assert failed == {}, f"on Airflow {version_compat.installed_version()}"


def test_every_airflow_name_the_package_imports_exists_here(sweep: dict[str, Any]) -> None:
    # a name Airflow moved between minors belongs in version_compat, newest first
    allowed = set() if version_compat.AIRFLOW_V_3_3_PLUS else NEED_3_3_NAMES
    missing = {
        name: where
        for name, where in sweep["missing"].items()
        if name not in allowed and name != PLANTED[0]
    }
    assert missing == {}, f"on Airflow {version_compat.installed_version()}"


def test_the_sweep_finds_a_name_airflow_does_not_have(sweep: dict[str, Any]) -> None:
    name, where = PLANTED
    assert sweep["missing"].get(name) == [where]


def test_the_installed_airflow_is_read_from_its_metadata() -> None:
    import airflow

    installed = version_compat.installed_version()
    assert installed == importlib.metadata.version("apache-airflow-core") == airflow.__version__
    release = version_compat.release_of(installed)
    assert version_compat.AIRFLOW_V_3_2_PLUS is (release >= (3, 2, 0))
    assert version_compat.AIRFLOW_V_3_3_PLUS is (release >= (3, 3, 0))
    assert (version_compat.missing_retry_policies() is None) is version_compat.AIRFLOW_V_3_3_PLUS


@pytest.mark.parametrize(
    ("text", "release"),
    [
        ("3.1.8", (3, 1, 8)),
        ("3.2.2", (3, 2, 2)),
        ("3.3", (3, 3, 0)),
        # a pre-release or a development build counts as its release
        ("3.3.0rc1", (3, 3, 0)),
        ("3.4.0.dev0+local", (3, 4, 0)),
        ("3.3.10", (3, 3, 10)),
        ("", (0, 0, 0)),
        ("not a version", (0, 0, 0)),
    ],
)
def test_a_version_is_read_by_its_release_numbers(text: str, release: tuple[int, ...]) -> None:
    assert version_compat.release_of(text) == release


@pytest.mark.parametrize(
    ("installed", "missing"),
    [
        ("3.1.8", "retry policies arrived in Airflow 3.3 (AIP-105); this Airflow is 3.1.8"),
        ("3.2.2", "retry policies arrived in Airflow 3.3 (AIP-105); this Airflow is 3.2.2"),
        ("", "retry policies arrived in Airflow 3.3 (AIP-105); this Airflow is not installed"),
        ("3.3.0rc1", None),
        ("3.3.2", None),
        ("3.4.0", None),
    ],
)
def test_retry_policies_are_missing_before_3_3(
    monkeypatch: pytest.MonkeyPatch, installed: str, missing: str | None
) -> None:
    monkeypatch.setattr(version_compat, "installed_version", lambda: installed)
    assert version_compat.missing_retry_policies() == missing


def _caught_by_the_task_runner(name: str) -> list[type]:
    """The classes named ``name`` that the installed task runner imports to catch."""
    from airflow.sdk.execution_time import task_runner

    tree = ast.parse(Path(task_runner.__file__).read_text())
    modules = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and node.module
        and any(alias.name == name for alias in node.names)
    }
    return [getattr(importlib.import_module(module), name) for module in sorted(modules)]


@pytest.mark.parametrize(
    "name",
    [
        "AirflowFailException",
        "AirflowRescheduleException",
        "AirflowSensorTimeout",
        "AirflowSkipException",
        "TaskDeferred",
    ],
)
def test_the_exceptions_raised_are_those_the_task_runner_catches(name: str) -> None:
    caught = _caught_by_the_task_runner(name)
    assert caught, f"the task runner of Airflow {version_compat.installed_version()} has no {name}"
    assert all(cls is getattr(version_compat, name) for cls in caught)


@pytest.mark.parametrize("name", sorted(version_compat.MOVED))
def test_every_moved_name_is_where_this_airflow_keeps_it(name: str) -> None:
    module = version_compat.module_of(name)
    found = getattr(version_compat, name)
    if module is None:  # not in this Airflow yet: its stand-in
        assert found is version_compat.MISSING[name]
    else:
        assert found is getattr(importlib.import_module(module), name)


def test_metrics_go_through_a_stats_that_counts_and_gauges() -> None:
    # Airflow 3.2's airflow.sdk.observability.stats module has neither: its Stats has both
    assert callable(version_compat.Stats.incr) and callable(version_compat.Stats.gauge)


def test_a_dag_alert_on_the_logical_date_is_computed_on_every_minor() -> None:
    # on 3.1 every reference was taken for a custom one, and refused
    from airflow.sdk import DAG
    from airflow.sdk.definitions.deadline import AsyncCallback, DeadlineAlert

    from airflow_retrywindow import Deadline

    logical = pendulum.datetime(2026, 12, 1, tz="UTC")
    alert = DeadlineAlert(
        reference=version_compat.DeadlineReference.DAGRUN_LOGICAL_DATE,
        interval=timedelta(hours=30),
        callback=AsyncCallback("tests.policy.deadline_dags.never_called"),
    )
    dag = DAG("rw_alert_on_every_minor", schedule=None, start_date=logical, deadline=alert)
    resolved = Deadline.dag_alert().resolve({"dag": dag, "logical_date": logical})
    assert resolved == logical.add(hours=30)


def test_the_configuration_is_airflows() -> None:
    # Airflow's own default, read through the configuration of this minor
    assert version_compat.conf.getint("core", "max_task_retry_delay") == 86400


#: a fresh interpreter: every log record kept from its first line, the imports given in
#: argv[1] run, then what was logged at WARNING or above printed
LOGGED_ON_IMPORT = """
import json, logging, sys

kept = []


class Keep(logging.Handler):
    def emit(self, record):
        kept.append(record)


logging.getLogger().addHandler(Keep())
logging.getLogger().setLevel(logging.DEBUG)
exec(sys.argv[1])
print(json.dumps([
    {"level": record.levelname, "logger": record.name, "message": record.getMessage(),
     "traceback": record.exc_info is not None}
    for record in kept if record.levelno >= logging.WARNING
]))
"""
#: a value the settings check refuses, so that its one ERROR shows that it ran
BAD_SETTING = {"AIRFLOW__RETRY_WINDOW__SENSOR_SHORT_WAIT": "soon"}


@pytest.mark.parametrize(
    "imports",
    [
        # a DAG file (or a DAG-integrity test) that names the policy before Airflow
        "from airflow_retrywindow import RetryWindowPolicy\nfrom airflow.sdk import DAG",
        "from airflow.sdk import DAG\nfrom airflow_retrywindow import RetryWindowPolicy",
    ],
)
def test_importing_the_package_in_any_order_logs_only_the_settings_check(imports: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", LOGGED_ON_IMPORT, imports],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **BAD_SETTING},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    logged = json.loads(done.stdout.strip().splitlines()[-1])
    # Airflow loads the cluster policy, whose settings check reports the bad value: nothing
    # else, and no traceback
    assert [(entry["level"], entry["traceback"]) for entry in logged] == [("ERROR", False)], logged
    assert "sensor_short_wait" in logged[0]["message"]
    assert logged[0]["logger"] == "airflow_retrywindow.policies.cluster_policy"


def test_only_the_version_module_decides_by_a_version() -> None:
    found = [
        f"{where}:{line}: {what}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if (where := str(path.relative_to(ROOT))) != version_decisions.VERSION_MODULE
        for line, what in version_decisions.decisions(where, path.read_text(encoding="utf-8"))
    ]
    assert found == [], (
        "decided by a version outside airflow_retrywindow/version_compat.py (ask it there):\n"
        + "\n".join(found)
    )


PLANTED_MODULE = "airflow_retrywindow/planted.py"


@pytest.mark.parametrize(
    "source",
    [
        "from airflow import __version__\n",
        "import airflow\n\nNEW = airflow.__version__ >= '3.3'\n",
        "from importlib.metadata import version\n\nV = version('apache-airflow-core')\n",
        "from packaging.version import Version\n",
        "import re\n\nVERSION = re.compile(r'(\\d+)\\.(\\d+)')\n",
        "def release(text):\n    return tuple(int(part) for part in text.split('.'))\n",
        "def release(text):\n    return list(map(int, text.split('.')))\n",
        "def new(release):\n    return release >= (3, 3)\n",
        "def new(text):\n    return text.startswith('3.3')\n",
        # a switch on what this Airflow can import
        "try:\n    from airflow.sdk import RetryPolicy\nexcept ImportError:\n    RetryPolicy = 0\n",
        "def chains():\n    try:\n        import airflow.sdk\n"
        "    except ModuleNotFoundError:\n        return False\n    return True\n",
        "import airflow.sdk\n\nCHAINS = hasattr(airflow.sdk, 'ChainRetryPolicy')\n",
    ],
)
def test_the_guard_finds_a_planted_version_decision(source: str) -> None:
    assert version_decisions.decisions(PLANTED_MODULE, source), source


def test_an_import_switch_is_allowed_in_its_one_listed_use_only() -> None:
    where, function = "airflow_retrywindow/policies/failures.py", "_resolve"
    assert (where, function) in version_decisions.IMPORT_SWITCHES
    source = (
        f"def {function}(path):\n    try:\n        pass\n    except ImportError:\n        pass\n"
    )
    assert version_decisions.decisions(where, source) == []
    assert version_decisions.decisions(PLANTED_MODULE, source) == [
        (4, "switches on an import: except ImportError")
    ]


def test_each_listed_import_switch_is_one_the_package_has() -> None:
    stale = [
        f"{where}: {function}"
        for where, function in version_decisions.IMPORT_SWITCHES
        if f"def {function}(" not in (ROOT / where).read_text(encoding="utf-8")
    ]
    assert stale == []
