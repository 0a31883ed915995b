"""What the example DAG must do on each kind of day, checked from the metadata DB.

Shared by the end-to-end test (SQLite, LocalExecutor) and the distributed path
(PostgreSQL, Redis, CeleryExecutor): the same DAG must behave the same on both.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pendulum

from airflow_retrywindow.model import evaluate
from devstack.stack import AirflowStack

DAG_ID = "retry_window_example"
#: where the example's stand-in warehouse keeps a run's jobs, under the Airflow home:
#: ``<home>/stand-in-warehouse/<run id>/<job id>.json`` (see the DAG file)
WAREHOUSE = "stand-in-warehouse"


@dataclass(frozen=True)
class Day:
    """One business day's run: its kind decides what the gate must do.

    On every day the worker running ``load`` is lost while its first job runs.

    :param kind: ``"on-time"`` (the job failed; the load's repeat fits), ``"late"``
        (nothing fits), ``"load-committed"`` (the job runs on and commits: the retry
        reconnects, nothing is repeated) or ``"over-budget"`` (the repeat's dry run
        exceeds the approved 200 GB).
    :param business_date: the run's logical date.
    :param deadline: seconds from the trigger to the delivery deadline.
    :param load_committed: whether the stand-in's first load job commits or fails.
    :param dry_run_gb: what the stand-in dry run estimates for the repeat.
    """

    kind: str
    business_date: str
    deadline: int
    load_committed: bool = False
    dry_run_gb: int = 180

    @property
    def conf(self) -> dict[str, Any]:
        """The run's conf: the DAG's params for this day."""
        return {
            "deadline_seconds": self.deadline,
            "load_committed": self.load_committed,
            "dry_run_gb": self.dry_run_gb,
        }

    def load_job(self, attempt: int) -> str:
        """The client job id of the load's ``attempt``."""
        return f"positions_load_{self.business_date.replace('-', '')}_v3_a{attempt}"


#: a deadline the day's work fits in: about 80 s of tasks, the load's 30 s backoff and its
#: 35 s repeat with 5 s of validation, with room for a busy machine's slower tasks
FITS = 240
ON_TIME = Day("on-time", "2026-12-01", FITS)
LATE = Day("late", "2026-12-02", 10)
LOAD_COMMITTED = Day("load-committed", "2026-11-28", FITS, load_committed=True)
OVER_BUDGET = Day("over-budget", "2026-11-29", FITS, dry_run_gb=260)
#: every kind of day, in the order the demo runs them (logical dates in the past:
#: Airflow holds a run whose logical date is still ahead)
DAYS = (ON_TIME, LOAD_COMMITTED, OVER_BUDGET, LATE)

COMMON = {
    "extract_positions": ("success", 1),
    "transform": ("success", 1),
    "reconcile_load": ("success", 1),
    "dry_run_load": ("success", 1),
    "load_retry_window": ("success", 1),
    "load_outcome": ("success", 1),
    "reconcile_append": ("success", 1),
    "append_gate": ("success", 1),  # a first run is not a retry: append runs
    "append": ("failed", 1),  # OutcomeUnknown: reconcile-remote
    "monitor": ("success", 1),
    "observe_monitor": ("success", 1),
    "retry_gate": ("success", 1),
    "rerun_everything": ("skipped", 0),
}
#: try 1's worker was lost; try 2 read the failed job when it started and was refused:
#: a confirmed failure, but the load is not claimed safe to repeat (reconcile-effects)
LOAD_REFUSED = {"load": ("failed", 2)}
#: try 1's worker was lost; try 2 found the job running and reconnected to it
LOAD_RECONNECTED = {"load": ("success", 2)}
#: the deadline fits: report waits out its backoff, archive runs out of attempts
IN_TIME = {**COMMON, "report": ("success", 2), "archive": ("failed", 2)}
REPEATED = {"retry_load": ("success", 1), "validate_load": ("success", 1)}
NOT_REPEATED = {"retry_load": ("skipped", 0)}
DELIVERED = {"validate_load": ("success", 1), "communicate_impact": ("skipped", 0)}
LATE_NOTICE = {"validate_load": ("skipped", 0), "communicate_impact": ("success", 1)}
#: day kind -> task id -> (final state, try number)
FINAL_STATES = {
    "on-time": {**IN_TIME, **LOAD_REFUSED, **DELIVERED, **REPEATED},
    "load-committed": {**IN_TIME, **LOAD_RECONNECTED, **DELIVERED, **NOT_REPEATED},
    "over-budget": {**IN_TIME, **LOAD_REFUSED, **LATE_NOTICE, **NOT_REPEATED},
    "late": {
        **COMMON,
        **LOAD_REFUSED,
        **LATE_NOTICE,
        **NOT_REPEATED,
        "report": ("failed", 1),  # deadline-infeasible
        "archive": ("failed", 1),  # deadline-infeasible
    },
}
IN_TIME_DECISIONS = {
    "report": ["wait-backoff"],
    "load": ["reconcile-effects"],
    "append": ["reconcile-remote"],
    "archive": ["wait-backoff", "attempts-exhausted"],
}
#: day kind -> task id -> the policy's decision at each failure, or when a try
#: started without one (load's try 2, after its worker was lost)
POLICY_DECISIONS = {
    "on-time": IN_TIME_DECISIONS,
    "load-committed": {**IN_TIME_DECISIONS, "load": ["observe-running"]},
    "over-budget": IN_TIME_DECISIONS,
    "late": {
        "report": ["deadline-infeasible"],
        "load": ["reconcile-effects"],
        "append": ["reconcile-remote"],
        "archive": ["deadline-infeasible"],
    },
}
#: day kind -> what load's try 2 read of the first job when it started, and whether it ran
LOAD_START = {
    "on-time": ("failed", "fail"),
    "load-committed": ("active", "run"),
    "over-budget": ("failed", "fail"),
    "late": ("failed", "fail"),
}
#: day kind -> the stand-in warehouse's load jobs at the end of the run: attempt -> status.
#: Try 2 submits nothing (it reconnects, or is refused), so a repeat is attempt 3.
LOAD_JOBS = {
    "on-time": {1: "FAILED", 3: "DONE"},
    "load-committed": {1: "DONE"},
    "over-budget": {1: "FAILED"},
    "late": {1: "FAILED"},
}
#: day kind -> the sensor's final decision about load's repeat, and its budget verdict
SENSOR_DECISION = {
    "on-time": ("retry-eligible", "within-budget"),
    "load-committed": ("validate-output", "within-budget"),
    # refused at once, whether or not the backoff is over: waiting would not help
    "over-budget": ("wait-backoff|retry-eligible", "budget-exceeded"),
    "late": ("deadline-infeasible", "within-budget"),
}


def decoded(value: Any) -> Any:
    """A JSON column as Python, whichever DB returned it."""
    return json.loads(value) if isinstance(value, (str, bytes)) else value


def xcom(stack: AirflowStack, run_id: str, task_id: str, key: str = "return_value") -> Any:
    rows = stack.rows(
        "select value from xcom where dag_id=:d and run_id=:r and task_id=:t and key=:k",
        d=DAG_ID,
        r=run_id,
        t=task_id,
        k=key,
    )
    return decoded(rows[0][0]) if rows else None


def evidence(
    stack: AirflowStack, run_id: str, *, dag_id: str = DAG_ID
) -> dict[str, list[dict[str, Any]]]:
    """task id -> the policy's recorded decisions, in order (of the example's run by default)."""
    rows = stack.rows(
        "select task_id, value from task_state_store where dag_id=:d and run_id=:r "
        "and key='retry_window.evidence'",
        d=dag_id,
        r=run_id,
    )
    return {task: decoded(value)["decisions"] for task, value in rows}


def load_jobs(stack: AirflowStack, run_id: str) -> dict[str, str]:
    """The load jobs the stand-in warehouse accepted in the run: job id -> its status
    now, in the order they were submitted.

    Read from the warehouse's own files, not from what the DAG reports of them.
    """
    jobs = []
    for path in (stack.home / WAREHOUSE / run_id).glob("positions_load_*.json"):
        job = json.loads(path.read_text())
        submitted = pendulum.parse(job["submitted_at"])
        ended = pendulum.now("UTC") >= submitted + timedelta(seconds=float(job["runs_for"]))
        jobs.append((submitted, path.stem, job["outcome"] if ended else "RUNNING"))
    return {job_id: status for _, job_id, status in sorted(jobs)}


def load_start(stack: AirflowStack, run_id: str) -> dict[str, Any] | None:
    """The decision taken when load's try 2 started, with what it read of the job."""
    for entry in evidence(stack, run_id).get("load", []):
        if entry.get("check") == "retry-start":
            return entry
    return None


def problems(stack: AirflowStack, run_id: str, day: Day) -> list[str]:
    """Everything about the run that differs from what the gate decided; [] when none."""
    found: list[str] = []
    states = stack.task_states(DAG_ID, run_id)
    for task, expected in FINAL_STATES[day.kind].items():
        if states.get(task) != expected:
            found.append(f"{task}: expected (state, try) {expected}, got {states.get(task)}")
    found += _policy_problems(evidence(stack, run_id), states, POLICY_DECISIONS[day.kind])
    found += _load_problems(stack, run_id, day)
    found += _sensor_problems(stack, run_id, states, SENSOR_DECISION[day.kind])
    return found


#: what clearing append with upstream runs again, and how each task then ends
AFTER_APPEND_CLEAR = {
    "extract_positions": ("success", 2),
    "transform": ("success", 2),
    "reconcile_append": ("success", 2),
    "append_gate": ("success", 2),
    "append": ("skipped", 1),  # the gate held the repeat: never started again
}


def clear_append(stack: AirflowStack, run_id: str) -> str:
    """Do what the runbook says for append: clear it with upstream so append_gate decides.

    Returns the run's state once the cleared tasks have run.
    """
    (cleared,) = stack.rows(
        "select clear_number from dag_run where dag_id=:d and run_id=:r", d=DAG_ID, r=run_id
    )[0]
    stack.clear(DAG_ID, run_id, ["append"], upstream=True)
    return stack.wait_for_clear(DAG_ID, run_id, cleared=int(cleared) + 1, timeout=180)


def append_clear_problems(stack: AirflowStack, run_id: str) -> list[str]:
    """Everything about a run cleared by :func:`clear_append` that differs from the
    gate's decision to hold the repeat; [] when none."""
    states = stack.task_states(DAG_ID, run_id)
    found = [
        f"{task}: expected (state, try) {expected} after the clear, got {states.get(task)}"
        for task, expected in AFTER_APPEND_CLEAR.items()
        if states.get(task) != expected
    ]
    record = xcom(stack, run_id, "append_gate")
    row = (record or {}).get("decisions", [{}])[0]
    if (row.get("decision"), row.get("source")) != ("validate-output", "observations"):
        found.append(f"append_gate decided {row.get('decision')} from {row.get('source')}")
    if (record or {}).get("skipped") != ["append"]:
        found.append(f"append_gate skipped {(record or {}).get('skipped')}, not ['append']")
    return found


def _policy_problems(
    recorded: dict[str, list[dict[str, Any]]],
    states: dict[str, tuple[str | None, int]],
    expected: dict[str, list[str]],
) -> list[str]:
    found = []
    for task, decisions in expected.items():
        entries = recorded.get(task, [])
        got = [entry["result"]["tasks"][0]["decision"] for entry in entries]
        if got != decisions:
            found.append(f"{task}: policy decided {got}, expected {decisions}")
        for entry in entries:
            # the recorded fixture replays to the recorded result
            if evaluate(entry["fixture"]) != entry["result"]:
                found.append(f"{task} try {entry['tryNumber']}: evidence does not replay")
            retried = states[task][1] > entry["tryNumber"]
            if (entry["action"] == "retry") != retried:
                found.append(
                    f"{task} try {entry['tryNumber']}: the gate said {entry['action']} but "
                    f"Airflow {'retried' if retried else 'did not retry'}"
                )
    return found


def _load_problems(stack: AirflowStack, run_id: str, day: Day) -> list[str]:
    """What was submitted, and what load's try 2 read and did before its code ran."""
    found = []
    jobs = load_jobs(stack, run_id)
    expected = {day.load_job(attempt): status for attempt, status in LOAD_JOBS[day.kind].items()}
    if jobs != expected:
        found.append(f"the warehouse holds the load jobs {jobs}, expected {expected}")
    entry = load_start(stack, run_id) or {}
    read = entry.get("reconciliation") or {}
    outcome, action = LOAD_START[day.kind]
    got = (entry.get("tryNumber"), entry.get("action"), read.get("outcome"), read.get("externalId"))
    if got != (2, action, outcome, day.load_job(1)):
        found.append(
            f"load's try 2 started with (try, action, read, job) {got}, expected "
            f"{(2, action, outcome, day.load_job(1))}"
        )
    return found


def _sensor_problems(
    stack: AirflowStack,
    run_id: str,
    states: dict[str, tuple[str | None, int]],
    expected: tuple[str, str],
) -> list[str]:
    record = xcom(stack, run_id, "load_retry_window")
    if not isinstance(record, dict) or not record.get("decisions"):
        return [f"load_retry_window published no decision record: {record!r}"]
    decided = (record["decisions"][0]["decision"], (record.get("budget") or {}).get("verdict"))
    if decided[0] not in expected[0].split("|") or decided[1] != expected[1]:
        found = [f"sensor decided {decided}, expected {expected}"]
    else:
        found = []
    ran = states["retry_load"][0] == "success"
    if ran != (decided == ("retry-eligible", "within-budget")):
        found.append(f"retry_load is {states['retry_load']} after the sensor said {decided}")
    return found
