"""Decisions stored the way the provider stores them, made without an Airflow run.

Policy evidence is built by the model, the reason builder and ``evidence.record``
exactly as :class:`~airflow_retrywindow.RetryWindowPolicy` builds it; a gate's
record goes through the gate's own observe, decide and record stages.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pendulum

from airflow_retrywindow.gate.capacity import PoolState
from airflow_retrywindow.gate.decide import decide
from airflow_retrywindow.gate.instances import Instance
from airflow_retrywindow.gate.observe import observe_run
from airflow_retrywindow.gate.record import build
from airflow_retrywindow.gate.snapshot import RunSnapshot
from airflow_retrywindow.gate.targets import Target
from airflow_retrywindow.hooks.airflow_api import TaskInstanceRow
from airflow_retrywindow.model import evaluate
from airflow_retrywindow.policies import evidence
from airflow_retrywindow.timing.clock import Clock
from airflow_retrywindow.timing.reasons import reason
from airflow_retrywindow.timing.retry_settings import RetrySettings
from airflow_retrywindow.timing.work import Work

ORIGIN = pendulum.datetime(2026, 12, 1, 5, 0, tz="UTC")
POLICY = {"maxAttempts": 4, "initialDelay": 4, "maxDelay": 12, "multiplier": 2}
#: the Airflow task the model knows as ``load``
TASK_ID = "load_positions"

_BASE = {
    "id": "load",
    "state": "retryable",
    "safeRepeat": True,
    "attempts": 1,
    "observedAt": 99,
    "lastFinishedAt": 90,
    "duration": 20,
    "validation": 5,
}
#: decision -> how the task looks when the model answers it (asOf 100, deadline 140)
CASES: dict[str, dict[str, Any]] = {
    "refresh-observation": {"observedAt": 30, "lastFinishedAt": 20},
    "observe-running": {"state": "running", "lastFinishedAt": None},
    "reconcile-remote": {"state": "unknown", "lastFinishedAt": None},
    "validate-output": {"state": "succeeded"},
    "repair-cause": {"state": "terminal"},
    "attempts-exhausted": {"attempts": 4},
    "reconcile-effects": {"safeRepeat": False},
    "deadline-infeasible": {"duration": 40},
    "wait-backoff": {"attempts": 2, "lastFinishedAt": 95},
    "retry-eligible": {"lastFinishedAt": 80},
}
ALLOWING = frozenset({"wait-backoff", "retry-eligible"})


def policy_entry(decision: str, *, subject: str = "ConnectionError: no answer") -> dict[str, Any]:
    """The evidence the policy stores when the model answers ``decision`` for try 1."""
    task = {**_BASE, **CASES[decision]}
    payload = {
        "asOf": 100,
        "deadline": 140,
        "maxObservationAge": 10,
        "policy": POLICY,
        "tasks": [task],
    }
    result = evaluate(payload)
    assert result["tasks"][0]["decision"] == decision
    clock = Clock(origin=ORIGIN)
    text = reason(result["tasks"][0], task=task, payload=payload, clock=clock, subject=subject)
    return evidence.record(
        fixture=payload,
        origin=clock.iso(),
        result=result,
        task_ids={"load": TASK_ID},
        try_number=1,
        failure=task["state"] if task["state"] in ("unknown", "terminal") else "retryable",
        reason=text,
        action="retry" if decision in ALLOWING else "fail",
        extra={"deadline": "at 2026-12-01T05:02:20Z", "check": "retry-policy"},
    )


def gate_record(*, deadline_in: timedelta) -> dict[str, Any]:
    """A gate's record over ``load`` (5 min per attempt) and ``report`` (1 min), both failed."""
    now = pendulum.datetime(2026, 12, 1, 5, 40, tz="UTC")
    work = {
        "load": Work(
            duration=timedelta(minutes=4), validation=timedelta(minutes=1), safe_repeat=True
        ),
        "report": Work(duration=timedelta(seconds=30), validation=timedelta(0), safe_repeat=True),
    }
    targets = [
        Target(task_id, work[task_id], RetrySettings(task_id, 2, 60, 1, 60), False, "db", 1)
        for task_id in work
    ]
    start, end = now.subtract(minutes=3), now.subtract(minutes=2)
    rows = {
        Instance(task_id): TaskInstanceRow(task_id, -1, "failed", 1, 2, start, end, "db", 1, now)
        for task_id in work
    }
    snapshot = RunSnapshot(rows, pools={"db": PoolState("db", 2, 0, 0, 2, False)})
    table = decide(
        observe_run(targets, snapshot, {}), as_of=now, deadline=now + deadline_in,
        max_observation_age=60, origin=None, pools=snapshot.pools,
    )  # fmt: skip
    guard = [
        {"taskId": f"rerun_{task_id}", "targets": [task_id],
         "action": "run" if not table.blockers(task_id) else "skip",
         "blockers": table.blockers(task_id)}
        for task_id in work
    ]  # fmt: skip
    return build(
        table, requests=3, api="http://api:8080", gate="retry_gate", dag_id="positions",
        run_id="manual__2026-12-01", try_number=1, deadline_rule="rule",
        work_unit={"business_date": "2026-12-01"}, guard=guard,
    )  # fmt: skip
