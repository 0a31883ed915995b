"""An approval overrides the model's refusal only when it is fresh, a person's and stated.

Pure: decision tables are built from task instance rows made by hand (observe ->
decide), answers are :class:`ApprovalRow` values; no Airflow, no server.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pendulum
import pytest

from airflow_retrywindow.breaker.settings import BreakerSettings
from airflow_retrywindow.gate.approve import (
    OVERRIDABLE,
    STANDING,
    Override,
    approvable,
    judge,
    may_approve,
    previous_decision,
    read_approval,
)
from airflow_retrywindow.gate.breaker_hold import BreakerHold
from airflow_retrywindow.gate.budget import Budget
from airflow_retrywindow.gate.decide import DecisionTable, decide
from airflow_retrywindow.gate.observe import observe
from airflow_retrywindow.gate.record import build
from airflow_retrywindow.gate.targets import Target
from airflow_retrywindow.hooks.api_reader import ApprovalRow, PoolRow, TaskInstanceRow
from airflow_retrywindow.model.decisions import Decision
from airflow_retrywindow.timing.retry_settings import RetrySettings
from airflow_retrywindow.timing.work import Work
from airflow_retrywindow.verdicts import DEPENDENCY_HELD
from tests.breaker.states import opened
from tests.gate.fake_reader import FakeReader

NOW = pendulum.datetime(2026, 3, 2, 5, 40, tz="UTC")
ENDED = NOW.subtract(minutes=30)  # the refused try's end
APPROVED = NOW.subtract(minutes=5)
DUE = NOW.add(hours=6)
WORK = Work(duration=timedelta(minutes=5), validation=timedelta(minutes=1), safe_repeat=True)
POOLS = {"db": PoolRow("db", 2, 0, 0, 2, False)}


def _target(task_id: str, *, retries: int = 0, gated: bool = False) -> Target:
    return Target(task_id, WORK, RetrySettings(task_id, retries, 60, 1, 60), gated, "db", 1)


def _row(
    task_id: str,
    state: str,
    *,
    map_index: int = -1,
    ended: pendulum.DateTime | None = ENDED,
    slots: int = 1,
    max_tries: int = 0,
) -> TaskInstanceRow:
    return TaskInstanceRow(
        task_id=task_id, map_index=map_index, state=state, try_number=1, max_tries=max_tries,
        start_date=ENDED.subtract(minutes=5), end_date=ended, pool="db", pool_slots=slots,
        observed_at=NOW,
    )  # fmt: skip


def _table(
    *rows: tuple[Target, TaskInstanceRow | None],
    deadline: pendulum.DateTime = DUE,
    budget: Budget | None = None,
) -> DecisionTable:
    observed = [
        observe(
            target, row, failure=None, failure_source="", map_index=row.map_index if row else -1
        )
        for target, row in rows
    ]
    return decide(
        observed, as_of=NOW, deadline=deadline, max_observation_age=3600, origin=None,
        pools=POOLS, budget=budget,
    )  # fmt: skip


def _exhausted(*task_ids: str) -> DecisionTable:
    """Every target refused ``attempts-exhausted``: one try of one allowed, failed."""
    return _table(*((_target(task_id), _row(task_id, "failed")) for task_id in task_ids))


def _answer(
    chosen: tuple[str, ...] = ("Approve",),
    *,
    user: str | None = "ops_lead",
    at: pendulum.DateTime | None = APPROVED,
    state: str | None = "success",
    form: dict[str, Any] | None = None,
) -> ApprovalRow:
    return ApprovalRow(
        task_id="approve_repeat", map_index=-1, state=state, try_number=1,
        options=("Approve", "Reject"), chosen=chosen if at else (), user_id=user,
        user_name=user, responded_at=at,
        params_input={"reason": "vendor confirmed the feed is fixed"} if form is None else form,
        asked_at=NOW.subtract(minutes=20), observed_at=NOW,
    )  # fmt: skip


def _judge(
    table: DecisionTable,
    answer: ApprovalRow | None,
    *,
    allowed: tuple[str, ...] = ("load",),
    previous: pendulum.DateTime | None = None,
) -> Override:
    return judge(
        table, answer, approval="approve_repeat", allowed=allowed, previous_decision=previous
    )


# -- what counts -----------------------------------------------------------------------


def test_a_fresh_approval_by_a_person_releases_the_refused_target_and_keeps_the_decision() -> None:
    table = _exhausted("load")
    override = _judge(table, _answer(), previous=ENDED.add(minutes=1))
    assert override.applied and override.released == ("load",)
    assert override.covers(table, ["load"])
    # the model's decision is not touched
    assert table.decision("load").decision == "attempts-exhausted"
    assert table.blockers("load")
    entry = override.as_dict()
    assert entry["approvedBy"] == {"id": "ops_lead", "name": "ops_lead"}
    assert entry["approvedAt"] == "2026-03-02T05:35:00Z"
    assert entry["reason"] == "vendor confirmed the feed is fixed"
    assert entry["targets"] == ["load"]
    assert entry["overridden"] == [{"task": "load", "decision": "attempts-exhausted"}]
    assert entry["status"] == "refused by the model, overridden by ops_lead"
    assert override.status_line() == (
        "Override: load attempts-exhausted: refused by the model, overridden by ops_lead at "
        "2026-03-02 05:35:00Z through approve_repeat; reason: vendor confirmed the feed is fixed."
    )


@pytest.mark.parametrize(
    ("answer", "note"),
    [
        (None, "approve_repeat has not asked in this run yet"),
        (_answer(at=None, state="awaiting_input"), "has not been answered yet (its state: "
         "awaiting_input)"),
        (_answer(("Reject",)), "ops_lead rejected at 2026-03-02 05:35:00Z"),
        # a response timeout: Airflow wrote the defaults, nobody answered
        (_answer(user=None), "nobody answered approve_repeat in time; Airflow chose its default "
         "['Approve']"),
        # cleared after the answer: the answer is still stored until the task runs again
        (_answer(state=None), "is not final: approve_repeat is cleared"),
        (_answer(state="scheduled"), "is not final: approve_repeat is scheduled"),
        (_answer(form={}), "without stating a reason (the form field 'reason')"),
        (_answer(form={"reason": "   "}), "without stating a reason"),
        (_answer(form={"reason": 42}), "without stating a reason"),
    ],
)  # fmt: skip
def test_anything_but_a_final_stated_approval_by_a_person_changes_nothing(
    answer: ApprovalRow | None, note: str
) -> None:
    table = _exhausted("load")
    override = _judge(table, answer)
    assert not override.applied
    assert not override.covers(table, ["load"])
    assert note in override.note
    entry = override.as_dict()
    assert entry["applied"] is False
    assert entry["approvedBy"] is None and entry["reason"] is None
    assert entry["status"].startswith("no override: ")
    assert override.status_line().startswith("No override through approve_repeat: ")
    assert "overridden by" not in override.status_line()


def test_an_approval_given_before_the_refused_try_ended_is_for_an_earlier_repeat() -> None:
    """A clear the next day: yesterday's approval came before today's failure."""
    table = _exhausted("load")
    override = _judge(table, _answer(at=ENDED.subtract(days=1)))
    assert not override.applied
    assert "before the latest try of load ended at 2026-03-02 05:10:00Z" in override.note
    assert "clear approve_repeat to ask again" in override.note
    # at the very same second is not after it either
    assert not _judge(table, _answer(at=ENDED)).applied


def test_one_approval_lets_one_repeat_through() -> None:
    """Approved before the gate's previous decision: that decision already used it."""
    table = _exhausted("load")
    override = _judge(table, _answer(), previous=NOW.subtract(minutes=1))
    assert not override.applied
    assert "before this gate's previous decision at 2026-03-02 05:39:00Z" in override.note


def test_an_approval_names_the_targets_it_releases_and_only_allowed_ones() -> None:
    table = _exhausted("load", "report")
    both = ("load", "report")
    named = _judge(table, _answer(form={"reason": "ok", "targets": ["report"]}), allowed=both)
    assert named.released == ("report",)
    assert named.covers(table, ["report"]) and not named.covers(table, ["load"])
    # a guarded task depending on both runs only when both are released
    assert not named.covers(table, ["load", "report"])
    assert _judge(table, _answer(), allowed=both).covers(table, ["load", "report"])
    one = _judge(table, _answer(form={"reason": "ok", "targets": "report"}), allowed=both)
    assert one.released == ("report",)
    # configured for load only: an answer naming report releases nothing
    wrong = _judge(table, _answer(form={"reason": "ok", "targets": ["report"]}))
    assert not wrong.applied
    assert "names 'report', which an approval of this gate may not release" in wrong.note
    empty = _judge(table, _answer(form={"reason": "ok", "targets": []}))
    assert "names no target" in empty.note and not empty.applied
    odd = _judge(table, _answer(form={"reason": "ok", "targets": {"load": 1}}))
    assert "must be a list of target ids" in odd.note and not odd.applied


@pytest.mark.parametrize("decision", sorted(OVERRIDABLE))
def test_each_overridable_refusal_is_released(decision: str) -> None:
    table = _refused_as(decision)
    assert table.decision("load").decision == decision
    assert _judge(table, _answer()).released == ("load",)


@pytest.mark.parametrize("decision", sorted(STANDING))
def test_the_standing_decisions_are_never_released(decision: str) -> None:
    table = _refused_as(decision)
    assert table.decision("load").decision == decision
    assert not approvable(table, ["load"], ["load"])
    override = _judge(table, _answer())
    assert not override.applied
    assert f"load: {decision} stands: {STANDING[decision]}" in override.note


def _refused_as(decision: str) -> DecisionTable:
    """A table in which ``load`` is decided ``decision``."""
    just_ended = NOW.subtract(seconds=10)
    cases: dict[str, tuple[Target, TaskInstanceRow, dict[str, Any]]] = {
        "attempts-exhausted": (_target("load"), _row("load", "failed"), {}),
        "deadline-infeasible": (
            _target("load", retries=2), _row("load", "failed", max_tries=2),
            {"deadline": NOW.add(minutes=2)},
        ),
        "reconcile-effects": (
            Target("load", replace(WORK, safe_repeat=False), RetrySettings("load", 2, 60, 1, 60),
                   False, "db", 1),
            _row("load", "failed", max_tries=2), {},
        ),
        "repair-cause": (_target("load"), _row("load", "failed"), {"terminal": True}),
        "validate-output": (_target("load"), _row("load", "success"), {}),
        "observe-running": (_target("load"), _row("load", "running", ended=None), {}),
        "reconcile-remote": (_target("load", gated=True), _row("load", "failed"), {}),
        "wait-backoff": (
            _target("load", retries=2), _row("load", "failed", ended=just_ended, max_tries=2), {},
        ),
    }  # fmt: skip
    if decision == DEPENDENCY_HELD:
        # the retry the model allows, in a pool whose breaker is open
        pool = BreakerHold(opened("db"), BreakerSettings())
        view = observe(
            _target("load", retries=2),
            _row("load", "failed", max_tries=2),
            failure=None,
            failure_source="",
        )
        return decide([view], as_of=NOW, deadline=DUE, max_observation_age=3600, origin=None,
                      pools=POOLS, breakers={"db": pool})  # fmt: skip
    if decision == Decision.REFRESH_OBSERVATION.value:
        # read at NOW, decided 5 minutes later with observations good for 1 minute
        view = observe(_target("load"), _row("load", "failed"), failure=None, failure_source="")
        return decide([view], as_of=NOW.add(minutes=5), deadline=NOW.add(hours=6),
                      max_observation_age=60, origin=None, pools=POOLS)  # fmt: skip
    target, row, extra = cases[decision]
    if extra.pop("terminal", False):
        view = observe(target, row, failure="terminal", failure_source="XCom")
        return decide([view], as_of=NOW, deadline=NOW.add(hours=6), max_observation_age=3600,
                      origin=None, pools=POOLS)  # fmt: skip
    return _table((target, row), **extra)


def test_an_approval_overrides_neither_capacity_nor_budget() -> None:
    crowded = _table((_target("load"), _row("load", "failed", slots=3)))
    assert crowded.decision("load").capacity.blocks
    assert not approvable(crowded, ["load"], ["load"])
    assert "held back by its pool" in _judge(crowded, _answer()).note
    over = _table((_target("load"), _row("load", "failed")), budget=Budget(10, 11, "GB"))
    assert not approvable(over, ["load"], ["load"])
    note = _judge(over, _answer()).note
    assert "the budget is exceeded" in note and "not a budget" in note


def test_a_mapped_target_is_released_only_when_every_refused_map_index_is() -> None:
    target = replace(_target("copy"), mapped=True)
    fresh = _row("copy", "failed", map_index=0)
    later = _row("copy", "failed", map_index=1, ended=NOW.subtract(minutes=2))
    done = _row("copy", "success", map_index=2)
    table = _table((target, fresh), (target, later), (target, done))
    assert [row.decision for row in table.rows_of("copy")] == [
        "attempts-exhausted", "attempts-exhausted", "validate-output",
    ]  # fmt: skip
    # approved after index 0 ended but before index 1 did
    override = _judge(table, _answer(at=NOW.subtract(minutes=5)), allowed=("copy",))
    assert not override.applied
    assert "before the latest try of copy[1] ended" in override.note
    after = _judge(table, _answer(at=NOW.subtract(minutes=1)), allowed=("copy",))
    assert after.released == ("copy",)
    assert [name for name, _ in after.overridden] == ["copy[0]", "copy[1]", "copy[2]"]


def test_approvable_asks_only_when_an_approval_could_let_the_work_run() -> None:
    table = _table(
        (_target("load"), _row("load", "failed")),
        (_target("fresh"), None),
        (_target("busy"), _row("busy", "running", ended=None)),
    )
    assert approvable(table, ["load"], ["load"])
    assert not approvable(table, ["load"], ["fresh"])  # not configured for load
    assert not approvable(table, ["fresh"], ["fresh"])  # nothing held back
    assert approvable(table, ["load", "fresh"], ["load"])
    assert not approvable(table, ["load", "busy"], ["load", "busy"])  # running stands


def test_the_reason_and_names_are_stored_masked_and_nothing_else_of_the_form() -> None:
    form = {
        "reason": "retry; creds were http://svc:hunter2@db.internal/x",
        "token": "should-not-be-stored",
    }
    override = _judge(_exhausted("load"), _answer(form=form))
    stored = json.dumps(override.as_dict())
    assert "hunter2" not in stored and "should-not-be-stored" not in stored
    assert override.reason.startswith("retry; creds were http://")
    long = _judge(_exhausted("load"), _answer(form={"reason": "x" * 2000}))
    assert len(long.reason) == 500


def test_may_approve_is_the_first_gate_of_judge() -> None:
    assert may_approve(_answer())
    for answer in (None, _answer(("Reject",)), _answer(user=None), _answer(state=None)):
        assert not may_approve(answer)


# -- the read --------------------------------------------------------------------------


class ApprovalReader(FakeReader):
    """The fake reader, with an approval task's answer."""

    def __init__(self, answer: ApprovalRow | None, gate_tries: list[TaskInstanceRow]) -> None:
        super().__init__([], tries={"gate": gate_tries})
        self.answer = answer

    def approval(
        self, dag_id: str, run_id: str, task_id: str, map_index: int = -1
    ) -> ApprovalRow | None:
        self._made("approval", task_id, map_index)
        return self.answer


def _gate_try(number: int, state: str, ended: pendulum.DateTime | None) -> TaskInstanceRow:
    return replace(_row("gate", state, ended=ended), try_number=number)


def test_the_read_asks_for_the_gate_tries_only_for_an_approval_on_a_later_try() -> None:
    tries = [
        _gate_try(1, "success", NOW.subtract(hours=2)),
        _gate_try(2, "success", NOW.subtract(minutes=20)),
        _gate_try(3, "failed", NOW.subtract(minutes=2)),  # failed: decided nothing
        _gate_try(4, "running", None),
    ]
    reader = ApprovalReader(_answer(), tries)
    found = read_approval(reader, "dag", "run", "approve_repeat", gate="gate", gate_try=4)
    assert [call[0] for call in reader.calls] == ["approval", "task_tries"]
    assert found.previous_decision == NOW.subtract(minutes=20)
    assert found.requests == 1 + 2  # the token, the answer, the tries
    rejected = ApprovalReader(_answer(("Reject",)), tries)
    assert read_approval(rejected, "dag", "run", "approve_repeat", gate="gate", gate_try=4) == (
        replace(found, answer=rejected.answer, previous_decision=None, requests=2)
    )
    first = ApprovalReader(_answer(), tries)
    read_approval(first, "dag", "run", "approve_repeat", gate="gate", gate_try=1)
    assert [call[0] for call in first.calls] == ["approval"]


def test_the_previous_decision_is_the_latest_earlier_success() -> None:
    assert previous_decision([], 1) is None
    assert previous_decision([_gate_try(1, "failed", ENDED)], 2) is None
    no_end = _gate_try(1, "success", None)
    assert previous_decision([no_end], 2) == NOW  # taken as late as possible


# -- the record ------------------------------------------------------------------------


def _record(table: DecisionTable, override: Override, guard: list[dict[str, Any]]) -> Any:
    return build(
        table, requests=5, api="http://api:8080", gate="gate", dag_id="dag", run_id="run",
        try_number=3, deadline_rule="6 h after the data interval", work_unit=None,
        guard=guard, skipped=[], override=override,
    )  # fmt: skip


def test_the_record_says_refused_by_the_model_overridden_by_the_user_never_eligible() -> None:
    table = _exhausted("load")
    override = _judge(table, _answer())
    guard = [
        {"taskId": "load", "targets": ["load"], "action": "run", "blockers": [],
         "overridden": table.blockers("load"), "override": override.wording},
    ]  # fmt: skip
    record = _record(table, override, guard)
    assert record["decisions"][0]["decision"] == "attempts-exhausted"
    assert record["override"]["approvedBy"]["name"] == "ops_lead"
    status = record["statusUpdate"]
    assert (
        "May run: load (refused by the model, overridden by ops_lead). Held back: none." in status
    )
    assert "reason: vendor confirmed the feed is fixed" in status
    assert "eligible" not in status.lower()
    assert "eligible" not in json.dumps(record["override"]).lower()


def test_the_record_says_why_there_is_no_override() -> None:
    table = _exhausted("load")
    override = _judge(table, _answer(("Reject",)))
    guard = [{"taskId": "load", "targets": ["load"], "action": "skip",
              "blockers": table.blockers("load")}]  # fmt: skip
    record = _record(table, override, guard)
    assert record["override"]["applied"] is False
    assert "Held back: load." in record["statusUpdate"]
    assert "No override through approve_repeat: ops_lead rejected at" in record["statusUpdate"]
    assert "overridden" not in record["statusUpdate"]
