"""Decision rows: what the policy, the gate and the sensor stored, as the view shows it.

Two kinds of stored value become rows here:

* the policy's evidence (:mod:`~airflow_retrywindow.records.evidence`): the
  decision history kept in the task state store, or the latest decision kept in
  XCom when the store holds nothing, with the status read of a resumable job
  where one was reconciled (:mod:`~airflow_retrywindow.records.reconciliation`);
* a gate's or a sensor's decision record (:mod:`~airflow_retrywindow.gate.record`),
  their ``return_value`` XCom, with where each estimate came from
  (:mod:`~airflow_retrywindow.records.estimate_source`) and a gate's approved
  override (:mod:`~airflow_retrywindow.records.override`): the model's
  decision stays as it was taken, and the override is shown beside it.

The facts of each stored decision are read by
:class:`~airflow_retrywindow.records.decision_facts.DecisionFacts`, the same
read-model the notifier and ``explain`` format; a row is the view's formatting of
them. Every decision a page shows that came from the model is
replayed from its stored fixture (:mod:`~airflow_retrywindow.records.stored_fixture`,
which keeps the replays): the timeline is drawn from the replay, and a stored
result that the fixture does not reproduce is flagged. Stored values are read
defensively: anything that cannot be read becomes a row that says which field
and which value, never an error page and never a guess. Every text shown passes
through :func:`~airflow_retrywindow.redaction.safe_text`.

Nothing here imports Airflow.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pendulum

from airflow_retrywindow.exceptions import RecordError
from airflow_retrywindow.labels import VIEW_SHOWN, label
from airflow_retrywindow.plugins.timeline import Timeline, timeline
from airflow_retrywindow.records.decision_facts import (
    POLICY,
    UNREADABLE,
    DecisionFacts,
    ModelDecision,
)
from airflow_retrywindow.records.decision_record import (
    GuardEntry,
    guard_entries,
    instant,
    record_kind,
    whole_number,
)
from airflow_retrywindow.records.decision_record import (
    is_decision_record as is_decision_record,  # noqa: PLC0414  (read from here before)
)
from airflow_retrywindow.records.evidence_entry import evidence_entries
from airflow_retrywindow.records.override import OverrideEntry
from airflow_retrywindow.records.reconciliation import Reconciliation, action_words
from airflow_retrywindow.records.schema import version_problem
from airflow_retrywindow.records.stored_fixture import stored_decision
from airflow_retrywindow.redaction import safe_text

#: the longest stored text the view shows in one field
MAX_SHOWN = 20_000
#: fixture names in download addresses: the policy's n-th stored decision, a record's n-th fixture
FIXTURE_NAME = re.compile(r"(?P<kind>policy|record)-(?P<index>[0-9]{1,4})")
_FILE_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Replay:
    """How to replay one decision offline.

    :param owner: the task whose stored value holds the fixture.
    :param map_index: that task's map index.
    :param name: the fixture's name in the view's download address, e.g. ``policy-0``.
    :param filename: the file name the fixture downloads as.
    :param origin: the fixture clock's origin, ISO 8601 UTC.
    :param fixture: the fixture exactly as the model evaluated it.
    :param result: the result stored with it.
    :param replays: whether evaluating the fixture again gives the stored result.
    """

    owner: str
    map_index: int
    name: str
    filename: str
    origin: str
    fixture: Mapping[str, Any]
    result: Mapping[str, Any]
    replays: bool

    def commands(self) -> tuple[str, str]:
        """The two commands that replay it: the explained table, then the model's exact output."""
        return (
            f"airflow-retrywindow explain --origin {self.origin} {self.filename}",
            f"airflow-retrywindow evaluate {self.filename}",
        )


@dataclass(frozen=True)
class DecisionRow:
    """One decision about one task, as the view shows it.

    :param task_id: the task the decision is about.
    :param map_index: its map index (-1 when not mapped).
    :param decided_by: ``RetryWindowPolicy`` or the gate's or sensor's task id.
    :param decided_at: when it was decided.
    :param try_number: the try it is about (the failed try, for the policy).
    :param decision: the model's decision, ``not-attempted``, ``gate-error`` or ``unreadable``.
    :param reason: the one-line reason, as stored.
    :param deadline: the deadline it was judged against.
    :param deadline_rule: how the deadline is defined, in words.
    :param attempts: attempts of the window used so far.
    :param max_attempts: the attempt budget.
    :param failure: how the failed attempt was classified.
    :param told: what Airflow was told (policy, in words for a try start or a
        reconciled job) or the gate's action.
    :param check: which check decided: ``retry-policy`` or ``retry-start`` (policy only).
    :param action: the policy's stored action: retry, fail, default, run or reschedule.
    :param start_at: for a try the retry-start check rescheduled, when it may start.
    :param reconciliation: the status read of a resumable job the decision was taken on.
    :param start_check: for a failed try whose retry-start check did not run, why that
        matters (:mod:`~airflow_retrywindow.records.start_check`); ``None`` otherwise.
    :param composition: which policy of a chain decided, after what the earlier ones
        said, and what a classifier made of the failure
        (:mod:`~airflow_retrywindow.records.composition`); ``None`` for a bare window.
    :param work_unit: the unit of work, in words.
    :param status: the English status update.
    :param capacity: the pool capacity verdict, when a gate gave one.
    :param timeline: the picture, when the decision came from the model.
    :param replay: how to replay it, when it came from the model.
    :param problem: what could not be read, naming the field and the value.
    :param estimate: where each estimate value came from, in one line, when a
        gate or sensor stored it.
    :param override: for a refusal an approval overrode, who, when and why
        (:func:`override_sentence`); the decision above stays the model's.
    """

    task_id: str
    decided_by: str
    map_index: int = -1
    decided_at: pendulum.DateTime | None = None
    try_number: int | None = None
    decision: str = "unreadable"
    reason: str = ""
    deadline: pendulum.DateTime | None = None
    deadline_rule: str | None = None
    attempts: int | None = None
    max_attempts: int | None = None
    failure: str | None = None
    told: str | None = None
    check: str | None = None
    work_unit: str | None = None
    status: str | None = None
    capacity: str | None = None
    timeline: Timeline | None = None
    replay: Replay | None = None
    problem: str | None = None
    estimate: str | None = None
    override: str | None = None
    action: str | None = None
    start_at: pendulum.DateTime | None = None
    reconciliation: Reconciliation | None = None
    start_check: str | None = None
    composition: str | None = None


@dataclass(frozen=True)
class GateRecord:
    """One evaluation of a gate or a sensor, with a row per target.

    :param task_id: the gate's or sensor's task id.
    :param map_index: its map index.
    :param kind: ``gate`` or ``sensor``.
    :param try_number: the deciding task's try.
    :param as_of: when it decided.
    :param deadline: the deadline.
    :param deadline_rule: how the deadline is defined, in words.
    :param work_unit: the unit of work, in words.
    :param status_update: the English update for the people on the incident.
    :param budget: the budget verdict, if the gate has a budget.
    :param guard: per guarded task, what may run and what is held back.
    :param rows: one per target.
    :param problem: what could not be read, naming the field and the value.
    :param override: the gate's ``override`` entry, when it has an approval task.
    :param total_rows: how many targets the record holds, when only some have
        rows (:func:`gate_record`'s ``window``); ``None`` when every target has one.
    :param first_row: the position of the first row among the record's targets.
    :param counts: per stored decision, how many of the record's targets have it.
    """

    task_id: str
    map_index: int
    kind: str
    try_number: int | None
    as_of: pendulum.DateTime | None
    deadline: pendulum.DateTime | None
    deadline_rule: str | None
    work_unit: str | None
    status_update: str | None
    budget: str | None
    guard: tuple[str, ...]
    rows: tuple[DecisionRow, ...] = field(default=())
    problem: str | None = None
    override: OverrideEntry | None = None
    total_rows: int | None = None
    first_row: int = 0
    counts: tuple[tuple[str, int], ...] = ()


def shown(value: object) -> str:
    """Stored text as it may be shown: secrets masked, URL credentials removed, bounded."""
    return safe_text(str(value), limit=MAX_SHOWN)


def fixture_filename(owner: str, map_index: int, suffix: str) -> str:
    """A file name for a downloaded fixture, e.g. ``report-try-1.json``.

    :param owner: the task whose stored value holds the fixture.
    :param map_index: its map index (-1 when not mapped).
    :param suffix: what tells the fixture apart, e.g. ``try-1``.
    """
    mapped = f"-map-{map_index}" if map_index >= 0 else ""
    return _FILE_UNSAFE.sub("_", f"{owner}{mapped}-{suffix}") + ".json"


# -- the policy's evidence -----------------------------------------------------------


def policy_entries(stored: object) -> list[object]:
    """The decisions in a stored evidence value, oldest first (see :func:`.evidence_entries`)."""
    return evidence_entries(stored)


def policy_rows(task_id: str, map_index: int, stored: object) -> list[DecisionRow]:
    """The policy's decisions for one task instance, oldest first.

    :param task_id: the task instance's task id.
    :param map_index: its map index.
    :param stored: the stored evidence (see :func:`policy_entries`).
    """
    entries = policy_entries(stored)
    if not entries:
        problem = f"the stored evidence holds no decisions list, got {_described(stored)}"
        return [DecisionRow(task_id, "RetryWindowPolicy", map_index=map_index, problem=problem)]
    return [policy_row(task_id, map_index, entry, index) for index, entry in enumerate(entries)]


def policy_row(
    task_id: str, map_index: int, entry: object, index: int, *, detailed: bool = True
) -> DecisionRow:
    """One decision of the policy.

    :param task_id: the task instance's task id.
    :param map_index: its map index.
    :param entry: the stored decision.
    :param index: its position in the stored history (its fixture's download name).
    :param detailed: whether to draw its timeline and write its status update (a
        summary table shows neither; the stored result is still checked by a replay).
    """
    by = POLICY
    if not isinstance(entry, Mapping):
        problem = f"decisions[{index}] is {_described(entry)}"
        return DecisionRow(task_id, by, map_index=map_index, problem=problem)
    unreadable = version_problem(entry)
    if unreadable:
        problem = f"decisions[{index}] is not a shape of record this release reads: {unreadable}"
        return DecisionRow(task_id, by, map_index=map_index, problem=problem)
    facts = DecisionFacts.of_evidence(entry, task_id=task_id, map_index=map_index, mask=shown)
    row = _row(facts)
    model = facts.model
    if model is None:  # the gate could not evaluate, or its fixture cannot be read
        return row
    suffix = f"try-{facts.try_number}" if facts.try_number is not None else f"decision-{index}"
    try:
        return replace(
            row,
            status=shown(model.status(task_id)) if detailed else None,
            timeline=_timeline(model) if detailed else None,
            replay=_replay(model, task_id, map_index, f"policy-{index}", suffix),
            problem=_joined(row.problem, model.mismatch()),
        )
    except UNREADABLE as error:
        return replace(row, decision="unreadable", problem=_joined(row.problem, shown(error)))


def _row(facts: DecisionFacts) -> DecisionRow:
    """The row of a stored decision's facts, before its picture and replay."""
    return DecisionRow(
        task_id=facts.task_id,
        decided_by=facts.decided_by,
        map_index=facts.map_index,
        decided_at=facts.decided_at,
        try_number=facts.try_number,
        decision=facts.decision,
        reason=facts.reason,
        deadline=facts.deadline,
        deadline_rule=facts.deadline_rule,
        attempts=facts.attempts,
        max_attempts=facts.max_attempts,
        failure=facts.failure,
        told=_told(facts.action, facts.job, facts.start_at),
        check=facts.check,
        status=_optional_text(facts.status),
        capacity=facts.capacity,
        estimate=facts.estimate.line() if facts.estimate else None,
        problem=facts.problem,
        action=facts.action,
        start_at=facts.start_at,
        reconciliation=facts.job,
        start_check=_optional_text(facts.start_check_warning()),
        composition=facts.composition,
    )


def stored_policy_decision(entry: object) -> str:
    """A policy decision as its entry stores it, read without replaying anything.

    ``unreadable`` for an entry this release cannot read, ``gate-error`` for one
    taken without the model; the rows a page shows are replayed and flag a
    stored result the fixture no longer gives. The text is as stored: pass it
    through :func:`decision_counts` or :func:`shown` before showing it.
    """
    if not isinstance(entry, Mapping) or version_problem(entry):
        return "unreadable"
    if "fixture" not in entry:
        return (
            "gate-error" if str(entry.get("reason", "")).startswith("gate-error") else "unreadable"
        )
    payload = entry.get("fixture")
    tasks = payload.get("tasks") if isinstance(payload, Mapping) else None
    first = tasks[0] if isinstance(tasks, list) and tasks else None
    model_id = first.get("id") if isinstance(first, Mapping) else None
    if not isinstance(model_id, str):
        return "unreadable"
    try:
        return str(stored_decision(entry.get("result"), model_id))
    except RecordError:
        return "unreadable"


def _told(
    action: str | None, job: Reconciliation | None, start_at: pendulum.DateTime | None
) -> str | None:
    """The stored action in words, with when a rescheduled try may start."""
    if action is None:
        return None
    return action_words(action, job, start_at=formatted(start_at) if start_at else None)


# -- a gate's or a sensor's decision record -----------------------------------------------


def gate_record(
    task_id: str, map_index: int, record: Mapping[str, Any], *, window: range | None = None
) -> GateRecord:
    """The record of one gate or sensor evaluation, with a row per target.

    :param task_id: the gate's or sensor's task id.
    :param map_index: its map index.
    :param record: its ``return_value`` XCom (see :func:`is_decision_record`).
    :param window: the positions of the targets to read into rows (and replay);
        ``None`` for every target. The others are only counted, by stored decision.
    """
    kind = record_kind(record)
    unreadable = version_problem(record)
    if unreadable:
        return GateRecord(
            task_id, map_index, kind, None, None, None, None, None, None, None, (),
            problem=f"not a shape of record this release reads: {unreadable}",
        )  # fmt: skip
    problems: list[str] = []
    as_of = _instant(record, "asOf", problems)
    deadline = _instant(record, "deadline", problems)
    work_unit = _work_unit(record.get("workUnit"))
    fixtures = record.get("fixtures")
    decisions = record.get("decisions")
    if not isinstance(decisions, list):
        problems.append(f"decisions must be a list, got {_described(decisions)}")
        decisions = []
    override = _override(record, problems)
    guard = guard_entries(record)
    chosen = decisions if window is None else decisions[window.start : window.stop]
    rows = tuple(
        _with_override(
            _target_row(
                task_id,
                map_index,
                row,
                fixtures if isinstance(fixtures, list) else [],
                as_of=as_of,
                deadline=deadline,
                deadline_rule=_optional_text(record.get("deadlineRule")),
                work_unit=work_unit,
                told=_guard_action(guard, row),
            ),
            override,
        )
        for row in chosen
    )
    budget = record.get("budget")
    return GateRecord(
        task_id=task_id,
        map_index=map_index,
        kind=kind,
        try_number=whole_number(record, "tryNumber"),
        as_of=as_of,
        deadline=deadline,
        deadline_rule=_optional_text(record.get("deadlineRule")),
        work_unit=work_unit,
        status_update=_optional_text(record.get("statusUpdate")),
        budget=_optional_text(budget.get("reason")) if isinstance(budget, Mapping) else None,
        guard=tuple(_guard_lines(record)),
        rows=rows,
        problem="; ".join(problems) or None,
        override=override,
        total_rows=None if window is None else len(decisions),
        first_row=0 if window is None else min(window.start, len(decisions)),
        counts=decision_counts(_stored_target_decision(row) for row in decisions),
    )


def decision_counts(decisions: Iterable[str]) -> tuple[tuple[str, int], ...]:
    """How many of each decision, the most frequent first (then by name).

    :param decisions: decisions as stored; each distinct one is made safe to show once.
    """
    counted: Counter[str] = Counter()
    for decision, count in Counter(decisions).items():
        counted[shown(decision)] += count
    return tuple(sorted(counted.items(), key=lambda item: (-item[1], item[0])))


def _stored_target_decision(row: object) -> str:
    """A target's decision as its record stores it, read without replaying anything."""
    if not isinstance(row, Mapping):
        return "unreadable"
    return str(row.get("decision", "unreadable"))


def override_sentence(entry: OverrideEntry) -> str:
    """The override as the view states it, beside the model's unchanged decision.

    ``Refused by the model, overridden by <user> at <time>: <reason> (targets ...)``,
    or ``No override through <approval task>: <why>.``
    """
    if not entry.applied:
        return f"No override through {entry.approval}: {entry.note or 'no reason was stored'}."
    return (
        f"Refused by the model, overridden by {entry.approver} at "
        f"{formatted(entry.approved_at)}: {entry.reason} (targets {', '.join(entry.targets)})"
    )


def stored_fixture(
    name: str, *, task_id: str, map_index: int, evidence: object, record: object
) -> tuple[str, Mapping[str, Any]] | None:
    """The fixture the view calls ``name``, exactly as stored, and the file name it downloads as.

    :param name: ``policy-<n>`` (the policy's n-th stored decision) or ``record-<n>``
        (the decision record's n-th fixture), as in :attr:`Replay.name`.
    :param task_id: the task instance whose stored values hold it.
    :param map_index: its map index.
    :param evidence: the task instance's stored policy evidence, if any.
    :param record: its decision record, if any.
    :raises RecordError: if ``name`` is not a fixture name.
    """
    matched = FIXTURE_NAME.fullmatch(name)
    if matched is None:
        raise RecordError("fixture name", name, "must be policy-<n> or record-<n>")
    index = int(matched["index"])
    if matched["kind"] == "policy":
        entries = policy_entries(evidence)
        entry = entries[index] if index < len(entries) else None
        found = entry.get("fixture") if isinstance(entry, Mapping) else None
        try_number = whole_number(entry, "tryNumber") if isinstance(entry, Mapping) else None
        suffix = f"try-{try_number}" if try_number is not None else f"decision-{index}"
    else:
        fixtures = record.get("fixtures") if isinstance(record, Mapping) else None
        item = fixtures[index] if isinstance(fixtures, list) and index < len(fixtures) else None
        found = item.get("fixture") if isinstance(item, Mapping) else None
        suffix = f"fixture-{index}"
    if not isinstance(found, Mapping):
        return None
    return fixture_filename(task_id, map_index, suffix), found


def _target_row(
    gate: str,
    map_index: int,
    row: object,
    fixtures: Sequence[object],
    *,
    as_of: pendulum.DateTime | None,
    deadline: pendulum.DateTime | None,
    deadline_rule: str | None,
    work_unit: str | None,
    told: str | None,
) -> DecisionRow:
    if not isinstance(row, Mapping):
        return DecisionRow("?", gate, problem=f"a decision is {_described(row)}")
    facts = DecisionFacts.of_target(
        row, decided_by=gate, mask=shown, as_of=as_of, deadline=deadline,
        deadline_rule=deadline_rule,
    )  # fmt: skip
    base = replace(_row(facts), told=told, work_unit=work_unit)
    try:
        facts = facts.replayed(row, fixtures)
        model = facts.model
        if model is None:  # not attempted: the model was not asked
            return base
        name, suffix = f"record-{facts.fixture_index}", f"fixture-{facts.fixture_index}"
        replay = _replay(model, gate, map_index, name, suffix)
        drawn = _timeline(model)
    except UNREADABLE as error:
        return replace(base, problem=_joined(base.problem, shown(error)))
    mismatch = model.mismatch()
    stored = shown(model.stored_decision)
    if mismatch is None and stored != base.decision:
        mismatch = f"the record says {base.decision} but its fixture decides {stored}"
    return replace(base, timeline=drawn, replay=replay, problem=_joined(base.problem, mismatch))


def _override(record: Mapping[str, Any], problems: list[str]) -> OverrideEntry | None:
    """The record's override entry; one that cannot be read is a problem, never an override."""
    if "override" not in record:
        return None
    try:
        return OverrideEntry.of(record["override"])
    except RecordError as error:
        problems.append(shown(error))
        return None


def _with_override(row: DecisionRow, override: OverrideEntry | None) -> DecisionRow:
    """The row, with the override beside its decision when an approval overrode it."""
    if override is None or not override.applied:
        return row
    if label(row.task_id, row.map_index) not in override.refused_names():
        return row
    return replace(row, override=override_sentence(override))


def _joined(*problems: str | None) -> str | None:
    return "; ".join(problem for problem in problems if problem) or None


def _replay(model: ModelDecision, owner: str, map_index: int, name: str, suffix: str) -> Replay:
    """How to replay a decision of the model offline, from the task that stored it."""
    return Replay(
        owner=owner,
        map_index=map_index,
        name=name,
        filename=fixture_filename(owner, map_index, suffix),
        origin=model.clock.iso(),
        fixture=model.stored.payload,
        result=model.stored.result,
        replays=model.stored.replays,
    )


def _timeline(model: ModelDecision) -> Timeline:
    return timeline(model.fixture, model.task, model.clock)


def _guard_action(guard: Sequence[GuardEntry], row: object) -> str | None:
    """What the gate did about the guarded tasks that wait on this target."""
    if not isinstance(row, Mapping):
        return None
    target = row.get("taskId")
    actions = [f"{entry.task_id} {entry.verb()}" for entry in guard if entry.guards(target)]
    return shown(", ".join(actions)) if actions else None


def _guard_lines(record: Mapping[str, Any]) -> list[str]:
    return [shown(_guard_line(entry)) for entry in guard_entries(record)]


def _guard_line(entry: GuardEntry) -> str:
    because = f": {'; '.join(entry.blockers)}" if entry.blockers else ""
    if entry.on_override and entry.overridden:
        because = f"; the model refused: {'; '.join(entry.overridden)}"
    return f"{entry.task_id} {entry.verb()}{because}"


def _work_unit(value: object) -> str | None:
    if value is None or value == {}:
        return None
    if isinstance(value, Mapping):
        return shown(", ".join(f"{key}={item}" for key, item in value.items()))
    return shown(value)


def _instant(record: Mapping[str, Any], key: str, problems: list[str]) -> pendulum.DateTime | None:
    try:
        return instant(record, key)
    except RecordError as error:
        problems.append(str(error))
        return None


def _optional_text(value: object) -> str | None:
    return None if value is None else shown(value)


def _described(value: object) -> str:
    text = repr(value)
    return shown(text if len(text) <= 80 else text[:77] + "...")


def formatted(when: pendulum.DateTime | None) -> str:
    """A wall-clock time as the view shows it, or a dash."""
    return "-" if when is None else when.in_timezone("UTC").format(VIEW_SHOWN)
