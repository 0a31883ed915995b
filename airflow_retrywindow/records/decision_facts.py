"""Decision facts: one stored decision, read once, whatever shape stored it.

The view's rows (:mod:`~airflow_retrywindow.plugins.decision_rows`), the
notifier's notices (:mod:`~airflow_retrywindow.notifications.notice`) and
``explain`` (:mod:`~airflow_retrywindow.cli.explain`) each tell a stored decision
in their own words. The facts they tell are read here, from either shape:

* one entry of the policy's evidence (:mod:`~airflow_retrywindow.records.evidence_entry`):
  its try, check, action, failure and reason, the status read of a resumable job
  (:mod:`~airflow_retrywindow.records.reconciliation`), the flag of a try whose
  retry-start check did not run (:mod:`~airflow_retrywindow.records.start_check`),
  the pool's breaker it carries (:mod:`~airflow_retrywindow.records.breaker_state`),
  and its fixture replayed on its stored clock (:class:`ModelDecision`);
* one target of a gate's or a sensor's decision record
  (:mod:`~airflow_retrywindow.records.decision_record`): its decision, reason,
  attempts, status, pool capacity, where each estimate came from
  (:mod:`~airflow_retrywindow.records.estimate_source`), and, when asked, its
  fixture replayed.

What cannot be read is kept as a problem naming the field and the value, never
guessed at: each reader decides whether a problem is shown or refuses the whole
decision. Stored text passes through the reader's ``mask``. Nothing here
imports Airflow.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import pendulum

from airflow_retrywindow.exceptions import RecordError
from airflow_retrywindow.model.fixture import Fixture
from airflow_retrywindow.model.verdict import TaskDecision
from airflow_retrywindow.records.breaker_state import KEY as BREAKER
from airflow_retrywindow.records.breaker_state import BreakerState
from airflow_retrywindow.records.composition import composition_words
from airflow_retrywindow.records.decision_record import whole_number
from airflow_retrywindow.records.estimate_source import EstimateSource
from airflow_retrywindow.records.evidence_entry import GATE_ERROR, model_id_of, reconciliation_of
from airflow_retrywindow.records.reconciliation import RESCHEDULE, Reconciliation
from airflow_retrywindow.records.start_check import StartCheck, start_check_of
from airflow_retrywindow.records.stored_fixture import StoredFixture
from airflow_retrywindow.timing.clock import Clock
from airflow_retrywindow.timing.reasons import moment
from airflow_retrywindow.timing.status import status_update

#: who decides a decision kept in the policy's evidence
POLICY = "RetryWindowPolicy"
#: what reading a stored decision raises when it is not what the provider stores
#: (RecordError, InvalidFixture, ClockError and a bad ISO time are ValueErrors)
UNREADABLE = (ValueError, KeyError, TypeError)
#: how stored text is made safe for the reader that shows it
Mask = Callable[[str], str]


def as_stored(text: str) -> str:
    """Stored text as stored: for a reader that masks it when it writes it out."""
    return text


@dataclass(frozen=True)
class ModelDecision:
    """A stored fixture replayed, and the one task of it the decision is about.

    :param stored: the stored ``{origin, fixture, result}``, read and replayed.
    :param task: the model's decision for the task, as this release replays it.
    :param stored_decision: the decision the stored result holds for the task, as stored.
    """

    stored: StoredFixture
    task: TaskDecision
    stored_decision: str

    @classmethod
    def of(cls, stored: object, *, model_id: object) -> ModelDecision:
        """Read ``{origin, fixture, result}`` and replay the fixture (cached per fixture).

        :param stored: a policy decision or one of a record's fixtures.
        :param model_id: the task's id in the fixture; ``None`` for its only task.
        :raises ValueError: naming the field and the value that cannot be read.
        """
        found = StoredFixture.of(stored)
        task = found.task(model_id)
        return cls(found, task, str(found.stored_decision(task.id)))

    @property
    def fixture(self) -> Fixture:
        return self.stored.fixture

    @property
    def clock(self) -> Clock:
        return self.stored.clock

    @property
    def decided_at(self) -> pendulum.DateTime:
        return self.clock.at(self.fixture.as_of)

    @property
    def deadline(self) -> pendulum.DateTime:
        return self.clock.at(self.fixture.deadline)

    @property
    def attempts(self) -> int:
        """Attempts of the window used so far."""
        return self.fixture.task(self.task.id).attempts

    @property
    def start_at(self) -> pendulum.DateTime | None:
        """The model's earliest start of the next attempt, as a time."""
        at = self.task.earliest_start
        return None if at is None else self.clock.at(at)

    @property
    def finish_at(self) -> pendulum.DateTime | None:
        """When the next attempt would end, validation included, as a time."""
        at = self.task.estimated_finish
        return None if at is None else self.clock.at(at)

    def status(self, task_id: str) -> str:
        """The status update, under the Airflow task id rather than the model's."""
        show = partial(moment, self.clock, today=self.decided_at)
        text = status_update(self.task, self.fixture.task(self.task.id), self.fixture, clock=show)
        prefix = f"{self.task.id}:"
        return task_id + text[len(self.task.id) :] if text.startswith(prefix) else text

    def mismatch(self) -> str | None:
        """What is wrong when the stored result is not what the fixture gives today."""
        if self.stored.replays:
            return None
        return (
            "the stored result is not what the stored fixture gives today "
            f"(replayed: {self.task.decision.value}); the picture shows the replay"
        )


@dataclass(frozen=True)
class DecisionFacts:
    """The facts of one stored decision about one task.

    :param task_id: the task the decision is about.
    :param decided_by: ``RetryWindowPolicy`` or the gate's or sensor's task id.
    :param map_index: its map index (-1 when not mapped).
    :param try_number: the try it is about (the failed try, for the policy).
    :param decision: the decision as stored, ``gate-error`` when none was taken,
        ``unreadable`` when it cannot be read.
    :param reason: the one-line reason, as stored.
    :param action: the policy's stored action: retry, fail, default, run or reschedule.
    :param check: which check decided: ``retry-policy`` or ``retry-start`` (policy only).
    :param failure: how the failed attempt was classified.
    :param deadline_rule: how the deadline is defined, in words.
    :param decided_at: when it was decided.
    :param deadline: the deadline it was judged against.
    :param attempts: attempts of the window used so far.
    :param max_attempts: the attempt budget.
    :param start_at: for a try the retry-start check rescheduled, when it may start.
    :param status: the English status update, as a gate stored it.
    :param capacity: the pool capacity verdict, when a gate gave one.
    :param estimate: where each estimate value came from, when a gate or sensor stored it.
    :param job: the status read of a resumable job the decision was taken on.
    :param job_problem: what could not be read of a stored reconciliation; nothing
        is then said about the job.
    :param start_check: the retry-start check's state for the failed try, when stored.
    :param breaker: the pool's breaker, when the decision carries it.
    :param breaker_problem: what could not be read of the breaker it carries.
    :param composition: where the window sat among other retry policies and who
        classified the failure (:mod:`~airflow_retrywindow.records.composition`), in words.
    :param model: the stored fixture replayed, when the decision came from the model.
    :param fixture_index: for a gate's target, which of the record's fixtures is its.
    :param problems: what could not be read, each naming the field and the value.
    """

    task_id: str
    decided_by: str
    map_index: int = -1
    try_number: int | None = None
    decision: str = "unreadable"
    reason: str = ""
    action: str | None = None
    check: str | None = None
    failure: str | None = None
    deadline_rule: str | None = None
    decided_at: pendulum.DateTime | None = None
    deadline: pendulum.DateTime | None = None
    attempts: int | None = None
    max_attempts: int | None = None
    start_at: pendulum.DateTime | None = None
    status: str | None = None
    capacity: str | None = None
    estimate: EstimateSource | None = None
    job: Reconciliation | None = None
    job_problem: str | None = None
    start_check: StartCheck | None = None
    breaker: BreakerState | None = None
    breaker_problem: str | None = None
    composition: str | None = None
    model: ModelDecision | None = None
    fixture_index: int | None = None
    problems: tuple[str, ...] = field(default=())

    @property
    def problem(self) -> str | None:
        """Every problem in one line, the job's first, or ``None``."""
        return "; ".join(item for item in (self.job_problem, *self.problems) if item) or None

    # -- the policy's evidence ---------------------------------------------------------

    @classmethod
    def of_evidence(
        cls,
        entry: Mapping[str, Any],
        *,
        task_id: str,
        map_index: int = -1,
        mask: Mask = as_stored,
        strict: bool = False,
    ) -> DecisionFacts:
        """The facts of one decision of the policy (or of its retry-start check).

        :param entry: one evidence entry, of a shape this release reads.
        :param task_id: the task it was stored for.
        :param map_index: that task's map index.
        :param mask: makes each stored text safe for the reader.
        :param strict: raise when the stored fixture cannot be read or replayed,
            rather than keep it as a problem.
        :raises ValueError: when ``strict`` and the fixture cannot be read.
        """
        reason = mask(str(entry.get("reason", "")))
        facts = cls(
            task_id=task_id,
            decided_by=POLICY,
            map_index=map_index,
            try_number=whole_number(entry, "tryNumber"),
            decision=GATE_ERROR if reason.startswith(GATE_ERROR) else "unreadable",
            reason=reason,
            action=_optional(entry.get("action"), mask),
            check=_optional(entry.get("check"), mask),
            failure=_optional(entry.get("failure"), mask),
            deadline_rule=_optional(entry.get("deadline"), mask),
            composition=composition_words(entry, mask),
        )
        facts = facts._read(entry, mask)
        if "fixture" not in entry:  # the gate could not evaluate: there is nothing to replay
            return facts
        try:
            fixture = StoredFixture.of(entry).fixture
            model = ModelDecision.of(entry, model_id=model_id_of(entry, fixture, task_id))
        except UNREADABLE as error:  # stored with a fixture, so not a gate error either
            if strict:
                raise
            return replace(facts, decision="unreadable").with_problem(mask(str(error)))
        return replace(
            facts,
            decision=mask(model.stored_decision),
            decided_at=model.decided_at,
            deadline=model.deadline,
            attempts=model.attempts,
            max_attempts=model.fixture.policy.max_attempts,
            start_at=model.start_at if facts.action == RESCHEDULE else None,
            model=model,
        )

    def _read(self, entry: Mapping[str, Any], mask: Mask) -> DecisionFacts:
        """The parts of an entry each read on its own: one that fails is only a problem."""
        facts = self
        try:
            job = reconciliation_of(entry, mask=None if mask is as_stored else mask)
            facts = replace(facts, job=job)
        except RecordError as error:
            facts = replace(facts, job_problem=mask(str(error)))
        try:
            facts = replace(facts, start_check=start_check_of(entry))
        except RecordError as error:
            facts = facts.with_problem(mask(str(error)))
        return facts._with_breaker(entry, mask)

    def _with_breaker(self, entry: Mapping[str, Any], mask: Mask) -> DecisionFacts:
        """With the pool's breaker the entry carries (a gate target's), if any."""
        if BREAKER not in entry:
            return self
        found = BreakerState.of(entry[BREAKER])
        if found is None:
            shown = mask(str(entry[BREAKER])[:200])
            return replace(self, breaker_problem=f"{BREAKER} = {shown} is not a breaker's state")
        return replace(self, breaker=found)

    # -- a gate's or a sensor's decision record ------------------------------------------

    @classmethod
    def of_target(
        cls,
        row: Mapping[str, Any],
        *,
        decided_by: str,
        mask: Mask = as_stored,
        as_of: pendulum.DateTime | None = None,
        deadline: pendulum.DateTime | None = None,
        deadline_rule: str | None = None,
        strict: bool = False,
    ) -> DecisionFacts:
        """The facts of one target of a gate's or a sensor's decision record.

        :param row: one item of the record's ``decisions``.
        :param decided_by: the gate's or sensor's task id.
        :param mask: makes each stored text safe for the reader.
        :param as_of: when the gate decided (the record's ``asOf``).
        :param deadline: the record's deadline.
        :param deadline_rule: how the deadline is defined, in words.
        :param strict: raise when the estimate sources cannot be read, rather
            than keep it as a problem.
        :raises RecordError: when ``strict`` and the estimate sources cannot be read.
        """
        capacity = row.get("capacity")
        mapped = whole_number(row, "mapIndex")
        task_id = mask(str(row.get("taskId", "?")))
        facts = cls(
            task_id=task_id,
            decided_by=decided_by,
            map_index=-1 if mapped is None else mapped,
            decided_at=as_of,
            try_number=whole_number(row, "tryNumber"),
            decision=mask(str(row.get("decision", "unreadable"))),
            reason=mask(str(row.get("reason", ""))),
            deadline=deadline,
            deadline_rule=deadline_rule,
            attempts=whole_number(row, "attempts"),
            max_attempts=whole_number(row, "maxAttempts"),
            failure=_failure(row, mask),
            status=row["status"] if isinstance(row.get("status"), str) else None,
            capacity=(
                _optional(capacity.get("reason"), mask) if isinstance(capacity, Mapping) else None
            ),
        )
        facts = facts._with_breaker(row, mask)
        if "estimateSource" not in row:  # recorded before the record kept its sources
            return facts
        try:
            found = EstimateSource.of(row["estimateSource"], task_id=task_id, decided_by=decided_by)
        except RecordError as error:
            if strict:
                raise
            return facts.with_problem(mask(str(error)))
        return replace(facts, estimate=found)

    def replayed(self, row: Mapping[str, Any], fixtures: Sequence[object]) -> DecisionFacts:
        """The target's fixture among the record's ``fixtures``, replayed (``self`` if none).

        :raises ValueError: naming the field and the value that cannot be read.
        """
        index = row.get("fixture")
        if index is None:  # not attempted: the model was not asked
            return self
        if isinstance(index, bool) or not isinstance(index, int):
            raise RecordError("fixture", index, "must be the index of one of the record's fixtures")
        if not 0 <= index < len(fixtures):
            raise RecordError("fixture", index, f"has no fixture among {len(fixtures)}")
        model = ModelDecision.of(fixtures[index], model_id=row.get("modelId"))
        return replace(self, model=model, fixture_index=index)

    # -- what each reader asks ---------------------------------------------------------

    def with_problem(self, problem: str | None) -> DecisionFacts:
        """The same facts, with one more thing that could not be read."""
        return replace(self, problems=(*self.problems, problem)) if problem else self

    def start_check_warning(self) -> str | None:
        """For a failed try whose retry-start check did not run, why that matters."""
        if self.start_check is None:
            return None
        return self.start_check.warning("?" if self.try_number is None else self.try_number)


def _optional(value: object, mask: Mask) -> str | None:
    return None if value is None else mask(str(value))


def _failure(row: Mapping[str, Any], mask: Mask) -> str | None:
    """A target's Airflow state and how its failure was classified, in one line."""
    state, found = row.get("state"), row.get("classification")
    if state is None and found is None:
        return None
    return mask(f"{state}: {found}" if found else str(state))
