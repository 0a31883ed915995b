"""Reconciliation never turns doubt into permission.

Each test plays the tries a worker would run, as ``test_reconcile_then_decide``
does: a real ``ResumableJobMixin`` operator, the real retry-start check and policy,
an in-memory job service.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any

import pendulum
import pytest
from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowFailException, AirflowRescheduleException

from airflow_retrywindow.policies.job_status import JobOutcome, classify_status
from airflow_retrywindow.policies.status_words import NO_WORDS, built_in_words
from airflow_retrywindow.records.try_start import TRY_START_KEY
from airflow_retrywindow.records.work_scope import WorkScope
from tests.policy.resumable_jobs import Jobs, Store, context, job_operator, policy
from tests.policy.test_reconcile_then_decide import decision, latest, lost_after_submit, start


def test_a_job_the_service_does_not_know_is_an_unknown_outcome_even_when_safe_to_repeat() -> None:
    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy(safe_repeat=True))
    lost_after_submit(task, store)
    del jobs.statuses["load_a1"]  # another project or location answers the same
    with pytest.raises(AirflowFailException, match=r"^reconcile-remote"):
        start(task, store, 2)
    job = latest(store)["reconciliation"]
    assert (job["outcome"], job["reachedService"], job["finished"]) == ("not-found", None, None)
    assert "never_submitted_statuses" in latest(store)["reason"]
    assert jobs.calls["submit"] == 1


def test_a_not_found_the_operator_declares_never_submitted_is_a_confirmed_failure() -> None:
    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy(never_submitted_statuses=["not_found"]), retry_delay=30)
    lost_after_submit(task, store)
    del jobs.statuses["load_a1"]
    with pytest.raises(AirflowRescheduleException):
        start(task, store, 2)
    entry = latest(store)
    assert (decision(entry), entry["failure"]) == ("wait-backoff", "retryable")
    job = entry["reconciliation"]
    assert (job["outcome"], job["reachedService"]) == ("not-found", False)


@pytest.mark.parametrize("status", ["lost", "stopped", "expired", "timeout", "FAILED"])
def test_a_failure_word_the_operator_did_not_declare_leaves_the_outcome_unknown(
    status: str,
) -> None:
    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy(failed_statuses=[]))
    lost_after_submit(task, store)
    jobs.statuses["load_a1"] = status
    with pytest.raises(AirflowFailException, match=r"^reconcile-remote"):
        start(task, store, 2)
    assert latest(store)["reconciliation"]["outcome"] == "unknown"


def test_a_declared_failure_word_confirms_a_failure() -> None:
    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy(failed_statuses=["lost"]), retry_delay=30)
    lost_after_submit(task, store)
    jobs.statuses["load_a1"] = "LOST"
    with pytest.raises(AirflowRescheduleException):
        start(task, store, 2)
    assert latest(store)["reconciliation"]["outcome"] == "failed"


def test_bigquerys_error_status_is_a_built_in_failure_for_its_operator_only() -> None:
    bigquery = pytest.importorskip("airflow.providers.google.cloud.operators.bigquery")
    operator = bigquery.BigQueryInsertJobOperator(task_id="load", configuration={})
    words = built_in_words(operator)
    assert classify_status("error", active=False, succeeded=False, words=words) is (
        JobOutcome.FAILED
    )
    # BigQuery's not_found is a lookup in one project and location: not proof
    assert classify_status("not_found", active=False, succeeded=False, words=words) is (
        JobOutcome.NOT_FOUND
    )
    # another operator's "error" means what that operator says, not BigQuery's word
    other = job_operator(Jobs(), policy())
    assert built_in_words(other) is NO_WORDS

    class OwnReads(bigquery.BigQueryInsertJobOperator):  # type: ignore[misc]
        def get_job_status(self, external_id: object, context: object) -> str:
            return "error"

    assert built_in_words(OwnReads(task_id="own", configuration={})) is NO_WORDS


def test_a_status_listed_both_failed_and_never_submitted_is_refused() -> None:
    with pytest.raises(ValueError, match="both list"):
        policy(failed_statuses=["gone"], never_submitted_statuses=["GONE"])


def _bigquery_shaped_id(try_number: int) -> str:
    """An id as BigQuery's hook generates one: dag, task, date and a hash, over 200 chars."""
    dag_id = "positions_" + "eu_region_daily_reconciled_" * 3
    task_id = "load_" + "partitioned_positions_" * 3
    job_id = (
        f"airflow_{dag_id}_{task_id}_2026_12_03T00_00_00_00_00_"
        f"5c0f3f7d2c54b0b0e8a7c1d4f2e9a6b1_a{try_number}"
    )
    assert len(job_id) > 200
    return job_id


def test_a_long_job_id_keeps_the_first_time_its_failure_was_seen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class LongIds(type(job_operator(Jobs(), policy()))):  # type: ignore[misc]
        def submit_job(self, context: object) -> str:
            return self.jobs.submit(_bigquery_shaped_id(context["ti"].try_number))  # type: ignore[index]

    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy(), retry_delay=30)
    task.__class__ = LongIds
    lost_after_submit(task, store)
    jobs.statuses[_bigquery_shaped_id(1)] = "FAILED"
    # on a frozen clock, half way through a second: the model's whole seconds round the
    # same way at both starts, and only a failure time not kept moves the reschedule
    first_seen = pendulum.now("UTC").replace(microsecond=500_000)
    clock = [first_seen]
    monkeypatch.setattr(pendulum, "now", lambda tz=None: clock[0])
    with pytest.raises(AirflowRescheduleException) as first:
        start(task, store, 2)
    clock[0] = first_seen.add(seconds=5)
    with pytest.raises(AirflowRescheduleException) as again:
        start(task, store, 2)  # started again before the 30 s backoff ran out
    job = latest(store)["reconciliation"]
    assert job["externalId"] == _bigquery_shaped_id(1)
    assert pendulum.parse(job["failedSince"]) == first_seen
    assert again.value.reschedule_date == first.value.reschedule_date


class _CachingHook(BaseHook):
    """A hook that keeps what it last read, as clients with caches do."""

    def __init__(self) -> None:
        super().__init__()
        self.last_read: str | None = None


def test_a_status_read_abandoned_at_its_timeout_changes_nothing_of_the_try() -> None:
    finished = threading.Event()

    class LateWriter(type(job_operator(Jobs(), policy()))):  # type: ignore[misc]
        """Answers after the read's timeout, then writes to everything it was handed."""

        hook: _CachingHook | None = None

        def get_job_status(self, external_id: object, context: Any) -> str:
            time.sleep(0.6)
            try:
                self.job_id = "set_by_the_read"
                if self.hook is not None:
                    self.hook.last_read = str(external_id)
                context["task_state_store"].set("stand_in_job_id", "set_by_the_read")
                context["ti"].xcom_push(key="job_id_path", value="set_by_the_read")
                return "RUNNING"
            finally:
                finished.set()

    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy(status_read_timeout=0.2))
    task.__class__ = LateWriter
    lost_after_submit(task, store)
    task.hook = hook = _CachingHook()
    task.job_id = "load_a2"
    ctx = context(task, try_number=2, store=store)
    with pytest.raises(AirflowFailException, match=r"^reconcile-remote"):
        task._pre_execute_hook(ctx)
    assert "status_read_timeout" in latest(store)["reconciliation"]["error"]
    assert finished.wait(5)
    assert (task.job_id, task.hook, hook.last_read) == ("load_a2", hook, None)
    assert store.values["stand_in_job_id"] == "load_a1"
    assert "job_id_path" not in ctx["ti"].xcom


# -- a stored id from before a clear or a DAG change ---------------------------------

#: Airflow's clear after try 1 of a task with retries=3: max_tries = 1 + 3
CLEARED = 4


def start_in(task, store: Store, try_number: int, max_tries: int, version: str = "version-1"):  # type: ignore[no-untyped-def]
    """A try's start in a window given by ``max_tries``, under DAG ``version``."""
    ctx = context(task, try_number=try_number, store=store, max_tries=max_tries)
    ctx["ti"].dag_version_id = version
    task._pre_execute_hook(ctx)
    return ctx


def test_the_first_try_after_a_clear_records_that_it_reconnects_and_its_loss_is_decided() -> None:
    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy())
    lost_after_submit(task, store)  # window 1: try 1 stored load_a1, still RUNNING
    ctx = start_in(task, store, 2, CLEARED)  # a person cleared the task: a new window
    assert store.values[TRY_START_KEY]["expects"] == "reconnect"
    task.execute(ctx)  # the mixin reconnects: nothing submitted
    assert jobs.calls["submit"] == 1
    # try 2's worker is lost while it waits on the job: try 3 is decided on the job
    start_in(task, store, 3, CLEARED)
    entry = latest(store)
    assert (decision(entry), entry["action"]) == ("observe-running", "run")
    assert entry["reconciliation"]["externalId"] == "load_a1"


def test_the_first_try_after_a_clear_whose_job_failed_records_that_it_submits() -> None:
    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy())
    lost_after_submit(task, store)
    jobs.statuses["load_a1"] = "FAILED"
    ctx = start_in(task, store, 2, CLEARED)
    assert store.values[TRY_START_KEY]["expects"] == "submit"
    task.execute(ctx)
    assert jobs.calls["submit"] == 2


def test_a_job_of_another_dag_version_is_not_collected_after_a_clear() -> None:
    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy())
    lost_after_submit(task, store)
    jobs.statuses["load_a1"] = "DONE"  # the old version's result
    with pytest.raises(AirflowFailException, match=r"^reconcile-remote") as refused:
        start_in(task, store, 2, CLEARED, version="version-2")
    assert "DAG version version-1" in str(refused.value)
    entry = latest(store)
    assert (entry["check"], entry["action"]) == ("retry-start", "fail")
    assert entry["reconciliation"]["outcome"] == "unknown"


def test_a_retry_under_another_dag_version_does_not_reconnect_to_the_old_job() -> None:
    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy())
    lost_after_submit(task, store)  # load_a1 RUNNING, stored under version-1
    with pytest.raises(AirflowFailException, match=r"^reconcile-remote"):
        start_in(task, store, 2, 3, version="version-2")
    assert "DAG version" in latest(store)["reconciliation"]["error"]


def test_a_job_stored_in_another_window_is_not_this_windows() -> None:
    first = WorkScope("manual__1", 1, "load", -1, "version-1")
    assert first.differs(first) is None
    assert "began at try 1 (before a clear)" in str(replace(first, window=4).differs(first))
    assert "no record" in str(first.differs(None))
    assert first.same_work(replace(first, window=4)) is None
    assert "map index 2" in str(first.differs(replace(first, map_index=2)))


class _Uncopyable:
    """What a client library's job object is to a copy: it refuses to be pickled."""

    def __reduce_ex__(self, protocol: object) -> Any:
        raise TypeError("Pickling client objects is explicitly not supported")


def test_an_operator_holding_what_cannot_be_copied_is_still_read() -> None:
    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy())
    lost_after_submit(task, store)
    task._job = job = _Uncopyable()  # BigQuery's operator keeps the job it submitted
    start(task, store, 2)
    entry = latest(store)
    assert (decision(entry), entry["reconciliation"]["outcome"]) == ("observe-running", "active")
    assert task._job is job
