"""A resumable operator (Airflow's ``ResumableJobMixin``) on a real scheduler, gated and plain.

Each run's one task submits a job to the stand-in job service
(``devstack/job_service.py``), which counts submissions: one submission is a
reconnect, two is a repeat (wanted or a duplicate). The try-1 faults come from
the run's conf: the task process SIGKILLed while its job runs, or right after
the job was submitted and before its id was stored.

The ``rw_plain_*`` runs are the baseline: the same operator with Airflow's own
retries, which cannot tell a job that is still running from one whose id was
never stored. The ``rw_resumable_*`` runs carry a ``RetryWindowPolicy``: each
retry is decided on one status read of the stored job, kept as evidence.

One stack (API server, scheduler, DAG processor; LocalExecutor) and one job
service serve the whole module; every run is triggered as soon as both are up,
so the runs overlap and each test waits for its own.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from devstack.job_service import FAILED, JobService, Script, Step, job_service
from devstack.stack import FREQUENT_HEARTBEATS, AirflowStack, sqlite_stack
from tests.resumable import kept_decisions as kept
from tests.resumable.kept_decisions import EVIDENCE_KEY, decision_of

pytestmark = [pytest.mark.airflow, pytest.mark.slow(minutes=2.3)]

DAGS = Path(__file__).with_name("dags")
DAG_FILES = ("stand_in_job_operator.py", "rw_resumable_jobs.py")
SERVICES = ("api-server", "scheduler", "dag-processor")
HOUR = 3600
#: the scheduler fails a running try that has not heartbeaten for this long (default 300 s)
HEARTBEAT_TIMEOUT = 15
TASK_ID = "job"
JOB_ID_KEY = "stand_in_job_id"
RUN_TIMEOUT = 240
#: how the scheduler's state mismatch for a try that handed itself back begins its state
HANDED_BACK = "finished with state success, but the task instance's state attribute is "
KILL_DURING_POLL = "kill-during-poll"
KILL_AFTER_SUBMIT = "kill-after-submit"

#: what the service's jobs do, per scenario; the n-th submission of a run plays step n
SCENARIOS = {
    # outlives the killed try and the start of its retry, however late a busy machine
    # starts it (over 40 s after the kill in CI): the retry finds it running
    "runs-90s": Script((Step(running=90),)),
    # ends FAILED long before the killed try's retry starts; a repeat works
    "fails-then-done": Script((Step(running=1.5, ends=FAILED), Step(running=3))),
    "runs-10s": Script((Step(running=10),)),
    "always-fails": Script((Step(running=1, ends=FAILED),)),
    # outlives a try given up on, a clear, and the loss of the first try after it
    "runs-60s": Script((Step(running=60),)),
}
#: run by its test, not with the others: a person clears it once its first window ends
CLEARED_DAG = "rw_resumable_cleared"


@dataclass(frozen=True)
class Case:
    """One DAG run: what its job does, what goes wrong on try 1, its deadline."""

    dag_id: str
    scenario: str
    fault: str | None = None
    deadline_in: int = HOUR


CASES = (
    Case("rw_resumable_killed_running", "runs-90s", KILL_DURING_POLL),
    Case("rw_resumable_lost_then_failed_safe", "fails-then-done", KILL_DURING_POLL),
    Case("rw_resumable_lost_then_failed_unsafe", "fails-then-done", KILL_DURING_POLL),
    Case("rw_resumable_lost_before_id", "runs-10s", KILL_AFTER_SUBMIT),
    # one attempt takes 65 s with its validation: a retry cannot end before the deadline
    Case("rw_resumable_deadline", "always-fails", deadline_in=30),
    # its try is rescheduled to the end of a 2 s backoff: Airflow 3.3.2's scheduler may fail it
    Case("rw_resumable_short_backoff", "fails-then-done", KILL_DURING_POLL),
    Case("rw_plain_killed_running", "runs-90s", KILL_DURING_POLL),
    Case("rw_plain_lost_then_failed", "fails-then-done", KILL_DURING_POLL),
    Case("rw_plain_lost_before_id", "runs-10s", KILL_AFTER_SUBMIT),
    Case("rw_plain_deadline", "always-fails", deadline_in=30),
)


@dataclass(frozen=True)
class Run:
    """One triggered DAG run."""

    dag_id: str
    run_id: str

    @property
    def key(self) -> str:
        """What the job service counts the run's submissions under."""
        return f"{self.dag_id}/{self.run_id}"


@pytest.fixture(scope="module")
def service() -> Iterator[JobService]:
    with job_service(SCENARIOS) as serving:
        yield serving


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowStack]:
    """A SQLite stack with a short heartbeat timeout, parsing this module's DAGs only."""
    home = tmp_path_factory.mktemp("resumable")
    dags = home / "dags"
    dags.mkdir()
    for name in DAG_FILES:
        shutil.copy(DAGS / name, dags / name)
    settings = {
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT),
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "1",
        **FREQUENT_HEARTBEATS,
        # every run of the module at once
        "AIRFLOW__CORE__PARALLELISM": str(len(CASES) + 2),
    }
    dag_ids = [case.dag_id for case in CASES] + [CLEARED_DAG]
    with sqlite_stack(home, SERVICES, dag_ids, dags_folder=dags, extra_env=settings) as running:
        yield running


@pytest.fixture(scope="module")
def runs(stack: AirflowStack, service: JobService) -> dict[str, Run]:
    """One run of every case, all triggered (through the REST API) before any test waits."""
    started = {}
    for case in CASES:
        run_id = f"manual__{case.dag_id}"
        conf = {
            "job_service": service.url,
            "scenario": case.scenario,
            "fault": case.fault,
            "deadline_in": case.deadline_in,
        }
        stack.api(
            "POST",
            f"/api/v2/dags/{case.dag_id}/dagRuns",
            {"dag_run_id": run_id, "logical_date": "2026-11-01T00:00:00Z", "conf": conf},
        )
        started[case.dag_id] = Run(case.dag_id, run_id)
    return started


TASK = kept.KeptTask(TASK_ID, RUN_TIMEOUT)


def summary(stack: AirflowStack, service: JobService, run: Run) -> dict[str, Any]:
    """What the baseline compares: submissions, run state, the task's state and try."""
    state, tries = TASK.task_instance(stack, run)
    return {
        "submissions": len(service.submissions(run.key)),
        "run": stack.run_state(run.dag_id, run.run_id),
        "task": state,
        "try": tries,
    }


def test_plain_airflow_cannot_tell_a_running_job_from_a_lost_id(
    stack: AirflowStack, service: JobService, runs: dict[str, Run]
) -> None:
    """The baseline: Airflow's retries and the mixin alone, without a retry policy."""
    expected = {
        # the stored id leads the retry back to the running job
        "rw_plain_killed_running": {
            "submissions": 1,
            "run": "success",
            "task": "success",
            "try": 2,
        },
        # the stored job failed: the mixin submits a fresh one
        "rw_plain_lost_then_failed": {
            "submissions": 2,
            "run": "success",
            "task": "success",
            "try": 2,
        },
        # the id was never stored: the retry submits the same work again, a duplicate
        "rw_plain_lost_before_id": {
            "submissions": 2,
            "run": "success",
            "task": "success",
            "try": 2,
        },
        # every retry resubmits, whatever the deadline
        "rw_plain_deadline": {"submissions": 3, "run": "failed", "task": "failed", "try": 3},
    }
    for dag_id in expected:
        TASK.finished(stack, runs[dag_id])
    seen = {dag_id: summary(stack, service, runs[dag_id]) for dag_id in expected}
    print(json.dumps(seen, indent=1))
    assert seen == expected
    # no retry policy, no evidence
    assert all(TASK.stored(stack, runs[dag_id], EVIDENCE_KEY) is None for dag_id in expected)


def test_a_worker_lost_while_the_job_runs_reconnects(
    stack: AirflowStack, service: JobService, runs: dict[str, Run]
) -> None:
    run = runs["rw_resumable_killed_running"]
    assert TASK.finished(stack, run) == "success"
    submitted = service.submissions(run.key)
    assert len(submitted) == 1
    assert TASK.stored(stack, run, JOB_ID_KEY) == submitted[0]
    assert TASK.task_instance(stack, run) == ("success", 2)
    kept = TASK.decisions(stack, run)
    # try 1 was killed without a decision; try 2 was decided when it started
    assert [d["tryNumber"] for d in kept] == [2]
    latest = kept[-1]
    assert (latest["check"], latest["action"]) == ("retry-start", "run")
    assert decision_of(latest) == "observe-running"
    reconciliation = latest["reconciliation"]
    assert reconciliation["outcome"] == "active"
    assert reconciliation["externalIdKey"] == JOB_ID_KEY
    assert reconciliation["externalId"] == submitted[0]
    assert reconciliation["status"] in ("PENDING", "RUNNING")
    assert reconciliation["allows"] == "reconnect"
    assert (reconciliation["reachedService"], reconciliation["finished"]) == (True, False)
    assert reconciliation["error"] is None
    assert TASK.latest_evidence(stack, run) == latest


def test_a_job_that_failed_after_its_worker_was_lost_is_repeated_once_when_safe(
    stack: AirflowStack, service: JobService, runs: dict[str, Run]
) -> None:
    run = runs["rw_resumable_lost_then_failed_safe"]
    assert TASK.finished(stack, run) == "success"
    submitted = service.submissions(run.key)
    assert len(submitted) == 2
    assert [job.split(".")[1] for job in submitted] == ["try1", "try2"]
    assert TASK.stored(stack, run, JOB_ID_KEY) == submitted[1]
    assert TASK.task_instance(stack, run) == ("success", 2)
    kept = TASK.decisions(stack, run)
    # every decision is try 2's, at its start, on the failed first job
    assert kept and all(d["tryNumber"] == 2 and d["check"] == "retry-start" for d in kept)
    for entry in kept:
        assert entry["reconciliation"]["outcome"] == "failed"
        assert entry["reconciliation"]["externalId"] == submitted[0]
        assert entry["reconciliation"]["status"] == FAILED
        assert entry["reconciliation"]["finished"] is True
    # waiting out the backoff reschedules the try; the last start ran it
    assert [(decision_of(d), d["action"]) for d in kept[:-1]] == [
        ("wait-backoff", "reschedule")
    ] * (len(kept) - 1)
    assert (decision_of(kept[-1]), kept[-1]["action"]) == ("retry-eligible", "run")
    assert TASK.latest_evidence(stack, run) == kept[-1]


def test_a_job_that_failed_after_its_worker_was_lost_is_not_repeated_unless_safe(
    stack: AirflowStack, service: JobService, runs: dict[str, Run]
) -> None:
    run = runs["rw_resumable_lost_then_failed_unsafe"]
    assert TASK.finished(stack, run) == "failed"
    submitted = service.submissions(run.key)
    assert len(submitted) == 1
    assert TASK.task_instance(stack, run) == ("failed", 2)
    kept = TASK.decisions(stack, run)
    assert [d["tryNumber"] for d in kept] == [2]
    latest = kept[-1]
    assert (latest["check"], latest["action"]) == ("retry-start", "fail")
    assert decision_of(latest) == "reconcile-effects"
    assert latest["reconciliation"]["outcome"] == "failed"
    assert latest["reconciliation"]["externalId"] == submitted[0]
    assert latest["reconciliation"]["status"] == FAILED
    assert TASK.latest_evidence(stack, run) == latest


def test_a_worker_lost_before_the_job_id_was_stored_is_refused(
    stack: AirflowStack, service: JobService, runs: dict[str, Run]
) -> None:
    run = runs["rw_resumable_lost_before_id"]
    assert TASK.finished(stack, run) == "failed"
    submitted = service.submissions(run.key)
    assert len(submitted) == 1
    # the job was accepted, but its id never reached the task state store
    assert TASK.stored(stack, run, JOB_ID_KEY) is None
    assert TASK.task_instance(stack, run) == ("failed", 2)
    kept = TASK.decisions(stack, run)
    assert [d["tryNumber"] for d in kept] == [2]
    latest = kept[-1]
    assert (latest["check"], latest["action"]) == ("retry-start", "fail")
    assert latest["failure"] == "unknown"
    assert decision_of(latest) == "reconcile-remote"
    assert latest["reconciliation"]["outcome"] == "no-id"
    assert latest["reconciliation"]["externalId"] is None
    assert TASK.latest_evidence(stack, run) == latest


def test_a_failed_job_with_no_time_left_is_not_repeated(
    stack: AirflowStack, service: JobService, runs: dict[str, Run]
) -> None:
    run = runs["rw_resumable_deadline"]
    assert TASK.finished(stack, run) == "failed"
    assert len(service.submissions(run.key)) == 1
    assert TASK.task_instance(stack, run) == ("failed", 1)
    kept = TASK.decisions(stack, run)
    assert [d["tryNumber"] for d in kept] == [1]
    latest = kept[-1]
    assert (latest["check"], latest["action"]) == ("retry-policy", "fail")
    assert latest["failure"] == "retryable"
    assert decision_of(latest) == "deadline-infeasible"
    assert "StandInJobFailed" in latest["reason"]
    # an ordinary failure is decided without reading the job again
    assert latest.get("reconciliation") is None
    assert TASK.latest_evidence(stack, run) == latest


def test_the_first_try_after_a_clear_reconnects_and_its_lost_worker_is_decided_on_the_job(
    stack: AirflowStack, service: JobService
) -> None:
    """Try 1 gives up on its job (terminal) while it runs; a person clears the task; try 2,
    the first of the new window, reconnects to the job and its worker is lost; try 3 is
    decided on the job, not refused as a try that may have submitted an unkept job."""
    run = Run(CLEARED_DAG, f"manual__{CLEARED_DAG}")
    conf = {
        "job_service": service.url,
        "scenario": "runs-60s",
        "faults": {"1": "terminal-during-poll", "2": KILL_DURING_POLL},
        "deadline_in": HOUR,
    }
    stack.api(
        "POST",
        f"/api/v2/dags/{CLEARED_DAG}/dagRuns",
        {"dag_run_id": run.run_id, "logical_date": "2026-11-01T00:00:00Z", "conf": conf},
    )
    assert TASK.finished(stack, run) == "failed"
    assert decision_of(TASK.decisions(stack, run)[-1]) == "repair-cause"
    stack.clear(run.dag_id, run.run_id, [TASK_ID])
    assert stack.wait_for_clear(run.dag_id, run.run_id, cleared=1, timeout=RUN_TIMEOUT) == (
        "success"
    )
    assert len(service.submissions(run.key)) == 1  # reconnected twice, never resubmitted
    assert TASK.task_instance(stack, run) == ("success", 3)
    decided = TASK.decisions(stack, run)[-1]
    assert (decided["tryNumber"], decided["check"], decided["action"]) == (3, "retry-start", "run")
    assert decision_of(decided) in ("observe-running", "validate-output")
    assert decided["reconciliation"]["externalId"] == TASK.stored(stack, run, JOB_ID_KEY)


def test_a_reschedule_after_a_short_backoff_is_decided_whether_or_not_the_scheduler_races(
    stack: AirflowStack, service: JobService, runs: dict[str, Run]
) -> None:
    run = runs["rw_resumable_short_backoff"]
    assert TASK.finished(stack, run) == "success"
    # the failed job is repeated once, whichever try ran the repeat
    submitted = service.submissions(run.key)
    assert len(submitted) == 2
    state, tries = TASK.task_instance(stack, run)
    assert state == "success"
    # the tries Airflow's scheduler failed by its race after they handed themselves back
    lost_by_airflow = sorted(
        row[0]
        for row in stack.rows(
            "select try_number from log where dag_id=:d and run_id=:r and task_id=:t"
            " and event='state mismatch' and (extra like :queued or extra like :scheduled)",
            d=run.dag_id,
            r=run.run_id,
            t=TASK_ID,
            queued=f"%{HANDED_BACK}queued%",
            scheduled=f"%{HANDED_BACK}scheduled%",
        )
    )
    print(f"tries {tries}; failed by the scheduler's race: {lost_by_airflow}")
    kept = TASK.decisions(stack, run)
    # try 2's start found the failed job and rescheduled the try to the end of the backoff
    assert (kept[0]["tryNumber"], kept[0]["action"]) == (2, "reschedule")
    assert decision_of(kept[0]) == "wait-backoff"
    # on either branch every decision is the model's, at a try's start, on the job it read
    for entry in kept:
        assert entry["check"] == "retry-start"
        assert decision_of(entry) in ("wait-backoff", "retry-eligible"), entry["reason"]
        assert entry["action"] in ("reschedule", "run")
        assert entry["reconciliation"]["outcome"] == "failed"
    assert (decision_of(kept[-1]), kept[-1]["action"]) == ("retry-eligible", "run")
    # a try lost to the race is recognised by the next try's start, when one starts (the
    # try the scheduler failed may still end itself: its second start ran on)
    recognised = sorted(e["lostTry"]["tryNumber"] for e in kept if "lostTry" in e)
    assert recognised == [lost for lost in lost_by_airflow if lost < tries]
    for entry in kept:
        if "lostTry" in entry:
            assert entry["lostTry"]["how"] == "rescheduled by the retry-start check"
            assert entry["tryNumber"] == entry["lostTry"]["tryNumber"] + 1
    assert TASK.latest_evidence(stack, run) == kept[-1]
