"""What the example DAG must do on each kind of day, checked from the metadata DB.

Shared by the end-to-end test (SQLite, LocalExecutor) and the distributed path
(PostgreSQL, Redis, CeleryExecutor): the same DAG must behave the same on both.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from airflow_retrywindow.model import evaluate
from devstack.stack import AirflowStack

DAG_ID = "retry_window_example"


@dataclass(frozen=True)
class Day:
    """One business day's run: its kind decides what the gate must do.

    :param kind: ``"on-time"`` (the load's repeat fits), ``"late"`` (nothing
        fits), ``"load-committed"`` (the failed load had committed: no repeat) or
        ``"over-budget"`` (the repeat's dry run exceeds the approved 200 GB).
    :param business_date: the run's logical date.
    :param deadline: seconds from the trigger to the delivery deadline.
    :param load_committed: what the stand-in job API says of the failed load.
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


ON_TIME = Day("on-time", "2026-12-01", 150)
LATE = Day("late", "2026-12-02", 10)
LOAD_COMMITTED = Day("load-committed", "2026-11-28", 150, load_committed=True)
OVER_BUDGET = Day("over-budget", "2026-11-29", 150, dry_run_gb=260)
#: every kind of day, in the order the demo runs them (logical dates in the past:
#: Airflow holds a run whose logical date is still ahead)
DAYS = (ON_TIME, LOAD_COMMITTED, OVER_BUDGET, LATE)

COMMON = {
    "extract_positions": ("success", 1),
    "transform": ("success", 1),
    "load": ("failed", 1),  # not claimed safe to repeat: reconcile-effects
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
#: the deadline fits: report waits out its backoff, archive runs out of attempts
IN_TIME = {**COMMON, "report": ("success", 2), "archive": ("failed", 2)}
REPEATED = {"retry_load": ("success", 1), "validate_load": ("success", 1)}
NOT_REPEATED = {"retry_load": ("skipped", 0)}
DELIVERED = {"validate_load": ("success", 1), "communicate_impact": ("skipped", 0)}
LATE_NOTICE = {"validate_load": ("skipped", 0), "communicate_impact": ("success", 1)}
#: day kind -> task id -> (final state, try number)
FINAL_STATES = {
    "on-time": {**IN_TIME, **DELIVERED, **REPEATED},
    "load-committed": {**IN_TIME, **DELIVERED, **NOT_REPEATED},
    "over-budget": {**IN_TIME, **LATE_NOTICE, **NOT_REPEATED},
    "late": {
        **COMMON,
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
#: day kind -> task id -> the policy's decision at each failure
POLICY_DECISIONS = {
    "on-time": IN_TIME_DECISIONS,
    "load-committed": IN_TIME_DECISIONS,
    "over-budget": IN_TIME_DECISIONS,
    "late": {
        "report": ["deadline-infeasible"],
        "load": ["reconcile-effects"],
        "append": ["reconcile-remote"],
        "archive": ["deadline-infeasible"],
    },
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


def evidence(stack: AirflowStack, run_id: str) -> dict[str, list[dict[str, Any]]]:
    """task id -> the policy's recorded decisions, in order."""
    rows = stack.rows(
        "select task_id, value from task_state_store where dag_id=:d and run_id=:r "
        "and key='retry_window.evidence'",
        d=DAG_ID,
        r=run_id,
    )
    return {task: decoded(value)["decisions"] for task, value in rows}


def problems(stack: AirflowStack, run_id: str, day: Day) -> list[str]:
    """Everything about the run that differs from what the gate decided; [] when none."""
    found: list[str] = []
    states = stack.task_states(DAG_ID, run_id)
    for task, expected in FINAL_STATES[day.kind].items():
        if states.get(task) != expected:
            found.append(f"{task}: expected (state, try) {expected}, got {states.get(task)}")
    found += _policy_problems(evidence(stack, run_id), states, POLICY_DECISIONS[day.kind])
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
