"""Reconcile, then decide: a resumable job's status is read once before the model decides.

The retry-start check and the policy run in-process on a real ``ResumableJobMixin``
operator; its job service is in memory. Each test plays the tries a worker would
run: the check (``pre_execute``), then the operator's own ``execute``, or a lost
worker (nothing more happens in that try).
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import pendulum
import pytest
from airflow.sdk.exceptions import (
    AirflowFailException,
    AirflowRescheduleException,
    AirflowTaskTimeout,
)

from airflow_retrywindow import OutcomeUnknown
from airflow_retrywindow.records import evidence
from airflow_retrywindow.records.try_start import TRY_START_KEY
from tests.policy.resumable_jobs import Jobs, Store, context, job_operator, policy


def start(task, store: Store, try_number: int) -> dict:  # type: ignore[no-untyped-def]
    """One try's start: the retry-start check, as Airflow runs it before ``execute``."""
    ctx = context(task, try_number=try_number, store=store)
    task._pre_execute_hook(ctx)
    return ctx


def latest(store: Store) -> dict:  # type: ignore[type-arg]
    return store.values[evidence.EVIDENCE_KEY]["latest"]  # type: ignore[no-any-return]


def decision(entry: dict) -> str:  # type: ignore[type-arg]
    return entry["result"]["tasks"][0]["decision"]  # type: ignore[no-any-return]


def lost_after_submit(task, store: Store) -> None:  # type: ignore[no-untyped-def]
    """Try 1 submits and stores its job id, then its worker is lost."""
    ctx = start(task, store, 1)
    task.execute(ctx)  # the stand-in's poll returns at once: the job is still RUNNING


def test_a_lost_worker_whose_job_still_runs_reconnects_and_submits_nothing() -> None:
    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy())
    lost_after_submit(task, store)
    ctx = start(task, store, 2)  # does not raise: the try only reconnects
    entry = latest(store)
    assert (decision(entry), entry["action"], entry["check"]) == (
        "observe-running",
        "run",
        "retry-start",
    )
    job = entry["reconciliation"]
    assert job["externalIdKey"] == "stand_in_job_id"
    assert job["externalId"] == "load_a1"
    assert (job["status"], job["outcome"], job["allows"]) == ("RUNNING", "active", "reconnect")
    assert (job["reachedService"], job["finished"]) == (True, False)
    assert "reconnects to job load_a1, submits nothing" in entry["reason"]
    task.execute(ctx)
    assert jobs.calls["submit"] == 1
    assert store.values[TRY_START_KEY]["expects"] == "reconnect"


def test_the_gate_only_reads_one_status_and_never_submits_cancels_or_polls() -> None:
    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy())
    lost_after_submit(task, store)
    before = dict(jobs.calls)
    start(task, store, 2)
    assert jobs.calls["status"] - before.get("status", 0) == 1
    for call in ("submit", "cancel", "poll"):
        assert jobs.calls[call] == before.get(call, 0)


def test_a_succeeded_job_is_collected_and_its_output_still_needs_validation() -> None:
    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy())
    lost_after_submit(task, store)
    jobs.statuses["load_a1"] = "DONE"
    start(task, store, 2)
    entry = latest(store)
    assert (decision(entry), entry["action"]) == ("validate-output", "run")
    assert entry["reconciliation"]["allows"] == "collect"
    assert "load_a1" in entry["reconciliation"]["toValidate"]
    assert "output still needs validation" in entry["reason"]


def test_a_confirmed_failure_waits_out_the_models_backoff_in_the_same_try() -> None:
    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy(), retry_delay=30)
    lost_after_submit(task, store)
    jobs.statuses["load_a1"] = "FAILED"
    with pytest.raises(AirflowRescheduleException) as raised:
        start(task, store, 2)
    entry = latest(store)
    assert (decision(entry), entry["action"], entry["failure"]) == (
        "wait-backoff",
        "reschedule",
        "retryable",
    )
    read_at = entry["reconciliation"]["readAt"]
    assert raised.value.reschedule_date.isoformat() >= read_at
    assert jobs.calls["submit"] == 1


def test_a_rescheduled_try_keeps_the_first_time_the_failure_was_seen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy(), retry_delay=30)
    lost_after_submit(task, store)
    jobs.statuses["load_a1"] = "FAILED"
    # each start on a stopped clock, the second 10 s after the first and on the same
    # fraction of a second: its decision rounds alike, and had it taken its own read for
    # the failure's end, its start would be 10 s later
    seen = pendulum.now("UTC").add(seconds=1).replace(microsecond=900_000)
    monkeypatch.setattr(pendulum, "now", lambda tz=None: seen)
    with pytest.raises(AirflowRescheduleException) as first:
        start(task, store, 2)
    monkeypatch.setattr(pendulum, "now", lambda tz=None: seen.add(seconds=10))
    with pytest.raises(AirflowRescheduleException) as again:
        start(task, store, 2)  # started again before the backoff ran out
    assert first.value.reschedule_date >= seen.add(seconds=30)
    assert again.value.reschedule_date == first.value.reschedule_date
    assert latest(store)["reconciliation"]["failedSince"] is not None


def waited_out(task, store: Store, try_number: int) -> dict:  # type: ignore[no-untyped-def]
    """Start a try, which is rescheduled to the end of a 1 s backoff, then start it again."""
    with pytest.raises(AirflowRescheduleException):
        start(task, store, try_number)
    time.sleep(2.1)  # past the backoff and the clock's rounding
    return start(task, store, try_number)


def test_a_confirmed_failure_runs_once_its_backoff_is_over_and_the_operator_resubmits() -> None:
    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy(), retry_delay=1)
    lost_after_submit(task, store)
    jobs.statuses["load_a1"] = "FAILED"
    ctx = waited_out(task, store, 2)
    entry = latest(store)
    assert (decision(entry), entry["action"]) == ("retry-eligible", "run")
    task.execute(ctx)
    assert jobs.calls["submit"] == 2
    assert store.values["stand_in_job_id"] == "load_a2"


def test_a_confirmed_failure_not_claimed_safe_to_repeat_is_refused() -> None:
    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy(safe_repeat=False))
    lost_after_submit(task, store)
    jobs.statuses["load_a1"] = "FAILED"
    with pytest.raises(AirflowFailException, match=r"^reconcile-effects"):
        start(task, store, 2)
    assert latest(store)["action"] == "fail"
    assert jobs.calls["submit"] == 1


def test_no_stored_job_id_leaves_the_outcome_unknown() -> None:
    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy())
    start(task, store, 1)  # the worker is lost before the mixin stored any id
    with pytest.raises(AirflowFailException, match=r"^reconcile-remote"):
        start(task, store, 2)
    job = latest(store)["reconciliation"]
    assert (job["outcome"], job["externalId"]) == ("no-id", None)
    assert jobs.calls["status"] == 0


def test_a_try_that_stored_no_new_id_may_have_submitted_one_never_kept() -> None:
    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy(), retry_delay=1)
    lost_after_submit(task, store)
    jobs.statuses["load_a1"] = "FAILED"
    waited_out(task, store, 2)  # decided: the repeat may run, and would store load_a2
    # ... but try 2's worker is lost after submitting, before it stored the new id
    with pytest.raises(AirflowFailException, match=r"^reconcile-remote"):
        start(task, store, 3)
    job = latest(store)["reconciliation"]
    assert job["outcome"] == "no-id"
    assert "stored no new job id" in job["error"]


@pytest.mark.parametrize(
    ("broken", "why"),
    [(ConnectionError("service unreachable"), "ConnectionError"), (2.0, "status_read_timeout")],
)
def test_a_read_that_fails_or_hangs_leaves_the_outcome_unknown(broken: object, why: str) -> None:
    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy(status_read_timeout=0.5))
    lost_after_submit(task, store)
    jobs.broken = broken  # type: ignore[assignment]
    with pytest.raises(AirflowFailException, match=r"^reconcile-remote"):
        start(task, store, 2)
    job = latest(store)["reconciliation"]
    assert job["outcome"] == "unknown"
    assert why in job["error"]


def test_a_status_the_operator_does_not_classify_is_unknown_unless_listed() -> None:
    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy(), retry_delay=1)
    lost_after_submit(task, store)
    jobs.statuses["load_a1"] = "QUARANTINED"
    with pytest.raises(AirflowFailException, match=r"^reconcile-remote"):
        start(task, store, 2)
    assert "QUARANTINED" in latest(store)["reconciliation"]["error"]
    listed = job_operator(jobs, policy(failed_statuses=["quarantined"]), retry_delay=1)
    with pytest.raises(AirflowRescheduleException):
        start(listed, store, 2)
    assert decision(latest(store)) == "wait-backoff"


# -- at failure time, in the worker ---------------------------------------------------


def test_a_timeout_while_the_job_runs_retries_at_once_to_reconnect() -> None:
    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy())
    ctx = start(task, store, 1)
    task.execute(ctx)
    retry = task.retry_policy.evaluate(AirflowTaskTimeout(), 1, 3, ctx)
    assert retry.action.value == "retry"
    assert retry.retry_delay is not None and retry.retry_delay.total_seconds() == 0
    assert retry.reason and retry.reason.startswith("observe-running")
    assert "reconnects to job load_a1" in retry.reason
    entry = latest(store)
    assert (entry["check"], entry["failure"]) == ("retry-policy", "unknown")
    # the next try reads the job again before it starts: still running, it reconnects
    start(task, store, 2)
    assert (decision(latest(store)), latest(store)["action"]) == ("observe-running", "run")


def test_a_job_that_failed_after_a_reconnect_decision_is_decided_again_at_start() -> None:
    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy(safe_repeat=False))
    ctx = start(task, store, 1)
    task.execute(ctx)
    task.retry_policy.evaluate(OutcomeUnknown("lost answer"), 1, 3, ctx)
    jobs.statuses["load_a1"] = "FAILED"  # ended between the decision and the next try
    with pytest.raises(AirflowFailException, match=r"^reconcile-effects"):
        start(task, store, 2)
    assert jobs.calls["submit"] == 1


def test_an_unknown_outcome_whose_job_failed_is_decided_like_any_retryable_failure() -> None:
    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy())
    ctx = start(task, store, 1)
    task.execute(ctx)
    jobs.statuses["load_a1"] = "FAILED"
    retry = task.retry_policy.evaluate(OutcomeUnknown("lost answer"), 1, 3, ctx)
    assert retry.action.value == "retry"
    assert retry.reason and retry.reason.startswith("wait-backoff")
    assert latest(store)["failure"] == "retryable"
    start(task, store, 2)  # a plain decided retry: the operator resubmits
    assert latest(store)["check"] == "retry-policy"


def test_a_retryable_failure_reads_nothing() -> None:
    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy())
    ctx = start(task, store, 1)
    task.execute(ctx)
    before = jobs.calls["status"]
    task.retry_policy.evaluate(ConnectionError("reset"), 1, 3, ctx)
    assert jobs.calls["status"] == before
    assert "reconciliation" not in latest(store)


def test_a_resumed_try_is_not_decided_twice() -> None:
    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy())
    lost_after_submit(task, store)
    start(task, store, 2)
    reads = jobs.calls["status"]
    start(task, store, 2)  # the same try resumed after deferral
    assert jobs.calls["status"] == reads


def test_a_succeeded_job_that_tolerated_errors_says_how_many() -> None:
    class TolerantOperator(type(job_operator(Jobs(), policy()))):  # type: ignore[misc]
        """Keeps the job it read, as BigQuery's operator does, with two non-fatal errors."""

        def get_job_status(self, external_id: object, context: object) -> str:
            status = super().get_job_status(external_id, context)
            self._job = SimpleNamespace(errors=[{"reason": "invalid"}, {"reason": "invalid"}])
            return status

    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy())
    task.__class__ = TolerantOperator
    lost_after_submit(task, store)
    jobs.statuses["load_a1"] = "DONE"
    start(task, store, 2)
    job = latest(store)["reconciliation"]
    assert job["toleratedErrors"] == 2
    assert "2 errors tolerated" in job["toValidate"]
    assert "with 2 errors tolerated" in latest(store)["reason"]


def test_what_the_read_sets_on_the_operator_stays_off_the_try_that_runs() -> None:
    class SelfUpdatingOperator(type(job_operator(Jobs(), policy()))):  # type: ignore[misc]
        """Keeps the job it read as its own job id, as BigQuery's operator does."""

        def get_job_status(self, external_id: object, context: object) -> str:
            self.job_id = str(external_id)
            return super().get_job_status(external_id, context)  # type: ignore[no-any-return]

    jobs, store = Jobs(), Store()
    task = job_operator(jobs, policy())
    task.__class__ = SelfUpdatingOperator
    lost_after_submit(task, store)
    task.job_id = "load_a2"  # what try 2 renders from its template
    start(task, store, 2)  # reads load_a1, still RUNNING: the try reconnects
    assert latest(store)["reconciliation"]["externalId"] == "load_a1"
    assert task.job_id == "load_a2"
