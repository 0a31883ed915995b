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

    :param kind: ``"on-time"`` (the load's repeat fits) or ``"late"`` (nothing fits).
    :param business_date: the run's logical date.
    :param deadline: seconds from the trigger to the delivery deadline.
    """

    kind: str
    business_date: str
    deadline: int


ON_TIME = Day("on-time", "2026-12-01", 150)
LATE = Day("late", "2026-12-02", 10)

COMMON = {
    "extract_positions": ("success", 1),
    "transform": ("success", 1),
    "load": ("failed", 1),  # not claimed safe to repeat: reconcile-effects
    "reconcile_load": ("success", 1),
    "load_retry_window": ("success", 1),
    "append": ("failed", 1),  # OutcomeUnknown: reconcile-remote
    "monitor": ("success", 1),
    "observe_monitor": ("success", 1),
    "retry_gate": ("success", 1),
    "rerun_everything": ("skipped", 0),
}
#: task id -> (final state, try number)
FINAL_STATES = {
    "on-time": {
        **COMMON,
        "report": ("success", 2),  # waited out its backoff
        "archive": ("failed", 2),  # ran out of attempts
        "retry_load": ("success", 1),  # the sensor let the repeat through
        "communicate_impact": ("skipped", 0),
    },
    "late": {
        **COMMON,
        "report": ("failed", 1),  # deadline-infeasible
        "archive": ("failed", 1),  # deadline-infeasible
        "retry_load": ("skipped", 0),  # the sensor short-circuited the repeat
        "communicate_impact": ("success", 1),
    },
}
#: task id -> the policy's decision at each failure
POLICY_DECISIONS = {
    "on-time": {
        "report": ["wait-backoff"],
        "load": ["reconcile-effects"],
        "append": ["reconcile-remote"],
        "archive": ["wait-backoff", "attempts-exhausted"],
    },
    "late": {
        "report": ["deadline-infeasible"],
        "load": ["reconcile-effects"],
        "append": ["reconcile-remote"],
        "archive": ["deadline-infeasible"],
    },
}
SENSOR_DECISION = {"on-time": "retry-eligible", "late": "deadline-infeasible"}


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
    stack: AirflowStack, run_id: str, states: dict[str, tuple[str | None, int]], expected: str
) -> list[str]:
    record = xcom(stack, run_id, "load_retry_window")
    if not isinstance(record, dict) or not record.get("decisions"):
        return [f"load_retry_window published no decision record: {record!r}"]
    decision = record["decisions"][0]["decision"]
    found = [] if decision == expected else [f"sensor decided {decision}, expected {expected}"]
    ran = states["retry_load"][0] == "success"
    if ran != (decision == "retry-eligible"):
        found.append(f"retry_load is {states['retry_load']} after the sensor said {decision}")
    return found
