"""The paths around a decision: timeouts and exception chains, secrets, internal errors,
subclasses, and the retry-start check that refuses a retry nobody decided.

These run the real policy, cluster policy and Airflow operator classes in-process;
the task state store and task instance are small in-memory stand-ins with the
two or three methods the worker's own objects offer. The same paths on a real
scheduler are in ``test_retry_paths_on_scheduler.py``.
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

import pendulum
import pytest
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowTaskTimeout
from airflow.sdk.log import mask_secret

from airflow_retrywindow import Deadline, RetryWindowPolicy, check_dag
from airflow_retrywindow.policies.check import gated
from airflow_retrywindow.policies.cluster_policy import task_policy
from airflow_retrywindow.policies.retry_start import RetryStartCheck
from airflow_retrywindow.records import evidence as evidence_module
from airflow_retrywindow.records.evidence import RETRYABLE, TERMINAL, UNKNOWN
from tests.policy.resumable_jobs import Store, TaskInstance

START = pendulum.datetime(2026, 3, 1, tz="UTC")


class Flaky(RetryWindowPolicy):
    """A user's subclass: it must be recognised as gated."""


def policy(cls: type[RetryWindowPolicy] = RetryWindowPolicy, **overrides: Any) -> Any:
    values: dict[str, Any] = {
        "deadline": Deadline.after_data_interval_start(hours=6),
        "duration": timedelta(minutes=2),
        "validation": timedelta(minutes=1),
        "safe_repeat": True,
    }
    values.update(overrides)
    return cls(**values)


def operator(gate: Any, *, retries: int = 2, pre_execute: Any = None) -> PythonOperator:
    with DAG("rw_paths", schedule=None, start_date=START):
        return PythonOperator(
            task_id="load",
            python_callable=lambda: None,
            retries=retries,
            retry_delay=timedelta(seconds=30),
            retry_policy=gate,
            pre_execute=pre_execute,
        )


def context(task: Any, *, try_number: int, max_tries: int, store: Store) -> dict[str, Any]:
    now = pendulum.now("UTC")
    return {
        "task": task,
        "ti": TaskInstance(try_number, max_tries),
        "task_state_store": store,
        "data_interval_start": now.subtract(minutes=5),
        "data_interval_end": now,
    }


# -- classification ------------------------------------------------------------------


def test_airflow_task_timeout_is_an_unknown_outcome_by_default() -> None:
    assert policy().classifier.classify(AirflowTaskTimeout()) == UNKNOWN


def test_the_dag_author_may_say_otherwise_explicitly() -> None:
    assert policy(retryable=[AirflowTaskTimeout]).classifier.classify(AirflowTaskTimeout()) == (
        RETRYABLE
    )
    terminal = policy(terminal=["airflow.sdk.exceptions.AirflowTaskTimeout"])
    assert terminal.classifier.classify(AirflowTaskTimeout()) == TERMINAL


def _raised_from(cause: BaseException) -> AirflowException:
    try:
        raise AirflowException("the load failed") from cause
    except AirflowException as error:
        return error


def _raised_while_handling(first: BaseException) -> RuntimeError:
    try:
        try:
            raise first
        except BaseException:
            # no "from": Python keeps the first exception as __context__
            raise RuntimeError("cleanup failed")  # noqa: B904
    except RuntimeError as error:
        return error


def test_classification_walks_the_exception_chain() -> None:
    classify = policy(unknown=[TimeoutError], terminal=[PermissionError]).classifier.classify
    assert classify(_raised_from(TimeoutError("no answer"))) == UNKNOWN
    assert classify(_raised_from(PermissionError("denied"))) == TERMINAL
    assert classify(_raised_while_handling(AirflowTaskTimeout())) == UNKNOWN
    assert classify(_raised_from(ConnectionError("reset"))) == RETRYABLE


def test_the_most_cautious_class_in_the_chain_wins() -> None:
    classify = policy(terminal=[PermissionError], retryable=[ConnectionError]).classifier.classify
    error = ConnectionError("reset")
    error.__cause__ = PermissionError("denied")
    assert classify(error) == TERMINAL
    error.__cause__.__cause__ = AirflowTaskTimeout()
    assert classify(error) == UNKNOWN


def test_a_looping_chain_ends() -> None:
    first, second = ValueError("a"), ValueError("b")
    first.__cause__, second.__cause__ = second, first
    assert policy().classifier.classify(first) == RETRYABLE


# -- nothing secret is stored ------------------------------------------------------


def test_a_masked_secret_stays_out_of_reason_evidence_and_xcom() -> None:
    secret = "tok-" + secrets.token_hex(16)
    mask_secret(secret)
    task = operator(policy(deadline=Deadline.after_data_interval_start(hours=6)), retries=2)
    store = Store()
    ctx = context(task, try_number=1, max_tries=2, store=store)
    error = ConnectionError(f"GET https://api.example.test/v1?api_key={secret} failed")
    decision = task.retry_policy.evaluate(error, 1, 2, ctx)
    assert decision.action.value == "retry"
    assert decision.reason and "api_key=***" in decision.reason
    stored = repr(store.values) + repr(ctx["ti"].xcom) + decision.reason
    assert secret not in stored


def test_url_credentials_in_an_exception_are_not_stored() -> None:
    task = operator(policy(), retries=2)
    ctx = context(task, try_number=1, max_tries=2, store=Store())
    error = ConnectionError("cannot reach https://loader:hunter2-pass@db.example.test/positions")
    decision = task.retry_policy.evaluate(error, 1, 2, ctx)
    assert decision.reason and "hunter2-pass" not in decision.reason
    assert "https://***@db.example.test" in decision.reason


# -- the policy never raises ---------------------------------------------------------


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("__str__ is broken too")


def _deadline_that_raises(context: Any) -> Any:
    raise Unprintable()


@pytest.mark.parametrize("on_error", ["fail", "default"])
def test_an_unprintable_internal_error_still_gets_an_answer(on_error: str) -> None:
    gate = policy(deadline=Deadline.computed(_deadline_that_raises), on_error=on_error)
    task = operator(gate)
    store = Store()
    ctx = context(task, try_number=1, max_tries=2, store=store)
    decision = gate.evaluate(Unprintable(), 1, 2, ctx)
    assert decision.action.value == on_error
    if on_error == "fail":
        assert decision.reason and decision.reason.startswith("gate-error:")
        assert "Unprintable" in decision.reason
    assert store.values[evidence_module.EVIDENCE_KEY]["latest"]["action"] == on_error


def test_a_failure_outside_the_window_fails_closed() -> None:
    task = operator(policy(), retries=2)
    # try 7 with max_tries 2 cannot belong to any window of 3 runs
    decision = task.retry_policy.evaluate(
        ConnectionError("x"), 7, 2, context(task, try_number=7, max_tries=2, store=Store())
    )
    assert decision.action.value == "fail"
    assert decision.reason and "outside 1..3" in decision.reason


# -- subclasses ------------------------------------------------------------------------


def test_a_subclass_of_the_policy_is_gated_and_checked() -> None:
    assert gated(operator(policy(Flaky)))
    with DAG("rw_subclass", schedule=None, start_date=START) as dag:
        PythonOperator(
            task_id="load", python_callable=lambda: None, retries=12, retry_policy=policy(Flaky)
        )
    assert check_dag(dag) == [
        "rw_subclass: task 'load': retries=12 means 13 runs; the gate supports up to "
        "9 retries (10 runs). Lower retries"
    ]


# -- the retry-start check ---------------------------------------------------------


def _installed(gate: Any, **kwargs: Any) -> PythonOperator:
    task = operator(gate, **kwargs)
    task_policy(task)
    return task


def test_the_cluster_policy_installs_the_check_once_before_the_authors_hook() -> None:
    calls: list[str] = []
    task = _installed(policy(Flaky), pre_execute=lambda context: calls.append("author"))
    task_policy(task)  # the worker and the DAG processor may both apply it
    hook = task._pre_execute_hook
    assert isinstance(hook, RetryStartCheck)
    assert not isinstance(hook.then, RetryStartCheck)
    hook(context(task, try_number=1, max_tries=2, store=Store()))
    assert calls == ["author"]


def test_ungated_tasks_are_left_alone() -> None:
    with DAG("rw_plain", schedule=None, start_date=START):
        plain = PythonOperator(task_id="plain", python_callable=lambda: None, retries=2)
    task_policy(plain)
    assert plain._pre_execute_hook is None


def test_a_retry_the_policy_decided_starts() -> None:
    task = _installed(policy())
    store = Store()
    first = context(task, try_number=1, max_tries=2, store=store)
    assert task.retry_policy.evaluate(ConnectionError("reset"), 1, 2, first).action.value == (
        "retry"
    )
    second = context(task, try_number=2, max_tries=2, store=store)
    task._pre_execute_hook(second)  # does not raise


def test_a_retry_nobody_decided_is_refused_before_the_body() -> None:
    task = _installed(policy())
    store = Store()
    ctx = context(task, try_number=2, max_tries=2, store=store)
    with pytest.raises(AirflowFailException, match=r"^reconcile-remote: the outcome of attempt 1"):
        task._pre_execute_hook(ctx)
    latest = store.values[evidence_module.EVIDENCE_KEY]["latest"]
    assert (latest["tryNumber"], latest["action"], latest["failure"]) == (2, "fail", UNKNOWN)
    assert latest["check"] == "retry-start"
    assert latest["result"]["tasks"][0]["decision"] == "reconcile-remote"
    assert "try 1 ended without a retry decision" in latest["reason"]
    assert ctx["ti"].xcom[evidence_module.failure_key(UNKNOWN)] == 2


def test_a_decision_for_an_older_try_does_not_count() -> None:
    task = _installed(policy())
    store = Store()
    task.retry_policy.evaluate(
        ConnectionError("reset"), 1, 2, context(task, try_number=1, max_tries=2, store=store)
    )
    # try 2 was then killed; try 3 finds only try 1's decision
    with pytest.raises(AirflowFailException, match="reconcile-remote"):
        task._pre_execute_hook(context(task, try_number=3, max_tries=2, store=store))


def test_a_refusal_is_not_a_permission() -> None:
    task = _installed(policy(safe_repeat=False))
    store = Store()
    refused = task.retry_policy.evaluate(
        ConnectionError("reset"), 1, 2, context(task, try_number=1, max_tries=2, store=store)
    )
    assert refused.action.value == "fail"
    with pytest.raises(AirflowFailException):
        task._pre_execute_hook(context(task, try_number=2, max_tries=2, store=store))


def test_a_manual_clear_starts_a_new_window_and_is_not_refused() -> None:
    task = _installed(policy())
    # after a clear Airflow keeps counting tries and raises max_tries by retries
    task._pre_execute_hook(context(task, try_number=4, max_tries=5, store=Store()))


def test_on_error_default_hands_over_and_the_next_try_starts() -> None:
    gate = policy(deadline=Deadline.computed(_deadline_that_raises), on_error="default")
    task = _installed(gate)
    store = Store()
    first = context(task, try_number=1, max_tries=2, store=store)
    assert gate.evaluate(ConnectionError("reset"), 1, 2, first).action.value == "default"
    task._pre_execute_hook(context(task, try_number=2, max_tries=2, store=store))


@pytest.mark.parametrize(("on_error", "runs"), [("fail", False), ("default", True)])
def test_an_unreadable_store_fails_closed_unless_told_otherwise(on_error: str, runs: bool) -> None:
    task = _installed(policy(on_error=on_error))
    ctx = context(task, try_number=2, max_tries=2, store=Store(broken=True))
    if runs:
        task._pre_execute_hook(ctx)
        return
    with pytest.raises(AirflowFailException, match="gate-error: the retry-start check could not"):
        task._pre_execute_hook(ctx)


def test_allows_next_try_reads_only_the_try_just_before() -> None:
    allows = evidence_module.allows_next_try
    latest = {"latest": {"tryNumber": 2, "action": "retry"}}
    assert allows(latest, 3)
    assert not allows(latest, 4)
    assert not allows({"latest": {"tryNumber": 2, "action": "fail"}}, 3)
    assert allows({"latest": {"tryNumber": 2, "action": "default"}}, 3)
    for broken in (None, "text", {"latest": "x"}, {}):
        assert not allows(broken, 3)


def test_every_mapped_instance_gets_the_check() -> None:
    from airflow.sdk import task as task_decorator

    with DAG("rw_mapped_check", schedule=None, start_date=START):

        @task_decorator(retries=2, retry_delay=timedelta(seconds=30), retry_policy=policy())
        def load(partition: str) -> str:
            return partition

        mapped = load.expand(partition=["eu", "us"])
    task = mapped.operator
    task_policy(task)
    assert isinstance(task.partial_kwargs["pre_execute"], RetryStartCheck)
    instance = task.unmap({"op_kwargs": {"partition": "eu"}})
    assert isinstance(instance._pre_execute_hook, RetryStartCheck)


def test_a_trigger_that_crashed_or_timed_out_leaves_the_outcome_unknown() -> None:
    from airflow.sdk.exceptions import TaskDeferralError, TaskDeferralTimeout

    from airflow_retrywindow.triggers.gated import TriggerEndedWithFailure

    classify = policy().classifier.classify
    assert classify(TaskDeferralError("Trigger failure")) == UNKNOWN
    assert classify(TaskDeferralTimeout("Trigger timeout")) == UNKNOWN
    # a trigger that watched the job and reported its failure: a confirmed failure
    assert classify(TriggerEndedWithFailure("the trigger ended the task")) == RETRYABLE
    assert policy(retryable=[TaskDeferralError]).classifier.classify(
        TaskDeferralError("Trigger failure")
    ) == (RETRYABLE)


def test_a_template_that_does_not_render_is_terminal_by_default() -> None:
    import jinja2

    environment = jinja2.Environment(undefined=jinja2.StrictUndefined)
    with pytest.raises(jinja2.UndefinedError) as undefined:
        environment.from_string("{{ ds }}").render()
    with pytest.raises(jinja2.TemplateSyntaxError) as syntax:
        environment.from_string("{{ ds ")
    classify = policy().classifier.classify
    assert classify(undefined.value) == TERMINAL
    assert classify(syntax.value) == TERMINAL
    # the DAG author may say otherwise, explicitly
    assert policy(retryable=[jinja2.UndefinedError]).classifier.classify(undefined.value) == (
        RETRYABLE
    )
    # an unknown outcome in the same chain still comes first
    undefined.value.__context__ = TimeoutError("no answer")
    assert policy(unknown=[TimeoutError]).classifier.classify(undefined.value) == UNKNOWN


def test_a_refused_template_failure_says_repair_the_cause() -> None:
    import jinja2

    task = _installed(policy())
    ctx = context(task, try_number=1, max_tries=2, store=Store())
    decision = task.retry_policy.evaluate(jinja2.UndefinedError("'ds' is undefined"), 1, 2, ctx)
    assert decision.action.value == "fail"
    assert decision.reason is not None and decision.reason.startswith("repair-cause")
