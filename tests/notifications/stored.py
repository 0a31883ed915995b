"""Decisions stored the way the provider stores them, made without an Airflow run.

Policy evidence is built by the model, the reason builder and ``evidence.record``
exactly as :class:`~airflow_retrywindow.RetryWindowPolicy` builds it; a gate's
record goes through the gate's own observe, decide and record stages, and an
approval through the gate's own ``judge`` (``gate/approve.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pendulum

from airflow_retrywindow.gate.approve import Override, judge
from airflow_retrywindow.gate.decide import DecisionTable, decide
from airflow_retrywindow.gate.observe import observe_run
from airflow_retrywindow.gate.read import RunSnapshot
from airflow_retrywindow.gate.record import build
from airflow_retrywindow.gate.targets import Target
from airflow_retrywindow.hooks.api_reader import ApprovalRow, PoolRow, TaskInstanceRow
from airflow_retrywindow.labels import Instance
from airflow_retrywindow.model import Fixture
from airflow_retrywindow.model import decide as model_decide
from airflow_retrywindow.records import estimate_source as estimates
from airflow_retrywindow.records import evidence
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
    fixture = Fixture.from_dict(payload)
    verdict = model_decide(fixture)
    result = verdict.to_dict()
    assert result["tasks"][0]["decision"] == decision
    clock = Clock(origin=ORIGIN)
    text = reason(
        verdict.tasks[0], task=fixture.tasks[0], fixture=fixture, clock=clock, subject=subject
    )
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


NOW = pendulum.datetime(2026, 12, 1, 5, 40, tz="UTC")
#: the reason the DAG author gave with ``Work.override(safe_repeat=...)`` for ``load``
ESTIMATE_OVERRIDE = "INC-4211: the vendor confirmed the load replaces, not appends"
#: the approver's stated reason
APPROVAL_REASON = "vendor re-sent the feed (OPS-4411)"
#: where each value of the targets' estimates came from, as ``gate/targets.py`` names it
ESTIMATE_SOURCES = {
    "load": {"duration": estimates.POLICY, "validation": estimates.POLICY,
             "safeRepeat": estimates.OVERRIDE + ESTIMATE_OVERRIDE, "deadline": estimates.POLICY},
    "report": dict.fromkeys(("duration", "validation", "safeRepeat", "deadline"), estimates.AGREED),
}  # fmt: skip


def _table(deadline_in: timedelta, retries: Mapping[str, int]) -> DecisionTable:
    """``load`` (5 min per attempt) and ``report`` (30 s), both failed 2 minutes ago."""
    work = {
        "load": Work(
            duration=timedelta(minutes=4), validation=timedelta(minutes=1), safe_repeat=True
        ),
        "report": Work(duration=timedelta(seconds=30), validation=timedelta(0), safe_repeat=True),
    }
    targets = [
        Target(task_id, work[task_id], RetrySettings(task_id, retries[task_id], 60, 1, 60),
               False, "db", 1)
        for task_id in work
    ]  # fmt: skip
    start, end = NOW.subtract(minutes=3), NOW.subtract(minutes=2)
    rows = {
        Instance(task_id): TaskInstanceRow(
            task_id, -1, "failed", 1, retries[task_id], start, end, "db", 1, NOW
        )
        for task_id in work
    }
    snapshot = RunSnapshot(rows, pools={"db": PoolRow("db", 2, 0, 0, 2, False)})
    return decide(
        observe_run(targets, snapshot, {}), as_of=NOW, deadline=NOW + deadline_in,
        max_observation_age=60, origin=None, pools=snapshot.pools,
    )  # fmt: skip


def _guard(table: DecisionTable, override: Override | None) -> list[dict[str, Any]]:
    """The guard entries, as ``RetryWindowGateOperator.execute`` writes them."""
    guard = []
    for task_id in ("load", "report"):
        blockers = table.blockers(task_id)
        entry: dict[str, Any] = {
            "taskId": f"rerun_{task_id}", "targets": [task_id],
            "action": "skip" if blockers else "run", "blockers": blockers,
        }  # fmt: skip
        if blockers and override is not None and override.covers(table, [task_id]):
            entry.update(action="run", blockers=[], overridden=blockers)
            entry["override"] = override.wording
        guard.append(entry)
    return guard


def _record(
    table: DecisionTable,
    override: Override | None = None,
    estimate_sources: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    return build(
        table, requests=3, api="http://api:8080", gate="retry_gate", dag_id="positions",
        run_id="manual__2026-12-01", try_number=1, deadline_rule="rule",
        work_unit={"business_date": "2026-12-01"}, guard=_guard(table, override),
        estimate_sources=estimate_sources, override=override,
    )  # fmt: skip


def gate_record(*, deadline_in: timedelta) -> dict[str, Any]:
    """A gate's record over ``load`` (5 min per attempt) and ``report`` (1 min), both failed."""
    return _record(_table(deadline_in, {"load": 2, "report": 2}))


def approval(
    chosen: tuple[str, ...] = ("Approve",),
    *,
    user: str = "ops_lead",
    name: str | None = None,
    reason: str = APPROVAL_REASON,
) -> ApprovalRow:
    """The approval task's answer one minute after the refused tries ended."""
    return ApprovalRow(
        task_id="approve_repeat", map_index=-1, state="success", try_number=1,
        options=("Approve", "Reject"), chosen=chosen, user_id=user, user_name=name or user,
        responded_at=NOW.subtract(minutes=1), params_input={"reason": reason},
        asked_at=NOW.subtract(minutes=3), observed_at=NOW,
    )  # fmt: skip


def overridden_record(answer: ApprovalRow | None = None, *, late: bool = False) -> dict[str, Any]:
    """A gate's record with estimate sources and an approval task ``approve_repeat``.

    ``load`` was allowed one try, so the model refuses it ``attempts-exhausted``;
    ``report`` may retry. With ``late``, ``load`` has retries left but its next
    attempt ends after the deadline, due in 2 minutes: ``deadline-infeasible``.
    With ``answer`` an approval (the default), the gate's ``judge`` releases
    ``load`` and ``rerun_load`` runs on the override; with a rejection, nothing
    is released and ``rerun_load`` is held back.
    """
    if late:
        table = _table(timedelta(minutes=2), {"load": 2, "report": 2})
    else:
        table = _table(timedelta(hours=1), {"load": 0, "report": 2})
    override = judge(
        table, answer or approval(), approval="approve_repeat", allowed=["load"],
        previous_decision=None,
    )  # fmt: skip
    return _record(table, override, ESTIMATE_SOURCES)
