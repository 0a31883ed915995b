"""Airflow's internals: used only in airflow_internals.py, and each still where it was.

Two checks. The scan (:mod:`tests.package.airflow_uses`) reads every module of the package
but ``airflow_retrywindow/airflow_internals.py`` and fails on any use of Airflow outside
its public API: a module that is not public (``airflow.models``, ``airflow.utils``, the
Task SDK's submodules, ...), by import, attribute chain or string, a private name, the task
runner's internals, or a name computed where it cannot be read. Each kind is planted below.
The shape tests check, on the installed Airflow, each internal use that module keeps: the
name exists and has the shape the module relies on. A failure names the use, the shape
expected and the Airflow installed.

Checked on Airflow 3.1.8 (Python 3.10), 3.2.2 (Python 3.12) and 3.3.2 (Python 3.11).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import inspect
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_retrywindow import airflow_internals
from tests.package import airflow_uses
from tests.package.test_import_cycles import PACKAGE

#: the versions these shapes were checked on
CHECKED_ON = ("3.1.8", "3.2.2", "3.3.2")
INTERNALS = PACKAGE / "airflow_internals.py"


# -- the scan -------------------------------------------------------------------------


@functools.cache
def _package() -> tuple[airflow_uses.Module, ...]:
    """The modules to scan, read once for every scan of a test run."""
    return tuple(airflow_uses.modules(PACKAGE, skip=INTERNALS))


def violations(extra: dict[str, str] | None = None) -> list[str]:
    """Every use of Airflow outside its public API but in airflow_internals.py, as
    ``path:line: what``.

    :param extra: more modules to scan, by their path from the repository root, with their
        source.
    """
    planted = [airflow_uses.read(where, text) for where, text in (extra or {}).items()]
    return [
        f"{module.where}:{line}: {what}"
        for module in [*_package(), *planted]
        for line, what in module.uses()
    ]


def test_no_module_but_airflow_internals_uses_airflow_beyond_its_public_api() -> None:
    found = violations()
    assert found == [], (
        "Airflow's internals used outside airflow_retrywindow/airflow_internals.py (use "
        "Airflow's public API, or read them there, say why no public way exists, and check "
        "their shape in this test):\n" + "\n".join(found)
    )


PLANTED = "airflow_retrywindow/planted.py"


@pytest.mark.parametrize(
    "source",
    [
        "def f(task):\n    return task._pre_execute_hook\n",
        "def f(task):\n    return getattr(task, '_dag', None)\n",
        "from airflow.sdk._shared.secrets_masker import redact\n",
        "import airflow.providers.common.compat._retry_policy\n",
        "MODULES = ('airflow.providers.common.compat._retry_policy',)\n",
        "def f(runner):\n    return runner.SUPERVISOR_COMMS\n",
        "SOURCE = ('sdk', '_shared', 'secrets_masker')\n",
        "from airflow.sdk.execution_time.xcom import XCom\n",
        "from airflow.models.xcom import XComModel\n",
        # Airflow's internal modules, however they are reached
        "from airflow import models\n",
        "from airflow.utils.state import TaskInstanceState\n",
        "import airflow.utils.state\n",
        "import airflow\n\ndef f():\n    return airflow.utils.state.State.FAILED\n",
        "from airflow.jobs.scheduler_job_runner import SchedulerJobRunner\n",
        "from airflow.serialization.serialized_objects import DagSerialization\n",
        "from airflow.api_fastapi.common.db.common import SessionDep\n",
        "from airflow.api_fastapi.core_api.security import requires_access_dag\n",
        "import importlib\n\nJOBS = importlib.import_module('airflow.jobs.job')\n",
        # the Task SDK's submodules, where airflow.sdk exports the name or none
        "from airflow.sdk.bases.notifier import BaseNotifier\n",
        "from airflow.sdk.definitions.mappedoperator import MappedOperator\n",
        "from airflow.sdk.log import redact\n",
        # a name the scan cannot read
        "from importlib import import_module\n\ndef f(path):\n    return import_module(path)\n",
        "def f(ti, name):\n    return getattr(ti, name)\n",
        "def f(ti, name):\n    return getattr(ti, f'_{name}')\n",
        "NAMES = ('dag_id', '_dag')\n\ndef f(ti):\n    return [getattr(ti, n) for n in NAMES]\n",
        # the package's own private names that are Airflow's too, outside their one use
        "def f(ti):\n    return ti._task_instance\n",
        "def f(alert):\n    return alert._deadline\n",
        "def f(trigger):\n    return trigger._inner\n",
    ],
)
def test_the_scan_finds_a_planted_use(source: str) -> None:
    assert airflow_uses.read(PLANTED, source).uses(), source


@pytest.mark.parametrize(
    "source",
    [
        # Airflow's public API
        "from airflow.sdk import BaseOperator, TaskInstanceState\n",
        "from airflow.providers.standard.triggers.temporal import DateTimeTrigger\n",
        "from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity\n",
        "from airflow.sdk.log import mask_secret\n",
        # names read from a literal or a constant of the module, on anything; any, on self
        "FIELDS = {'duration': 'd'}\n\ndef f(w):\n    return [getattr(w, n) for n in FIELDS]\n",
        "def f(ti):\n    return [getattr(ti, n) for n in ('dag_id', 'run_id')]\n",
        "class A:\n    def __init__(self, n):\n        self._kept = getattr(self, n)\n",
    ],
)
def test_the_scan_leaves_airflows_public_api_and_readable_names_alone(source: str) -> None:
    assert airflow_uses.read(PLANTED, source).uses() == []


def test_an_own_private_name_is_allowed_in_its_one_use_only() -> None:
    where, name = "airflow_retrywindow/triggers/gated.py", "_inner"
    assert (where, name) in airflow_uses.OWN
    source = f"def f(trigger):\n    return trigger.{name}\n"
    assert airflow_uses.read(where, source).uses() == []
    assert airflow_uses.read(PLANTED, source).uses() == [(2, f"attribute .{name}")]


def test_each_per_use_entry_names_a_use_the_package_has() -> None:
    stale = [
        f"{where}: {what}"
        for table in (airflow_uses.OWN, airflow_uses.COMPUTED, airflow_uses.OLDER_MINORS)
        for where, what in table
        if what not in (PACKAGE.parent / where).read_text(encoding="utf-8")
    ]
    assert stale == []


# -- the shapes -----------------------------------------------------------------------


def _installed() -> str:
    from airflow_retrywindow.version_compat import installed_version

    return installed_version() or "not installed"


def _shape(use: str, expected: str, holds: bool) -> None:
    assert holds, (
        f"Airflow's private {use} is no longer what airflow_retrywindow/airflow_internals.py "
        f"relies on: expected {expected}; installed Airflow {_installed()} (checked on "
        f"{', '.join(CHECKED_ON)}). Find the new way and update that module."
    )


def _fields(cls: type) -> dict[str, Any]:
    """The attributes a class declares: dataclass, attrs, pydantic or annotations."""
    if dataclasses.is_dataclass(cls):
        return {field.name: field for field in dataclasses.fields(cls)}
    attrs = getattr(cls, "__attrs_attrs__", None)
    if attrs is not None:
        return {field.name: field for field in attrs}
    models = getattr(cls, "model_fields", None)
    found: dict[str, Any] = dict(models) if isinstance(models, dict) else {}
    for klass in reversed(cls.__mro__):
        found.update(getattr(klass, "__annotations__", {}))
    return found


def test_an_operators_pre_execute_hook_is_where_the_task_runner_calls_it() -> None:
    from airflow.sdk import BaseOperator
    from airflow.sdk.execution_time import task_runner

    hook = airflow_internals.PRE_EXECUTE_HOOK
    built = BaseOperator(task_id="shape", pre_execute=print)
    _shape(
        "BaseOperator._pre_execute_hook",
        "the pre_execute= argument kept in that attribute",
        getattr(built, hook, None) is print,
    )
    _shape(
        "task runner's call of _pre_execute_hook",
        "task_runner._execute_task reads task._pre_execute_hook",
        f"task.{hook}" in inspect.getsource(task_runner),
    )


def test_a_mapped_operators_pre_execute_hook_is_a_partial_argument() -> None:
    from airflow.sdk import DAG, BaseOperator

    with DAG("shape_mapped", schedule=None):
        mapped = BaseOperator.partial(task_id="m", pre_execute=print).expand(
            doc=["a", "b"]  # any templated-free argument maps
        )
    partial = getattr(mapped, "partial_kwargs", None)
    _shape(
        'MappedOperator.partial_kwargs["pre_execute"]',
        "a dict holding the pre_execute= argument",
        isinstance(partial, dict) and partial.get("pre_execute") is print,
    )
    _shape(
        "pre_execute_hook() of a mapped operator",
        "the hook given to partial()",
        airflow_internals.pre_execute_hook(mapped) is print,
    )


def test_a_mapped_operator_says_how_it_maps() -> None:
    from airflow.sdk import DAG, BaseOperator

    with DAG("shape_expand_kwargs", schedule=None):
        loose = BaseOperator.partial(task_id="loose").expand_kwargs([{"doc": "a"}], strict=False)
        strict = BaseOperator.partial(task_id="strict").expand_kwargs([{"doc": "a"}])
    _shape(
        "MappedOperator._expand_input_attr and _disallow_kwargs_override",
        "'expand_input', and False for expand_kwargs(strict=False), True by default",
        airflow_internals.mapped_input(loose) == (loose.expand_input, True)
        and airflow_internals.mapped_input(strict) == (strict.expand_input, False),
    )


def test_the_running_try_keeps_what_it_resumed_with() -> None:
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    fields = _fields(RuntimeTaskInstance)
    _shape(
        "RuntimeTaskInstance._ti_context_from_server",
        "a field holding the server's context, whose next_method and next_kwargs are read",
        "_ti_context_from_server" in fields,
    )
    from airflow.sdk.api.datamodels._generated import TIRunContext

    context = _fields(TIRunContext)
    _shape(
        "TIRunContext.next_method and next_kwargs",
        "both fields of the server's context",
        "next_method" in context and "next_kwargs" in context,
    )


def test_the_task_runner_keeps_its_supervisor_channel() -> None:
    from airflow.sdk.execution_time import supervisor, task_runner

    _shape(
        "task_runner.SUPERVISOR_COMMS",
        "a module-level name of the task runner",
        "SUPERVISOR_COMMS" in vars(task_runner)
        or "SUPERVISOR_COMMS" in getattr(task_runner, "__annotations__", {}),
    )
    _shape(
        "supervisor.InProcessSupervisorComms",
        "a class (dag.test()'s supervisor)",
        isinstance(getattr(supervisor, "InProcessSupervisorComms", None), type),
    )
    assert airflow_internals.in_process_supervisor(object()) is False


def test_a_fixed_deadline_keeps_the_datetime_it_was_given() -> None:
    import pendulum
    from airflow.sdk.definitions.deadline import DeadlineReference

    given = pendulum.datetime(2026, 1, 2, 3, 4, 5, tz="Europe/Paris")
    reference = DeadlineReference.FIXED_DATETIME(given)
    _shape(
        "FixedDatetimeDeadline._datetime",
        "the datetime given to DeadlineReference.FIXED_DATETIME, as given",
        airflow_internals.fixed_deadline_datetime(reference) is given,
    )


def test_the_masker_keeps_its_default_names_in_its_source() -> None:
    import airflow

    module = sys.modules.get(airflow_internals.MASKER_MODULE) or __import__(
        airflow_internals.MASKER_MODULE, fromlist=["x"]
    )
    loaded = frozenset(getattr(module, airflow_internals.MASKER_NAMES, ()))
    source = Path(airflow.__path__[0], airflow_internals.MASKER_SOURCE)
    _shape(
        f"{airflow_internals.MASKER_MODULE}.{airflow_internals.MASKER_NAMES}",
        "a non-empty collection of names with 'password' among them",
        "password" in loaded,
    )
    _shape(
        f"the masker's source {airflow_internals.MASKER_SOURCE}",
        f"a file assigning {airflow_internals.MASKER_NAMES} the same names as a literal",
        source.is_file() and airflow_internals._literal_names(source) == loaded,
    )


def test_the_masker_masks_what_mask_secret_registered() -> None:
    from airflow.sdk.log import mask_secret

    secret = "shape-check-4f1c9a"  # a value to mask
    mask_secret(secret)
    _shape(
        f"{airflow_internals.MASKER_MODULE}.redact",
        "a function that masks in a text every value mask_secret registered",
        secret not in str(airflow_internals.masked(f"token {secret} kept")),
    )


def test_the_api_server_gives_a_route_its_session_and_the_dag_check() -> None:
    from typing import Annotated, get_args, get_origin

    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    from fastapi.params import Depends
    from sqlalchemy.orm import Session

    session = airflow_internals.api_session()
    kind, *extras = get_args(session) or (None,)
    _shape(
        "SessionDep of airflow.api_fastapi.common.db.common",
        "Annotated[Session, Depends(...)]: a route's argument FastAPI fills",
        get_origin(session) is Annotated
        and isinstance(kind, type)
        and issubclass(kind, Session)
        and any(isinstance(extra, Depends) for extra in extras),
    )
    check = airflow_internals.dag_read_access(DagAccessEntity.RUN)
    _shape(
        "requires_access_dag of airflow.api_fastapi.core_api.security",
        "a callable a route's Depends() takes, given the method and the DAG's entity",
        callable(check),
    )


def test_the_scheduler_writes_the_state_mismatch_the_policy_reads() -> None:
    from airflow.jobs import scheduler_job_runner

    text = inspect.getsource(scheduler_job_runner)
    template = re.search(r'"(Executor %s reported[^"]*)"', text)
    _shape(
        "the scheduler's 'state mismatch' message",
        "process_executor_events logging 'Executor %s reported that the task instance %s "
        "finished with state %s, but the task instance's state attribute is %s'",
        template is not None and f'"{airflow_internals.STATE_MISMATCH}"' in text,
    )
    assert template is not None
    sample = template.group(1) % ("LocalExecutor", "ti", "success", "queued")
    _shape(
        "the scheduler's 'state mismatch' message",
        "a text the policy's pattern reads both states from",
        airflow_internals.state_mismatch(sample) == ("success", "queued"),
    )


def test_a_serialized_task_lists_its_extra_links() -> None:
    from airflow.sdk import DAG, BaseOperator
    from airflow.serialization import serialized_objects

    from airflow_retrywindow.links.retry_window import RetryWindowLink

    class Linked(BaseOperator):
        operator_extra_links = (RetryWindowLink(),)  # as the gate and the sensor carry it

    with DAG("shape_links", schedule=None) as dag:
        Linked(task_id="gate")
    # what the DAG processor stores (3.2 renamed SerializedDAG to DagSerialization)
    serializer = getattr(serialized_objects, "DagSerialization", None)
    data = (serializer or serialized_objects.SerializedDAG).to_dict(dag)
    (task,) = data["dag"]["tasks"]
    _shape(
        "the serialization's _operator_extra_links",
        "a mapping of each extra link's name in the task's __var",
        RetryWindowLink.name in airflow_internals.serialized_extra_links(task["__var"]),
    )


def test_the_configured_xcom_backend_is_where_the_sdk_resolves_it() -> None:
    from airflow.sdk.bases.xcom import BaseXCom

    backend = airflow_internals.xcom_backend()
    _shape(
        f"{airflow_internals.XCOM_BACKEND}.XCom",
        "the class [core] xcom_backend names, a BaseXCom",
        isinstance(backend, type) and issubclass(backend, BaseXCom),
    )
    if _has_retry_policies():  # the gated trigger, which calls aset, exists from 3.3
        _shape(
            f"{airflow_internals.XCOM_BACKEND}.XCom.aset",
            "a coroutine function (key, value, dag_id=, task_id=, run_id=, map_index=)",
            inspect.iscoroutinefunction(getattr(backend, "aset", None)),
        )


def _has_retry_policies() -> bool:
    try:
        from airflow.sdk.definitions import retry_policy  # noqa: F401
    except ImportError:
        return False
    return True


def test_a_changed_shape_says_what_changed_and_where() -> None:
    with pytest.raises(AssertionError) as failed:
        _shape("Thing._name", "an attribute holding the thing", False)
    text = str(failed.value)
    assert "Thing._name" in text and "expected an attribute holding the thing" in text
    assert f"installed Airflow {_installed()}" in text and "3.1.8, 3.2.2, 3.3.2" in text


def test_bigquerys_operator_keeps_the_job_it_read() -> None:
    bigquery = pytest.importorskip("airflow.providers.google.cloud.operators.bigquery")
    operator = bigquery.BigQueryInsertJobOperator
    _shape(
        "BigQueryInsertJobOperator._job",
        "an attribute the operator sets to the job it read",
        "self._job =" in inspect.getsource(operator),
    )


def test_the_views_store_reads_the_columns_it_names() -> None:
    """plugins/store.py reads Airflow's ORM models, as Airflow's own API routes do."""
    from airflow_retrywindow.version_compat import AIRFLOW_V_3_3_PLUS

    tables = airflow_internals.metadata_tables(task_state_store=AIRFLOW_V_3_3_PLUS)
    key_columns = ("dag_id", "run_id", "task_id", "map_index", "key")
    read = {
        tables.dag_run: ("id", "dag_id", "run_id", "created_dag_version"),
        tables.task_instance: ("dag_id", "run_id", "task_id", "map_index"),
        tables.xcom: (*key_columns, "deserialize_value"),
        tables.pool: ("pool",),
        tables.serialized_dag: ("data",),
    }
    # the task state store is read only where Airflow has one: from 3.3 on, and only there
    _shape(
        "ORM model TaskStateStoreModel",
        "airflow.models.task_state_store from Airflow 3.3 on, and only there",
        (importlib.util.find_spec("airflow.models.task_state_store") is not None)
        is AIRFLOW_V_3_3_PLUS,
    )
    if tables.task_state_store is not None:
        assert tables.task_state_store.__tablename__ == "task_state_store"
        read[tables.task_state_store] = (*key_columns, "value")
    for model, names in read.items():
        missing = [name for name in names if not hasattr(model, name)]
        _shape(f"ORM model {model.__name__}", f"the columns {', '.join(names)}", not missing)
