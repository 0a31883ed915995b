"""The triggerer's two ways around the retry policy, closed without a scheduler.

A trigger that ends its task with ``TaskFailedEvent`` makes Airflow's triggerer
retry the task on its own. The provider hands Airflow a :class:`GatedTrigger`
instead of the task's trigger: it passes every event through unchanged, except
that failure, which it raises so a worker fails the try through the retry
policy. An operator that starts its tries in the triggerer
(``start_from_trigger=True``) runs no worker code before a retry, so a gated one
is refused when the DAG is parsed.
"""

from __future__ import annotations

import asyncio
import json
import traceback
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pendulum
import pytest
from airflow.exceptions import AirflowClusterPolicyViolation
from airflow.providers.standard.operators.python import PythonOperator
from airflow.providers.standard.triggers.temporal import DateTimeTrigger
from airflow.sdk import DAG, BaseOperator
from airflow.sdk.exceptions import TaskDeferred
from airflow.triggers.base import (
    BaseTrigger,
    StartTriggerArgs,
    TaskFailedEvent,
    TaskSkippedEvent,
    TaskSuccessEvent,
    TriggerEvent,
)

from airflow_retrywindow import Deadline, RetryWindowPolicy, check_dag
from airflow_retrywindow.policies.cluster_policy import task_policy
from airflow_retrywindow.policies.retry_start import RetryStartCheck
from airflow_retrywindow.triggers.deferral import reported_failure
from airflow_retrywindow.triggers.gated import GatedTrigger, TriggerEndedWithFailure

START = pendulum.datetime(2026, 1, 1, tz="UTC")
GATED_PATH = "airflow_retrywindow.triggers.gated.GatedTrigger"
REFUSED_DAG = Path(__file__).with_name("trigger_dags") / "refused" / "rw_start_from_trigger.py"
#: events the inner trigger yields, read by :class:`Scripted`
SCRIPTS: dict[str, list[Any]] = {}
#: what the inner triggers were told, read by the forwarding tests
SEEN: dict[str, Any] = {}


class Scripted(BaseTrigger):
    """Yields the events of ``SCRIPTS[script]``; raises any exception among them."""

    def __init__(self, script: str, label: str = "") -> None:
        super().__init__()
        self.script = script
        self.label = label

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{__name__}.Scripted", {"script": self.script, "label": self.label})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        SEEN["task_instance"] = self.task_instance
        SEEN["trigger_id"] = self.trigger_id
        SEEN["timeout_after"] = getattr(self, "timeout_after", None)
        for step in SCRIPTS[self.script]:
            if isinstance(step, BaseException):
                raise step
            yield step

    async def cleanup(self) -> None:
        SEEN["cleanup"] = self.script

    async def on_kill(self) -> None:
        SEEN["on_kill"] = self.script


def _policy() -> RetryWindowPolicy:
    return RetryWindowPolicy(
        deadline=Deadline.after_data_interval_end(hours=6),
        duration=timedelta(minutes=1),
        validation=timedelta(0),
        safe_repeat=True,
    )


async def _collect(trigger: BaseTrigger) -> list[TriggerEvent]:
    return [event async for event in trigger.run()]


def _run(trigger: BaseTrigger) -> list[TriggerEvent]:
    return asyncio.run(_collect(trigger))


def _ti(**fields: Any) -> SimpleNamespace:
    values = {"dag_id": "rw_dag", "task_id": "load", "run_id": "manual__1", "map_index": -1}
    values.update(fields)
    values.setdefault("try_number", 1)
    return SimpleNamespace(**values)


# -- the wrapper trigger --------------------------------------------------------------


@pytest.mark.parametrize(
    "event",
    [
        TriggerEvent({"status": "done", "job": "job-7"}),
        TaskSuccessEvent(xcoms={"rows": 3}),
        TaskSkippedEvent(),
    ],
    ids=["trigger-event", "task-success", "task-skipped"],
)
def test_every_other_event_passes_through_unchanged(event: TriggerEvent) -> None:
    SCRIPTS["pass"] = [event]
    events = _run(GatedTrigger.around(Scripted("pass")))
    assert len(events) == 1
    assert events[0] is event


def test_several_events_pass_through_in_order() -> None:
    first, second = TriggerEvent("first"), TriggerEvent("second")
    SCRIPTS["two"] = [first, second]
    assert _run(GatedTrigger.around(Scripted("two"))) == [first, second]


def test_a_failure_the_trigger_reports_is_raised_for_a_worker_to_decide() -> None:
    SCRIPTS["failed"] = [TaskFailedEvent()]
    trigger = GatedTrigger.around(Scripted("failed"))
    seen: list[TriggerEvent] = []

    async def consume() -> None:
        async for event in trigger.run():
            seen.append(event)

    with pytest.raises(TriggerEndedWithFailure) as raised:
        asyncio.run(consume())
    # nothing may be yielded first: Airflow fails a trigger only when it sent no event
    assert seen == []
    assert str(raised.value) == (
        f"the trigger {__name__}.Scripted ended the task with a failure; "
        "the retry window gate decides its retry"
    )
    assert raised.value.classpath == f"{__name__}.Scripted"


def test_the_failed_events_xcoms_are_kept_before_it_is_raised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow.sdk.execution_time import xcom

    pushed: list[tuple[str, Any, dict[str, Any]]] = []

    async def aset(key: str, value: Any, **where: Any) -> None:
        pushed.append((key, value, where))

    monkeypatch.setattr(xcom.XCom, "aset", aset)
    SCRIPTS["failed_xcoms"] = [TaskFailedEvent(xcoms={"job_state": "FAILED", "job": "job-7"})]
    trigger = GatedTrigger.around(Scripted("failed_xcoms"))
    trigger.task_instance = _ti(map_index=2)  # type: ignore[assignment]
    with pytest.raises(TriggerEndedWithFailure):
        _run(trigger)
    where = {"dag_id": "rw_dag", "task_id": "load", "run_id": "manual__1", "map_index": 2}
    assert pushed == [("job_state", "FAILED", where), ("job", "job-7", where)]


def test_an_exception_of_the_trigger_propagates_as_it_is() -> None:
    error = ConnectionError("lost the job's status endpoint")
    SCRIPTS["raises"] = [error]
    with pytest.raises(ConnectionError) as raised:
        _run(GatedTrigger.around(Scripted("raises")))
    assert raised.value is error


def test_serialize_names_the_inner_trigger_and_its_arguments() -> None:
    inner = Scripted("pass", label="positions")
    assert GatedTrigger.around(inner).serialize() == (
        GATED_PATH,
        {"classpath": f"{__name__}.Scripted", "kwargs": {"script": "pass", "label": "positions"}},
    )


def test_serialize_round_trips_to_the_inner_trigger_the_way_airflow_stores_it() -> None:
    from airflow.models.trigger import Trigger
    from airflow.sdk.module_loading import import_string
    from airflow.sdk.serde import serialize
    from airflow.serialization.decoders import smart_decode_trigger_kwargs

    inner = DateTimeTrigger(moment=pendulum.datetime(2026, 3, 1, 6, 30, tz="UTC"))
    classpath, kwargs = GatedTrigger.around(inner).serialize()
    # the worker encodes the kwargs with serde, the API server stores them as JSON,
    # the triggerer decodes them and builds the trigger from its classpath
    stored = json.dumps(serialize(kwargs))
    decoded = {
        k: smart_decode_trigger_kwargs(v) for k, v in Trigger._decrypt_kwargs(stored).items()
    }
    rebuilt = import_string(classpath)(**decoded)
    assert isinstance(rebuilt, GatedTrigger)
    assert rebuilt.inner.serialize() == inner.serialize()
    assert rebuilt.serialize() == (classpath, kwargs)


def test_a_gated_trigger_is_not_wrapped_twice() -> None:
    gated = GatedTrigger.around(Scripted("pass"))
    assert GatedTrigger.around(gated) is gated


def test_what_the_triggerer_sets_reaches_the_inner_trigger() -> None:
    SCRIPTS["forward"] = [TriggerEvent("ok")]
    _, kwargs = GatedTrigger.around(Scripted("forward")).serialize()
    trigger = GatedTrigger(**kwargs)  # as the triggerer builds it
    ti = _ti(try_number=3)
    trigger.task_instance = ti  # type: ignore[assignment]
    trigger.trigger_id = 41
    due = pendulum.datetime(2026, 3, 1, tz="UTC")
    trigger.timeout_after = due  # type: ignore[attr-defined]
    _run(trigger)
    assert SEEN["task_instance"] is ti
    assert SEEN["trigger_id"] == 41
    assert SEEN["timeout_after"] == due
    asyncio.run(trigger.cleanup())
    asyncio.run(trigger.on_kill())
    assert SEEN["cleanup"] == SEEN["on_kill"] == "forward"


def test_an_inner_trigger_that_cannot_be_imported_fails_when_run_not_when_built() -> None:
    # the triggerer builds triggers in its main loop: only run() may fail
    trigger = GatedTrigger(classpath="not_a_module.Missing", kwargs={})
    trigger.task_instance = _ti()  # type: ignore[assignment]
    with pytest.raises(ImportError):
        _run(trigger)


# -- the cluster policy hands Airflow the wrapper -----------------------------------------


class Deferring(BaseOperator):
    """Defers to ``SCRIPTS["deferred"]`` from execute, as deferrable operators do."""

    def __init__(self, *, region: str = "eu", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.region = region

    def execute(self, context: Any) -> None:
        self.defer(trigger=Scripted("deferred"), method_name="execute_complete")

    def execute_complete(self, context: Any, event: Any = None) -> Any:
        return event


def _context(task: Any) -> dict[str, Any]:
    ti = SimpleNamespace(try_number=1, max_tries=2, task_id=task.task_id)
    return {"task": task, "ti": ti, "task_state_store": SimpleNamespace(get=lambda key: None)}


def _deferred_trigger(task: Any) -> BaseTrigger:
    """Run the task's pre_execute hooks and execute the way the task runner does."""
    running = task.prepare_for_execution()
    context = _context(running)
    running._pre_execute_hook(context)
    with pytest.raises(TaskDeferred) as deferred:
        running.execute(context)
    return deferred.value.trigger  # type: ignore[no-any-return]


def test_a_gated_task_defers_to_the_wrapper() -> None:
    with DAG("rw_defers", schedule=None, start_date=START):
        task = Deferring(task_id="load", retries=2, retry_policy=_policy())
    task_policy(task)
    task_policy(task)  # the DAG processor and the worker may both apply it
    trigger = _deferred_trigger(task)
    assert isinstance(trigger, GatedTrigger)
    assert isinstance(trigger.inner, Scripted)
    assert trigger.inner.script == "deferred"
    # the retry-start check still runs first, once
    hook = task._pre_execute_hook
    assert isinstance(hook, RetryStartCheck)
    assert not isinstance(hook.then, RetryStartCheck)


def test_the_authors_pre_execute_hook_still_runs() -> None:
    calls: list[str] = []
    with DAG("rw_defers_hook", schedule=None, start_date=START):
        task = Deferring(
            task_id="load",
            retries=2,
            retry_policy=_policy(),
            pre_execute=lambda context: calls.append("author"),
        )
    task_policy(task)
    assert isinstance(_deferred_trigger(task), GatedTrigger)
    assert calls == ["author"]


def test_every_mapped_instance_defers_to_the_wrapper() -> None:
    with DAG("rw_defers_mapped", schedule=None, start_date=START):
        mapped = Deferring.partial(task_id="load", retries=2, retry_policy=_policy()).expand(
            region=["eu", "us"]
        )
    task_policy(mapped)
    instance = mapped.unmap({"region": "eu"})
    assert isinstance(_deferred_trigger(instance), GatedTrigger)


def test_an_ungated_task_defers_to_its_own_trigger() -> None:
    with DAG("rw_defers_plain", schedule=None, start_date=START):
        task = Deferring(task_id="load", retries=2)
    task_policy(task)
    running = task.prepare_for_execution()
    with pytest.raises(TaskDeferred) as deferred:
        running.execute(_context(running))
    assert isinstance(deferred.value.trigger, Scripted)


# -- the worker fails the try with what the trigger reported -------------------------------


def _raised_lines(error: BaseException) -> list[str]:
    """A traceback as Airflow's triggerer sends it with a failed trigger."""
    try:
        raise error
    except BaseException as raised:
        return traceback.format_exception(type(raised), raised, raised.__traceback__)


def _resumed_to_fail(lines: list[str], next_method: str = "__fail__") -> dict[str, Any]:
    """The context of a try Airflow resumes only to fail it (``Trigger.submit_failure``)."""
    with DAG("rw_fails", schedule=None, start_date=START):
        task = Deferring(task_id="load", retries=2, retry_policy=_policy())
    task_policy(task)
    running = task.prepare_for_execution()
    context = _context(running)
    context["ti"]._ti_context_from_server = SimpleNamespace(
        next_method=next_method, next_kwargs={"error": "Trigger failure", "traceback": lines}
    )
    return context


def test_a_try_resumed_to_fail_raises_what_the_trigger_reported() -> None:
    lines = _raised_lines(TriggerEndedWithFailure("rw_jobs.JobTrigger"))
    context = _resumed_to_fail(lines)
    with pytest.raises(TriggerEndedWithFailure) as raised:
        context["task"]._pre_execute_hook(context)
    assert raised.value.classpath == "rw_jobs.JobTrigger"
    assert str(raised.value).startswith("the trigger rw_jobs.JobTrigger ended the task")


def test_the_classpath_is_read_from_airflows_encoding_of_the_kwargs_too() -> None:
    lines = _raised_lines(TriggerEndedWithFailure("rw_jobs.JobTrigger"))
    encoded = {"__classname__": "builtins.dict", "__data__": {"error": "x", "traceback": lines}}
    assert (
        reported_failure(
            SimpleNamespace(
                _ti_context_from_server=SimpleNamespace(next_method="__fail__", next_kwargs=encoded)
            )
        )
        == "rw_jobs.JobTrigger"
    )


@pytest.mark.parametrize(
    ("lines", "next_method"),
    [
        (_raised_lines(ConnectionError("status endpoint unreachable")), "__fail__"),
        (_raised_lines(TriggerEndedWithFailure("rw_jobs.JobTrigger")), "execute_complete"),
        ([], "__fail__"),
    ],
    ids=["a-trigger-that-crashed", "an-ordinary-resume", "no-traceback"],
)
def test_anything_else_keeps_airflows_own_path(lines: list[str], next_method: str) -> None:
    context = _resumed_to_fail(lines, next_method)
    context["task"]._pre_execute_hook(context)  # nothing raised: resume_execution decides


def test_a_failure_raised_while_handling_the_report_is_not_taken_for_it() -> None:
    try:
        raise TriggerEndedWithFailure("rw_jobs.JobTrigger")
    except TriggerEndedWithFailure:
        lines = _raised_lines(RuntimeError("cleanup failed"))
    assert any("TriggerEndedWithFailure" in line for line in lines)
    context = _resumed_to_fail(lines)
    context["task"]._pre_execute_hook(context)


def test_no_server_context_means_no_report() -> None:
    assert reported_failure(None) is None
    assert reported_failure(SimpleNamespace()) is None


# -- start_from_trigger is refused when the DAG is parsed ---------------------------------


class StartsInTheTriggerer(BaseOperator):
    """Starts every try in the triggerer, as ``start_from_trigger=True`` operators do."""

    start_trigger_args = StartTriggerArgs(
        trigger_cls=f"{__name__}.Scripted",
        trigger_kwargs={"script": "pass"},
        next_method="execute_complete",
    )
    start_from_trigger = True

    def execute_complete(self, context: Any, event: Any = None) -> Any:
        return event


def _start_from_trigger_dag(**task_kwargs: Any) -> DAG:
    with DAG("rw_starts_in_triggerer", schedule=None, start_date=START) as dag:
        StartsInTheTriggerer(task_id="watch", retries=2, **task_kwargs)
    return dag


def test_check_dag_refuses_a_gated_task_that_starts_in_the_triggerer() -> None:
    problems = check_dag(_start_from_trigger_dag(retry_policy=_policy()))
    assert len(problems) == 1
    problem = problems[0]
    assert problem.startswith("rw_starts_in_triggerer: task 'watch': start_from_trigger=True ")
    for said in (
        "straight from the scheduler",
        "no worker code runs",
        "cannot read the task state store",
        "set start_from_trigger=False",
        "or remove the RetryWindowPolicy",
    ):
        assert said in problem, said


def test_the_cluster_policy_refuses_it() -> None:
    dag = _start_from_trigger_dag(retry_policy=_policy())
    with pytest.raises(AirflowClusterPolicyViolation, match="retry window gate: task 'watch': "):
        task_policy(dag.get_task("watch"))


def test_the_same_operator_starting_in_a_worker_is_accepted() -> None:
    with DAG("rw_starts_in_worker", schedule=None, start_date=START) as dag:
        task = StartsInTheTriggerer(task_id="watch", retries=2, retry_policy=_policy())
        task.start_from_trigger = False
    assert check_dag(dag) == []


def test_an_ungated_task_may_start_in_the_triggerer() -> None:
    assert check_dag(_start_from_trigger_dag()) == []


def test_the_refused_example_dag_names_its_task() -> None:
    namespace: dict[str, object] = {}
    exec(compile(REFUSED_DAG.read_text(), REFUSED_DAG.name, "exec"), namespace)
    dags = [value for value in namespace.values() if isinstance(value, DAG)]
    assert len(dags) == 1
    problems = check_dag(dags[0])
    assert len(problems) == 1
    assert problems[0].startswith("rw_trigger_start: task 'watch': start_from_trigger=True ")


def test_an_ungated_plain_task_is_left_alone() -> None:
    with DAG("rw_plain_trigger", schedule=None, start_date=START) as dag:
        PythonOperator(task_id="plain", python_callable=lambda: None, retries=2)
    assert check_dag(dag) == []
