"""Airflow's private names: only in airflow_internals.py, and each still where it was.

Two checks. The scan reads every module of the package with ``ast`` and fails on
any private name of Airflow, its client or its providers outside
``airflow_retrywindow/airflow_internals.py``: an attribute or a string naming
``_something`` the package does not define itself, an import from a private module
(``airflow.sdk._shared``), the task runner's internals, or the metadata DB's ORM
models (``airflow.models``). The shape tests check,
on the installed Airflow, each private use that module keeps: the name exists and
has the shape the module relies on. A failure names the use, the shape expected and
the Airflow installed.

Checked on Airflow 3.1.8 (Python 3.10), 3.2.2 (Python 3.12) and 3.3.2 (Python 3.11).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib.util
import inspect
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_retrywindow import airflow_internals
from tests.package.test_import_cycles import PACKAGE

#: the versions these shapes were checked on
CHECKED_ON = ("3.1.8", "3.2.2", "3.3.2")
INTERNALS = PACKAGE / "airflow_internals.py"
#: private names of the standard library's named tuples, which are their public API
STANDARD = frozenset({"_replace", "_fields", "_asdict", "_make", "_field_defaults"})
#: names of Airflow's internals that do not start with an underscore
INTERNAL_NAMES = frozenset({"SUPERVISOR_COMMS", "InProcessSupervisorComms"})
#: roots of the modules whose private names count
FOREIGN_ROOTS = ("airflow", "airflow_client")
#: the task SDK's internals (the task runner, its supervisor, the configured XCom backend)
#: and the metadata DB's ORM models
INTERNAL_MODULES = ("airflow.sdk.execution_time", "airflow.models")
_PRIVATE = re.compile(r"_[A-Za-z0-9][A-Za-z0-9_]*")
_DUNDER = re.compile(r"__\w+__")


# -- the scan -------------------------------------------------------------------------


def _modules(skip: Path | None = INTERNALS) -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        if path != skip:
            yield path, ast.parse(path.read_text(encoding="utf-8"), str(path))


def _private(name: str) -> bool:
    return bool(_PRIVATE.fullmatch(name)) and not _DUNDER.fullmatch(name)


def _on_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def own_private_names(trees: list[ast.Module]) -> frozenset[str]:
    """Every private name the package defines: functions, classes, variables, its objects'
    attributes (set on ``self``) and slots."""
    found: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.add(node.name)
            elif isinstance(node, ast.arg):
                found.add(node.arg)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                found.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                if _on_self(node.value):
                    found.add(node.attr)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                found.add(node.target.id)
            elif isinstance(node, ast.Call) and _sets_own_attribute(node):
                found.add(node.args[1].value)  # type: ignore[attr-defined]
            elif isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == "__slots__" for target in node.targets
            ):
                found.update(
                    item.value
                    for item in ast.walk(node.value)
                    if isinstance(item, ast.Constant) and isinstance(item.value, str)
                )
    return frozenset(name for name in found if _private(name))


def _sets_own_attribute(node: ast.Call) -> bool:
    """``object.__setattr__(self, "_name", value)``."""
    func = node.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "__setattr__"
        and len(node.args) >= 2
        and _on_self(node.args[0])
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    )


def _foreign_module(name: str) -> bool:
    parts = name.split(".")
    internal = any(name == root or name.startswith(f"{root}.") for root in INTERNAL_MODULES)
    return internal or (parts[0] in FOREIGN_ROOTS and any(_private(part) for part in parts[1:]))


def private_uses(tree: ast.Module, own: frozenset[str]) -> Iterator[tuple[int, str]]:
    """Each use of a private name of Airflow's in ``tree``: its line and what it is."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute | ast.Name):
            what = _named(node, own)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            what = _written(node.value, own)
        elif isinstance(node, ast.ImportFrom | ast.Import):
            what = _imported(node)
        else:
            what = None
        if what:
            yield node.lineno, what


def _named(node: ast.Attribute | ast.Name, own: frozenset[str]) -> str | None:
    name = node.attr if isinstance(node, ast.Attribute) else node.id
    if name in INTERNAL_NAMES:
        return f"name {name}"
    foreign = _private(name) and name not in own and name not in STANDARD
    if isinstance(node, ast.Attribute) and foreign and not _on_self(node.value):
        return f"attribute .{name}"
    return None


def _written(text: str, own: frozenset[str]) -> str | None:
    """A string naming a private attribute, an internal name or a private module."""
    foreign = _private(text) and text not in own and text not in STANDARD
    if foreign or text in INTERNAL_NAMES or _foreign_module(text):
        return f"string {text!r}"
    return None


def _imported(node: ast.ImportFrom | ast.Import) -> str | None:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names if _foreign_module(alias.name)]
        return f"import {', '.join(names)}" if names else None
    module = node.module or ""
    if node.level or module.split(".")[0] not in FOREIGN_ROOTS:
        return None
    if _foreign_module(module):
        return f"import from {module}"
    names = [a.name for a in node.names if _private(a.name) or a.name in INTERNAL_NAMES]
    return f"import {', '.join(names)} from {module}" if names else None


@functools.cache
def _package() -> tuple[tuple[tuple[Path, ast.Module], ...], frozenset[str]]:
    """The modules to scan, parsed, and the private names the package defines: read once
    for every scan of a test run."""
    found = tuple(_modules())
    trees = [tree for _, tree in found] + [ast.parse(INTERNALS.read_text(encoding="utf-8"))]
    return found, own_private_names(trees)


def violations(extra: dict[str, str] | None = None) -> list[str]:
    """Every private use of Airflow's outside airflow_internals.py, as ``path:line: what``.

    :param extra: more modules to scan, by name, with their source.
    """
    found, own = _package()
    planted = [(Path(name), ast.parse(text)) for name, text in (extra or {}).items()]
    return [
        f"{path.relative_to(PACKAGE.parent) if path.is_absolute() else path}:{line}: {what}"
        for path, tree in [*found, *planted]
        for line, what in private_uses(tree, own)
    ]


def test_no_module_but_airflow_internals_touches_a_private_name_of_airflow() -> None:
    found = violations()
    assert found == [], (
        "private names of Airflow used outside airflow_retrywindow/airflow_internals.py "
        "(read them there, say why no public way exists, and check their shape in this "
        "test):\n" + "\n".join(found)
    )


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
    ],
)
def test_the_scan_finds_a_planted_private_use(source: str) -> None:
    found = violations({"planted.py": source})
    assert [line for line in found if line.startswith("planted.py:")], source


def test_the_scan_leaves_the_packages_own_private_names_alone() -> None:
    source = (
        "class A:\n    def __init__(self):\n        self._kept = 1\n\n"
        "def f(a):\n    return a._kept\n"
    )
    assert violations({"own.py": source}) == []


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
