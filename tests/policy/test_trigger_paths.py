"""A trigger's failure is decided like any other, on a real scheduler and triggerer.

A trigger that ends its task with ``TaskFailedEvent`` would make Airflow's
triggerer put the task up for retry without asking the retry policy. The gated
operator here defers to such a trigger; the provider wraps it, so the failure
goes to a worker and the policy decides: no time left means no second trigger
run, time left means a decided retry and a second run. A gated operator that
starts in the triggerer (``start_from_trigger=True``) is refused by the DAG
processor. A trigger that fires within 2 s of the deferral, which Airflow 3.3.2's
scheduler may fail by its race before a worker does, is decided by the model on
either branch, never refused as undecided.

On the stack it shares with the modules configured alike (:mod:`tests.shared_stack`: API
server, scheduler, DAG processor, triggerer; LocalExecutor on SQLite), whose services
import the probe trigger by its classpath from this module's DAG folder; every run is
triggered before any test waits.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from devstack.stack import AirflowStack
from tests.shared_stack import SharedStacks, for_module, module_folder

pytestmark = [pytest.mark.airflow, pytest.mark.slow(minutes=1.1)]

DAGS = Path(__file__).with_name("trigger_dags")
REFUSED = DAGS / "refused" / "rw_start_from_trigger.py"
DAG_ID = "rw_trigger_failed_event"
#: its trigger fires 0.5 s after the deferral
FAST_DAG_ID = "rw_trigger_fires_fast"
#: how the scheduler's state mismatch for a try that handed itself back begins its state
HANDED_BACK = "finished with state success, but the task instance's state attribute is "
TASK_ID = "watch_job"
EVIDENCE_KEY = "retry_window.evidence"
HOUR = 3600
#: one attempt takes 5 minutes in the DAG's policy: 60 s leave no time for another
NO_TIME = 60
RUN_TIMEOUT = 180
MESSAGE = (
    "the trigger rw_probe_trigger.ProbeTrigger ended the task with a failure; "
    "the retry window gate decides its retry"
)


@dataclass(frozen=True)
class Run:
    """One triggered run and the file its trigger writes."""

    run_id: str
    counter: Path
    dag_id: str = DAG_ID

    def trigger_runs(self) -> list[str]:
        """One line per time the trigger ran in the triggerer."""
        return self.counter.read_text().splitlines() if self.counter.exists() else []


@pytest.fixture(scope="module")
def stack(shared_stacks: SharedStacks) -> AirflowStack:
    # the refused DAG is added by its test: the others run on a folder without it
    return for_module(shared_stacks, __file__, [DAG_ID, FAST_DAG_ID])


@pytest.fixture(scope="module")
def runs(stack: AirflowStack) -> dict[str, Run]:
    """A run with no time for another attempt and one with an hour, both triggered at once."""
    files = stack.home / "trigger-task-files"
    files.mkdir()
    started = {}
    for name, deadline_in, day in (
        ("no_time", NO_TIME, "2026-11-01"),
        ("hour", HOUR, "2026-11-02"),
    ):
        counter = files / f"{name}.runs"
        conf = {"deadline_in": deadline_in, "counter": str(counter)}
        started[name] = Run(stack.trigger(DAG_ID, conf=conf, logical_date=day), counter)
    counter = files / "fast.runs"
    conf = {"deadline_in": HOUR, "counter": str(counter)}
    run_id = stack.trigger(FAST_DAG_ID, conf=conf, logical_date="2026-11-03")
    started["fast"] = Run(run_id, counter, FAST_DAG_ID)
    return started


def evidence(stack: AirflowStack, run: Run) -> dict[str, Any]:
    """The gate's decisions for the run's task, from the task state store."""
    rows = stack.rows(
        "select value from task_state_store"
        " where dag_id=:d and run_id=:r and task_id=:t and key=:k",
        d=run.dag_id,
        r=run.run_id,
        t=TASK_ID,
        k=EVIDENCE_KEY,
    )
    assert rows, f"no {EVIDENCE_KEY} for {run.dag_id}.{TASK_ID}\n{stack.log_tails()}"
    return dict(json.loads(rows[0][0]))


def xcom(stack: AirflowStack, run: Run, key: str) -> Any:
    """An XCom value of the run's task, or ``None``."""
    rows = stack.rows(
        "select value from xcom where dag_id=:d and run_id=:r and task_id=:t and key=:k",
        d=DAG_ID,
        r=run.run_id,
        t=TASK_ID,
        k=key,
    )
    if not rows:
        return None
    value = rows[0][0]
    return json.loads(value) if isinstance(value, (str, bytes)) else value


def task_logs(stack: AirflowStack, run: Run) -> str:
    """Every log the try and its trigger wrote."""
    folder = (
        stack.home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run.run_id}" / f"task_id={TASK_ID}"
    )
    return "\n".join(path.read_text(errors="replace") for path in sorted(folder.rglob("*.log")))


def test_a_trigger_failure_with_no_time_left_is_refused_by_the_model(
    stack: AirflowStack, runs: dict[str, Run]
) -> None:
    run = runs["no_time"]
    assert stack.wait_for_run(DAG_ID, run.run_id, timeout=RUN_TIMEOUT) == "failed"
    assert run.trigger_runs() == ["trigger try 1 fail True"]
    assert stack.task_states(DAG_ID, run.run_id)[TASK_ID] == ("failed", 1)
    stored = evidence(stack, run)
    assert [d["tryNumber"] for d in stored["decisions"]] == [1]
    latest = stored["latest"]
    assert (latest["action"], latest["check"], latest["failure"]) == (
        "fail",
        "retry-policy",
        "retryable",
    )
    assert latest["result"]["tasks"][0]["decision"] == "deadline-infeasible"
    # the policy was handed the trigger's report, not Airflow's TaskDeferralError
    assert latest["reason"].endswith(f"(TriggerEndedWithFailure: {MESSAGE})")
    pushed = xcom(stack, run, EVIDENCE_KEY)
    assert pushed is not None
    assert pushed["result"]["tasks"][0]["decision"] == "deadline-infeasible"
    # the trigger's own XComs are kept, as Airflow keeps them for a failed task
    assert xcom(stack, run, "probe_job_state") == "FAILED"
    assert MESSAGE in task_logs(stack, run)


def test_a_trigger_failure_with_time_left_is_retried_by_decision(
    stack: AirflowStack, runs: dict[str, Run]
) -> None:
    run = runs["hour"]
    assert stack.wait_for_run(DAG_ID, run.run_id, timeout=RUN_TIMEOUT) == "success"
    assert run.trigger_runs() == ["trigger try 1 fail True", "trigger try 2 fail False"]
    assert stack.task_states(DAG_ID, run.run_id)[TASK_ID] == ("success", 2)
    stored = evidence(stack, run)
    # one decision: the retry of try 1; try 2 started because of it
    assert [d["tryNumber"] for d in stored["decisions"]] == [1]
    latest = stored["latest"]
    assert (latest["action"], latest["check"], latest["failure"]) == (
        "retry",
        "retry-policy",
        "retryable",
    )
    assert latest["result"]["tasks"][0]["decision"] in ("wait-backoff", "retry-eligible")
    assert latest["reason"].endswith(f"(TriggerEndedWithFailure: {MESSAGE})")
    earlier = stack.rows(
        "select try_number, retry_reason from task_instance_history"
        " where dag_id=:d and run_id=:r and task_id=:t order by try_number",
        d=DAG_ID,
        r=run.run_id,
        t=TASK_ID,
    )
    assert [row[0] for row in earlier] == [1]
    assert earlier[0][1] == latest["reason"]


def test_a_trigger_that_fires_within_2_s_is_decided_whether_or_not_the_scheduler_races(
    stack: AirflowStack, runs: dict[str, Run]
) -> None:
    run = runs["fast"]
    assert stack.wait_for_run(FAST_DAG_ID, run.run_id, timeout=RUN_TIMEOUT) == "success", (
        stack.log_tails()
    )
    state, tries = stack.task_states(FAST_DAG_ID, run.run_id)[TASK_ID]
    assert state == "success"
    # try 1's trigger failed the task; the last try's trigger ended it successfully
    assert run.trigger_runs() == ["trigger try 1 fail True", f"trigger try {tries} fail False"]
    # the tries Airflow's scheduler failed by its race after they handed themselves back
    lost_by_airflow = sorted(
        row[0]
        for row in stack.rows(
            "select try_number from log where dag_id=:d and run_id=:r and task_id=:t"
            " and event='state mismatch' and (extra like :queued or extra like :scheduled)",
            d=FAST_DAG_ID,
            r=run.run_id,
            t=TASK_ID,
            queued=f"%{HANDED_BACK}queued%",
            scheduled=f"%{HANDED_BACK}scheduled%",
        )
    )
    print(f"tries {tries}; failed by the scheduler's race: {lost_by_airflow}")
    decided = evidence(stack, run)["decisions"]
    assert decided, "no decision was kept"
    # on either branch every decision is the model's, and each let the task go on
    for entry in decided:
        assert entry["result"]["tasks"][0]["decision"] in ("wait-backoff", "retry-eligible")
        assert entry["action"] in ("retry", "run"), entry["reason"]
        assert "ended without a retry decision" not in entry["reason"]
    # a try lost to the race is recognised by the next try's start, when one starts (the
    # try the scheduler failed may still end itself: its second start ran on)
    recognised = sorted(e["lostTry"]["tryNumber"] for e in decided if "lostTry" in e)
    assert recognised == [lost for lost in lost_by_airflow if lost < tries]
    for entry in decided:
        if "lostTry" in entry:
            assert (entry["check"], entry["failure"]) == ("retry-start", "retryable")
            assert entry["tryNumber"] == entry["lostTry"]["tryNumber"] + 1
            assert entry["lostTry"]["foundState"] in ("scheduled", "queued")
    if not lost_by_airflow:
        # no race: the worker failed try 1 and the policy decided its retry
        assert [(e["tryNumber"], e["check"]) for e in decided] == [(1, "retry-policy")]


def test_a_gated_task_starting_in_the_triggerer_is_refused_by_the_dag_processor(
    stack: AirflowStack, runs: dict[str, Run]
) -> None:
    shutil.copy(REFUSED, module_folder(stack, __file__) / REFUSED.name)

    def reported() -> bool:
        return bool(
            stack.rows("select 1 from import_error where filename like :f", f=f"%{REFUSED.name}")
        )

    stack.wait_for(reported, f"an import error for {REFUSED.name}", timeout=120)
    errors = stack.api("GET", "/api/v2/importErrors")["import_errors"]
    (error,) = [e for e in errors if e["filename"].endswith(REFUSED.name)]
    trace = error["stack_trace"]
    assert "AirflowClusterPolicyViolation" in trace
    assert "retry window gate: task 'watch': start_from_trigger=True " in trace
    assert "set start_from_trigger=False" in trace
    assert not stack.rows("select 1 from serialized_dag where dag_id='rw_trigger_start'")
