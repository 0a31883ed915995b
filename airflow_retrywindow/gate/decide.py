"""Decide: the model's answer for every observed task instance, with capacity and budget.

Every task instance is decided on its own: a target that is not mapped is one, a
mapped target one per map index, each under its own model id
(:func:`~airflow_retrywindow.gate.read.model_ids`). Facts are grouped by
retry policy into fixtures of at most
:data:`~airflow_retrywindow.model.bounds.MAX_TASKS` tasks, as many as needed
(1,000 map indexes make 50); each fixture is decided
by the typed model (:meth:`~airflow_retrywindow.model.Verdict.of`), which answers
exactly as ``airflow-retrywindow evaluate`` does, and its payload, result and
clock origin are kept for offline replay. Every task instance then gets its decision
with the numbers in real time, a one-line reason, an English status update, and
a pool capacity verdict. A repeat whose pool's breaker is open (its dependency down) is
``dependency-held`` instead of let run (:mod:`~airflow_retrywindow.gate.breaker_hold`),
and its row keeps the breaker as read. A resource budget, when given, is one
verdict for the whole gate.

Nothing here reads Airflow or the network: the table is a pure function of
what was observed, so it can be tested and replayed on its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pendulum

from airflow_retrywindow.gate.breaker_hold import BreakerHold
from airflow_retrywindow.gate.budget import Budget, BudgetVerdict
from airflow_retrywindow.gate.capacity import CapacityVerdict, assess
from airflow_retrywindow.gate.observe import Observed
from airflow_retrywindow.gate.read import model_ids
from airflow_retrywindow.labels import UNMAPPED, UTC_ISO, Instance, label
from airflow_retrywindow.model.bounds import MAX_TASKS
from airflow_retrywindow.model.decisions import NOT_ATTEMPTED, Decision, lets_run_now
from airflow_retrywindow.model.fixture import Fixture
from airflow_retrywindow.model.policy import Policy
from airflow_retrywindow.model.verdict import TaskDecision, Verdict
from airflow_retrywindow.records.breaker_state import KEY as BREAKER_KEY
from airflow_retrywindow.records.breaker_state import BreakerState
from airflow_retrywindow.records.stored_fixture import record_item
from airflow_retrywindow.timing.clock import Clock
from airflow_retrywindow.timing.fixtures import ClockedFixture, TaskFacts
from airflow_retrywindow.timing.reasons import MAX_REASON, moment, reason
from airflow_retrywindow.timing.retry_settings import RetrySettings
from airflow_retrywindow.timing.status import decision_fields, status_update
from airflow_retrywindow.verdicts import DEPENDENCY_HELD, Fields, verdict

if TYPE_CHECKING:
    from airflow_retrywindow.hooks.api_reader import PoolRow

#: decisions that let a guarded task run
WAIT_BACKOFF = Decision.WAIT_BACKOFF.value
#: held-back map indexes a target's blockers name one by one; the rest are counted
MAX_NAMED_BLOCKERS = 20


@dataclass(frozen=True)
class TargetDecision:
    """The gate's answer for one task instance of a target.

    :param task_id: the Airflow task id.
    :param decision: the model's decision, or ``not-attempted``.
    :param observed: what the gate knew about the target.
    :param reason: one line: the decision, then its numbers in real time.
    :param status: the English status update for the target.
    :param capacity: the pool capacity verdict for its next attempt.
    :param numbers: the model's numbers as real times (see :meth:`as_dict`).
    :param earliest_start: when the next attempt may start, if scheduled.
    :param fixture: the index of the fixture that decided it, if any.
    :param map_index: the task instance's map index, ``-1`` when not mapped.
    :param breaker: its pool's breaker as read, when the pool is a breaker and the task
        instance was tried (what a repeat would run into).
    """

    task_id: str
    decision: str
    observed: Observed
    reason: str
    status: str
    capacity: CapacityVerdict
    numbers: dict[str, Any]
    earliest_start: pendulum.DateTime | None
    fixture: int | None
    map_index: int = UNMAPPED
    breaker: BreakerState | None = None

    @property
    def allows(self) -> bool:
        """Whether the decision itself lets the task run (capacity and budget aside)."""
        return lets_run_now(self.decision)

    @property
    def label(self) -> str:
        """The task instance's name: ``load``, or ``load[3]`` for a map index."""
        return label(self.task_id, self.map_index)

    @property
    def waits(self) -> bool:
        """Whether only a wait with an end holds it, in a pool that can hold it: its
        backoff (``wait-backoff``) or its pool's open breaker (``dependency-held``)."""
        found = verdict(self.decision)
        return found is not None and found.waits and not self.capacity.blocks

    def blockers(self) -> list[str]:
        """Why this task instance may not run now (budget aside); empty when it may."""
        found = [] if self.allows else [self.reason]
        if self.capacity.blocks:
            found.append(self.capacity.reason)
        if self.map_index == UNMAPPED:
            return found
        return [f"{self.label}: {text}" for text in found]

    def as_dict(self) -> dict[str, Any]:
        """The task instance's row of the decision record, JSON-ready."""
        view = self.observed
        found = {
            "taskId": self.task_id,
            "mapIndex": self.map_index,
            "decision": self.decision,
            "reason": self.reason,
            "status": self.status,
            "state": view.state,
            "source": view.source,
            "classification": view.classification,
            "airflowState": view.airflow_state,
            "tryNumber": view.try_number,
            "safeRepeat": view.target.work.safe_repeat,
            **self.numbers,
            "capacity": self.capacity.as_dict(),
            "fixture": self.fixture,
        }
        if self.breaker is not None:
            found[BREAKER_KEY] = self.breaker.as_dict()
        return found


@dataclass(frozen=True)
class DecisionTable:
    """Every task instance's decision, the fixtures behind them, and the budget verdict.

    :param as_of: the moment of the decision.
    :param deadline: the delivery deadline.
    :param decisions: one per task instance: targets in order, map indexes rising.
    :param fixtures: the evaluated fixtures with their results and clock origins.
    :param budget: the budget verdict, ``None`` without a budget.
    """

    as_of: pendulum.DateTime
    deadline: pendulum.DateTime
    decisions: tuple[TargetDecision, ...]
    fixtures: tuple[dict[str, Any], ...]
    budget: BudgetVerdict | None

    def decision(self, task_id: str, map_index: int = UNMAPPED) -> TargetDecision:
        """The decision for one task instance: ``task_id``, at ``map_index`` if mapped."""
        for row in self.decisions:
            if row.task_id == task_id and row.map_index == map_index:
                return row
        raise KeyError(label(task_id, map_index))

    def rows_of(self, task_id: str) -> tuple[TargetDecision, ...]:
        """The decisions for every task instance of target ``task_id``, map indexes rising."""
        found = tuple(row for row in self.decisions if row.task_id == task_id)
        if not found:
            raise KeyError(task_id)
        return found

    def blockers(self, task_id: str) -> list[str]:
        """Why the target's next attempt may not run now; empty when it may.

        A target may run only when every one of its map indexes may. Held-back map
        indexes are named (``load[3]: ...``), the first
        :data:`MAX_NAMED_BLOCKERS` one by one and the rest counted; every one is
        in :attr:`decisions`.
        """
        held = [row for row in self.rows_of(task_id) if row.blockers()]
        found = [text for row in held[:MAX_NAMED_BLOCKERS] for text in row.blockers()]
        if len(held) > MAX_NAMED_BLOCKERS:
            found.append(
                f"and {len(held) - MAX_NAMED_BLOCKERS} more map indexes of {task_id} held "
                "back (every one is in the record's decisions)"
            )
        if self.budget is not None and self.budget.blocks:
            found.append(self.budget.reason)
        return found

    def longest_wait(self, task_id: str) -> TargetDecision | None:
        """The map index whose backoff ends last, when only backoffs hold the target back.

        ``None`` when the target may run now, or when something other than a
        backoff holds any of its map indexes (a refusal, a pool that can never
        hold it, an exceeded budget): then waiting would not let it run.
        """
        rows = self.rows_of(task_id)
        if any(row.blockers() and not row.waits for row in rows):
            return None
        if self.budget is not None and self.budget.blocks:
            return None
        waiting = [row for row in rows if row.waits and row.earliest_start is not None]
        if len(waiting) != sum(1 for row in rows if row.waits):
            return None  # a wait without its end: nothing to wait for
        return max(waiting, key=lambda row: row.earliest_start or self.as_of, default=None)

    def as_dict(self) -> dict[str, Any]:
        """The table as JSON-ready values."""
        return {
            "asOf": self.as_of.format(UTC_ISO),
            "deadline": self.deadline.format(UTC_ISO),
            "deadlinePassed": self.as_of > self.deadline,
            "decisions": [row.as_dict() for row in self.decisions],
            "budget": self.budget.as_dict() if self.budget else None,
            "fixtures": list(self.fixtures),
            "jobsExecuted": False,
            "idempotencyProven": False,
            "completionGuaranteed": False,
            "productionApproval": False,
        }


def decide(
    observed: Sequence[Observed],
    *,
    as_of: datetime,
    deadline: datetime,
    max_observation_age: int,
    origin: datetime | None,
    pools: Mapping[str, PoolRow],
    budget: Budget | None = None,
    breakers: Mapping[str, BreakerHold] | None = None,
) -> DecisionTable:
    """Decide every observed task instance and assemble the table.

    :param observed: the task instances as observed, in a stable order.
    :param as_of: the moment of the decision (after every observation).
    :param deadline: the delivery deadline.
    :param max_observation_age: the allowed age of an observation, in seconds.
    :param origin: the preferred clock origin (the data interval start).
    :param pools: the pools the targets use, as read; a missing pool is infeasible.
    :param budget: the resource budget, if any.
    :param breakers: the pools the targets use that are breakers, as read; a repeat in
        one that is open is held.
    :raises InvalidFixture: when the model refuses a fixture (nothing is decided).
    :raises TargetError: when two task instances would share a model id.
    """
    now = pendulum.instance(as_of).in_timezone("UTC")
    due = pendulum.instance(deadline).in_timezone("UTC")
    rows: dict[Instance, TargetDecision] = {}
    fixtures: list[dict[str, Any]] = []
    ids = model_ids(view.instance for view in observed)
    views = {ids[view.instance]: view for view in observed}
    for settings, facts in group_by_policy(observed, ids):
        fixture = ClockedFixture.build(
            as_of=now,
            deadline=due,
            max_observation_age=max_observation_age,
            settings=settings,
            tasks=facts,
            origin=origin,
        )
        typed = Fixture.from_dict(fixture.payload)
        verdict = Verdict.of(typed)
        index = len(fixtures)
        fixtures.append(
            record_item(
                origin=fixture.clock.iso(),
                fixture=fixture.payload,
                result=verdict.to_dict(),
                task_ids={found: views[found].target.task_id for found in fixture.task_ids},
                map_indexes={found: views[found].map_index for found in fixture.task_ids},
            )
        )
        for decision in verdict.tasks:
            view = views[decision.id]
            rows[view.instance] = _decided(
                view,
                decision,
                fixture=typed,
                clock=fixture.clock,
                index=index,
                pools=pools,
                breaker=(breakers or {}).get(view.pool),
            )
    decisions = tuple(
        rows[view.instance]
        if view.facts
        else _not_attempted(view, ids[view.instance], pools, (breakers or {}).get(view.pool))
        for view in observed
    )
    budget_verdict = budget.verdict() if budget is not None else None
    return DecisionTable(now, due, decisions, tuple(fixtures), budget_verdict)


def group_by_policy(
    observed: Sequence[Observed], ids: Mapping[Instance, str] | None = None
) -> list[tuple[RetrySettings, list[TaskFacts]]]:
    """Facts grouped by retry policy, in chunks the model accepts (at most ``MAX_TASKS``).

    Task instances never tried have no facts and stay out. Groups and chunks keep
    the order observed, so the same run always gives the same fixtures. Each
    fact's ``task_id`` is the instance's model id.

    :param observed: the task instances as observed.
    :param ids: task instance -> its model id (:func:`model_ids` of ``observed`` if not given).
    """
    if ids is None:
        ids = model_ids(view.instance for view in observed)
    groups: dict[Policy, tuple[RetrySettings, list[TaskFacts]]] = {}
    for view in observed:
        if view.facts is None:
            continue
        settings = view.target.settings
        known = replace(view.facts, task_id=ids[view.instance])
        groups.setdefault(settings.policy, (settings, []))[1].append(known)
    chunks: list[tuple[RetrySettings, list[TaskFacts]]] = []
    for settings, facts in groups.values():
        for start in range(0, len(facts), MAX_TASKS):
            chunks.append((settings, facts[start : start + MAX_TASKS]))
    return chunks


def _decided(
    view: Observed,
    decision: TaskDecision,
    *,
    fixture: Fixture,
    clock: Clock,
    index: int,
    pools: Mapping[str, PoolRow],
    breaker: BreakerHold | None = None,
) -> TargetDecision:
    """The task instance's row from the model's typed decision on the fixture ``index``."""
    observation = fixture.task(decision.id)
    today = clock.at(fixture.as_of)
    text = reason(decision, task=observation, fixture=fixture, clock=clock, subject=view.detail)
    status = status_update(
        decision, observation, fixture, clock=lambda seconds: moment(clock, seconds, today)
    )
    numbers = {
        "modelId": decision.id,
        "attempts": observation.attempts,
        "maxAttempts": fixture.policy.max_attempts,
        "observedAt": _iso(clock, observation.observed_at),
        "lastFinishedAt": _iso(clock, observation.last_finished_at),
        "backoffSeconds": decision.backoff,
        "earliestStart": _iso(clock, decision.earliest_start),
        "estimatedFinish": _iso(clock, decision.estimated_finish),
        "slackSeconds": decision.slack(fixture.deadline),
    }
    capacity = assess(view.pool, view.pool_slots, pools.get(view.pool), size=_size(breaker))
    start = decision.earliest_start
    row = TargetDecision(
        task_id=view.target.task_id,
        decision=decision.decision.value,
        observed=view,
        reason=text,
        status=_held(_with_name(status, decision.id, view.instance.label), capacity),
        capacity=capacity,
        numbers=numbers,
        earliest_start=None if start is None else clock.at(start),
        fixture=index,
        map_index=view.map_index,
    )
    if breaker is None:
        return row
    model = decision_fields(
        decision, observation, fixture, clock=lambda seconds: moment(clock, seconds, today)
    )
    return _on_breaker(row, breaker, model, today)


def _on_breaker(
    row: TargetDecision, breaker: BreakerHold, model: Fields, today: pendulum.DateTime
) -> TargetDecision:
    """``row`` with its pool's breaker as read, held while the breaker is open.

    :param model: the values the model decision's status words name.
    :param today: the decision's "now".
    """
    if not breaker.holds(row.decision):
        return replace(row, breaker=breaker.state)
    # spread by the task instance within the run: its targets' holds end apart
    until = breaker.hold_until(row.earliest_start, row.label, today)
    return replace(
        row,
        decision=DEPENDENCY_HELD,
        reason=breaker.reason(until, today),
        status=_held(breaker.status(row.label, model, until, today), row.capacity),
        earliest_start=until,
        breaker=breaker.state,
    )


def _size(breaker: BreakerHold | None) -> int | None:
    """The pool's own size when its breaker holds it below that, else ``None``."""
    return breaker.state.size if breaker is not None and breaker.state.holds else None


def _not_attempted(
    view: Observed, model_id: str, pools: Mapping[str, PoolRow], breaker: BreakerHold | None
) -> TargetDecision:
    task_id, name = view.target.task_id, view.instance.label
    text = (
        f"{NOT_ATTEMPTED}: {name} has no try in this run yet; a first run is not a retry, "
        "so the gate does not hold it back"
    )
    capacity = assess(view.pool, view.pool_slots, pools.get(view.pool), size=_size(breaker))
    status = _held(
        f"{name}: confirmed no attempt in this run; unknown: whether the first attempt "
        "succeeds; next: run it as scheduled; next evidence: the first attempt's result.",
        capacity,
    )
    numbers = {
        "modelId": model_id,
        "attempts": 0,
        "maxAttempts": view.target.settings.max_attempts,
        "observedAt": None,
        "lastFinishedAt": None,
        "backoffSeconds": None,
        "earliestStart": None,
        "estimatedFinish": None,
        "slackSeconds": None,
    }
    return TargetDecision(
        task_id=task_id,
        decision=NOT_ATTEMPTED,
        observed=view,
        reason=text[:MAX_REASON],
        status=status,
        capacity=capacity,
        numbers=numbers,
        earliest_start=None,
        fixture=None,
        map_index=view.map_index,
    )


def _held(status: str, capacity: CapacityVerdict) -> str:
    """The status, with the pool's refusal when the pool can never hold the task."""
    return f"{status} Held back by its pool: {capacity.reason}." if capacity.blocks else status


def _iso(clock: Clock, seconds: int | None) -> str | None:
    return None if seconds is None else clock.at(seconds).format(UTC_ISO)


def _with_name(status: str, model_id: str, name: str) -> str:
    """The status line under the task instance's name rather than its model id."""
    if model_id == name or not status.startswith(f"{model_id}:"):
        return status
    return f"{name}{status[len(model_id) :]}"
