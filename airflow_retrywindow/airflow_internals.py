"""Airflow's private names this package reads, in one place, each where no public way exists.

Airflow may change any of these without notice. No other module of the package
touches a private name of Airflow, its client or its providers
(tests/package/test_airflow_internals.py checks that, and the shape of each use
below on the installed Airflow; it names the versions it was checked on).

Each use, why no public way exists, and since when Airflow has it: "3.1" means
present in 3.1.8, the oldest Airflow supported, and in 3.2.2 and 3.3.2, where the
test checked it too.

* **an operator's pre-execute hook** (``BaseOperator._pre_execute_hook``; a mapped
  operator's ``partial_kwargs["pre_execute"]``): the cluster policy puts the
  retry-start check and the gated deferral in front of a task it did not build.
  The public way, the ``pre_execute=`` argument, exists only while the operator
  is built; ``on_execute_callback`` cannot refuse a try (the task runner logs and
  drops what it raises) and, like overriding the public ``pre_execute`` method,
  runs after the DAG author's own ``pre_execute=`` hook. Since 3.1.
* **the resumed try's next method** (``RuntimeTaskInstance._ti_context_from_server``):
  the task runner keeps a try's ``next_method`` and ``next_kwargs`` nowhere else,
  and the context handed to ``pre_execute`` hooks carries neither. Since 3.1.
* **how a mapped operator maps its arguments** (``MappedOperator._expand_input_attr``,
  ``_disallow_kwargs_override``): whether a classic operator was mapped with
  ``expand_kwargs(..., strict=False)``, whose mapped arguments may override its
  retry settings per map index; Airflow keeps ``strict`` in no public attribute.
  Since 3.1.
* **a fixed deadline's instant** (``FixedDatetimeDeadline._datetime``): the
  reference keeps the datetime the DAG author gave only there; its public
  serialization (``serialize_reference``) is a POSIX timestamp, which cannot say
  whether the datetime was naive. Since 3.1.
* **the secrets masker's default names** (``DEFAULT_SENSITIVE_FIELDS`` of
  ``airflow.sdk._shared.secrets_masker``, and that module's source file): the
  SDK's public ``mask_secret`` and ``redact`` hide values, but no public name
  says which keys Airflow counts as sensitive. Read from the source (not
  imported) in a process that has not loaded Airflow, where importing it would
  cost seconds. Since 3.1.
* **the secrets masker's redaction** (``redact`` of
  ``airflow.sdk._shared.secrets_masker``): the SDK's public ``mask_secret`` registers a
  value, but only its log pipeline applies the masker; no public name masks a text the
  package stores (a decision's evidence, an error it keeps). Since 3.1.
* **the task runner's channel to its supervisor** (``SUPERVISOR_COMMS`` of
  ``airflow.sdk.execution_time.task_runner``, and the supervisor's
  ``InProcessSupervisorComms``): whether this process runs a task under a
  supervisor, and whether that supervisor is ``dag.test()``'s, whose execution
  API is served in this process. Neither is public. Since 3.1.
* **the scheduler's "state mismatch" text** (``process_executor_events`` in
  ``airflow/jobs/scheduler_job_runner.py``): the event log entry's ``extra`` is
  free text; the REST API gives no field with the executor's and the task
  instance's states. Since 3.1.
* **the configured XCom backend** (``XCom`` of ``airflow.sdk.execution_time.xcom``):
  the triggerer keeps a gated trigger's failure XComs with the class ``[core]
  xcom_backend`` names; the SDK's public ``BaseXCom`` is not that class, and the
  SDK resolves it only there. Since 3.1; its ``aset``, which the trigger calls, since
  3.3 (the gated trigger exists only there).
* **BigQuery's job** (``BigQueryInsertJobOperator._job``): the job the operator
  just read, whose ``errors`` it tolerated; the operator keeps it in no public
  attribute. Checked with the Google provider 22.8.0 (Airflow 3.3 only).
* **a serialized task's extra links** (the ``_operator_extra_links`` key of the
  DAG's serialization): which tasks of a run carry the Retry window link, read
  from the stored serialization without deserializing the whole DAG in the API
  server. Since 3.1.
* **the API server's request session and DAG access** (``SessionDep`` of
  ``airflow.api_fastapi.common.db.common``, ``requires_access_dag`` of
  ``airflow.api_fastapi.core_api.security``): the Retry window view's routes read with the
  request's metadata DB session and let in only a user who may read the DAG's runs, task
  instances and XComs, as Airflow's own routes do. A plugin's FastAPI app is public, and
  so is the auth manager's ``is_authorized_dag``, but only these resolve the request's
  user from its session cookie or bearer token. Since 3.1.
* **the metadata DB's ORM models** (``DagRun``, ``TaskInstance``, ``Pool``,
  ``XComModel``, ``SerializedDagModel``, and from 3.3 ``TaskStateStoreModel``): the
  Retry window view runs inside the API server and reads what the policy, the gates
  and the sensors left with the request's session, as Airflow's own API routes do.
  The public way, the REST API, would have the API server call itself over HTTP
  with the viewer's token, a request for each read of a page. Airflow documents
  neither its tables nor its models as public. Since 3.1; the task state store's
  since 3.3, ``None`` before.

Nothing here imports Airflow when this module is imported.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the operator attribute Airflow's task runner calls before ``execute``
PRE_EXECUTE_HOOK = "_pre_execute_hook"
#: the mapped operator's argument that becomes that attribute on each map index
PRE_EXECUTE_ARGUMENT = "pre_execute"
#: where the masker keeps its default names, inside the installed ``airflow`` package
MASKER_SOURCE = Path("sdk", "_shared", "secrets_masker", "secrets_masker.py")
MASKER_MODULE = "airflow.sdk._shared.secrets_masker"
MASKER_NAMES = "DEFAULT_SENSITIVE_FIELDS"
#: the event Airflow's scheduler writes when it fails a try whose state it did not expect
STATE_MISMATCH = "state mismatch"
#: that event's text (``process_executor_events``); the states are its two groups
STATE_MISMATCH_TEXT = re.compile(
    r"finished with state (\w+), but the task instance's state attribute is (\w+)"
)
#: where a serialized task lists its extra links
SERIALIZED_EXTRA_LINKS = "_operator_extra_links"
XCOM_BACKEND = "airflow.sdk.execution_time.xcom"
TASK_RUNNER = "airflow.sdk.execution_time.task_runner"
SUPERVISOR = "airflow.sdk.execution_time.supervisor"


class AirflowInternalsError(RuntimeError):
    """A private part of Airflow this package reads is not where it was."""


# -- pre-execute hooks ---------------------------------------------------------------


def pre_execute_hook(task: Any) -> Callable[[Any], None] | None:
    """The hook Airflow runs before ``task``'s ``execute`` (a mapped task's: each map index's)."""
    partial = getattr(task, "partial_kwargs", None)
    if isinstance(partial, dict):
        return partial.get(PRE_EXECUTE_ARGUMENT)
    return getattr(task, PRE_EXECUTE_HOOK, None)


def set_pre_execute_hook(task: Any, hook: Callable[[Any], None]) -> None:
    """Make ``hook`` the one Airflow runs before ``task``'s ``execute``.

    A mapped task keeps it in its partial arguments, which every map index is built from.
    """
    partial = getattr(task, "partial_kwargs", None)
    if isinstance(partial, dict):
        partial[PRE_EXECUTE_ARGUMENT] = hook
    else:
        setattr(task, PRE_EXECUTE_HOOK, hook)


# -- the running try -------------------------------------------------------------------


def resumed_with(ti: Any) -> tuple[str | None, Any]:
    """The ``next_method`` and ``next_kwargs`` the running try resumed with, else ``(None, None)``.

    :param ti: the running task instance (the task runner's).
    """
    server = getattr(ti, "_ti_context_from_server", None)
    return getattr(server, "next_method", None), getattr(server, "next_kwargs", None)


def supervisor_comms() -> Any:
    """The task runner's channel to its supervisor; ``None`` outside a task run."""
    runner = sys.modules.get(TASK_RUNNER)
    return getattr(runner, "SUPERVISOR_COMMS", None) if runner is not None else None


def in_process_supervisor(comms: Any) -> bool:
    """Whether ``comms`` is ``dag.test()``'s supervisor, with its execution API in this process."""
    # only dag.test() loads the in-process supervisor; no import when it is not loaded
    supervisor = sys.modules.get(SUPERVISOR)
    in_process = getattr(supervisor, "InProcessSupervisorComms", None)
    return in_process is not None and isinstance(comms, in_process)


def xcom_backend() -> Any:
    """The XCom class of ``[core] xcom_backend``, as Airflow's triggerer and workers use it."""
    return importlib.import_module(XCOM_BACKEND).XCom


# -- what a DAG holds ------------------------------------------------------------------


def mapped_input(task: Any) -> tuple[Any, bool] | None:
    """A classic mapped operator's expand input, and whether its mapped arguments may
    override its ``partial()`` ones (``expand_kwargs(..., strict=False)``).

    ``None`` when ``task`` is not mapped, or is a mapped ``@task`` (its arguments are
    the function's).
    """
    if getattr(task, "_expand_input_attr", None) != "expand_input":
        return None
    return getattr(task, "expand_input", None), not getattr(task, "_disallow_kwargs_override", True)


def fixed_deadline_datetime(reference: Any) -> Any:
    """The datetime a ``DeadlineReference.FIXED_DATETIME`` was given, naive or not."""
    return getattr(reference, "_datetime", None)


def serialized_extra_links(task: Mapping[str, Any]) -> Mapping[str, Any]:
    """The extra links of one task of a DAG's stored serialization (its ``__var``)."""
    links = task.get(SERIALIZED_EXTRA_LINKS)
    return links if isinstance(links, Mapping) else {}


@dataclass(frozen=True)
class MetadataTables:
    """The ORM models of the metadata DB's tables the Retry window view reads.

    :param dag_run: ``DagRun``.
    :param task_instance: ``TaskInstance``.
    :param pool: ``Pool``.
    :param xcom: ``XComModel``.
    :param serialized_dag: ``SerializedDagModel``.
    :param task_state_store: ``TaskStateStoreModel``; ``None`` before Airflow 3.3, which
        has no task state store (nor the policy that writes there).
    """

    dag_run: Any
    task_instance: Any
    pool: Any
    xcom: Any
    serialized_dag: Any
    task_state_store: Any | None


@functools.cache
def metadata_tables(*, task_state_store: bool) -> MetadataTables:
    """The metadata DB's ORM models, imported on the first call (only the API server's view
    reads them).

    :param task_state_store: whether this Airflow has a task state store (3.3 on; the
        version is :mod:`~airflow_retrywindow.version_compat`'s to tell).
    """
    from airflow.models.dagrun import DagRun
    from airflow.models.pool import Pool
    from airflow.models.serialized_dag import SerializedDagModel
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel

    store = None
    if task_state_store:
        from airflow.models.task_state_store import TaskStateStoreModel

        store = TaskStateStoreModel
    return MetadataTables(DagRun, TaskInstance, Pool, XComModel, SerializedDagModel, store)


def api_session() -> Any:
    """The API server's metadata DB session of a request, as a route's annotated argument."""
    from airflow.api_fastapi.common.db.common import SessionDep

    return SessionDep


def dag_read_access(entity: Any) -> Any:
    """The API server's check that a request's user may read the DAG's ``entity``, as a
    route's dependency (a 403 otherwise)."""
    from airflow.api_fastapi.core_api.security import requires_access_dag

    return requires_access_dag("GET", entity)


def bigquery_job(task: Any) -> Any:
    """The job Google's BigQuery operator just read, ``None`` for any other operator."""
    return getattr(task, "_job", None)


# -- Airflow's own words ---------------------------------------------------------------


def state_mismatch(text: str) -> tuple[str, str] | None:
    """What the executor reported and what the scheduler found, from a ``state mismatch``
    event's text; ``None`` when the text is not that message."""
    found = STATE_MISMATCH_TEXT.search(text)
    return None if found is None else (found.group(1), found.group(2))


def default_sensitive_names() -> frozenset[str]:
    """Airflow's ``DEFAULT_SENSITIVE_FIELDS``: from its masker when Airflow is loaded, else
    from the masker's source, read without running it.

    :raises AirflowInternalsError: when neither has the list.
    """
    if "airflow" in sys.modules:
        module = importlib.import_module(MASKER_MODULE)
        return frozenset(getattr(module, MASKER_NAMES))
    spec = importlib.util.find_spec("airflow")  # finds the package without running it
    roots = list(spec.submodule_search_locations or []) if spec else []
    for root in roots:
        source = Path(root, MASKER_SOURCE)
        if source.is_file():
            return _literal_names(source)
    raise AirflowInternalsError(
        f"Airflow's {MASKER_NAMES} not found: no {MASKER_SOURCE} in {roots}"
    )


def masked(text: str) -> Any:
    """``text`` with every value Airflow's masker knows (``mask_secret``) masked."""
    return importlib.import_module(MASKER_MODULE).redact(text)


def _literal_names(source: Path) -> frozenset[str]:
    for node in ast.parse(source.read_text(encoding="utf-8")).body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if [getattr(target, "id", None) for target in targets] != [MASKER_NAMES]:
            continue
        value = node.value  # type: ignore[attr-defined]
        if isinstance(value, ast.Call) and value.args:  # frozenset({...})
            value = value.args[0]
        return frozenset(str(name) for name in ast.literal_eval(value))
    raise AirflowInternalsError(f"Airflow's {MASKER_NAMES} not found in {source}")
