"""Override: a person's approval lets refused guarded work run once, next to the model's decision.

After the model refuses a repeat (``attempts-exhausted``, ``reconcile-effects``,
``deadline-infeasible``, ...), someone with authority may decide to repeat anyway.
They say so through one of Airflow's human-in-the-loop tasks (``ApprovalOperator``,
or an ``HITLOperator`` offering ``Approve``) placed directly downstream of the gate;
the gate names it with ``approval=``. See ``docs/approved-override.md`` for the
pattern.

The model's decisions are never changed: the gate records them as they are and
puts an :class:`Override` beside them. An answer counts (:func:`judge`) only when
all of this holds, and otherwise nothing changes:

* the approval task succeeded with exactly ``Approve`` chosen by a person: not
  rejected, not a default Airflow chose because nobody answered in time, not an
  answer recorded before the task was cleared;
* it states a reason (the form field :data:`REASON_PARAM`);
* it was given after the gate's previous decision in this run and after the latest
  try of every task instance it releases ended, so yesterday's approval never lets
  today's repeat through;
* it names the targets it releases (the form field :data:`TARGETS_PARAM`), or the
  gate is configured for them (``approval_targets``, by default every target).

An approval overrides the model's retry decision only when that decision is one
of :data:`OVERRIDABLE`. It never overrides resources: a pool that can never hold
the task or an exceeded budget stands, and so do the decisions in
:data:`STANDING`. A guarded task runs on an approval when every reason holding it
back is a refusal the approval covers (:meth:`Override.covers`).

The approval task's answer is read here too, and only when an approval could let
held-back work through (:func:`read_approval`): the task's human-in-the-loop
answer and, when that is an approval, the gate's earlier tries. The client is
passed in. What the gate lets through (:func:`gate_override`, :func:`guarded_actions`)
and whether it asks at all (:func:`asks_in_vain`) are decided here, and so is the
parse-time check of the approval task (:func:`approval_problems`), which imports
Airflow's ``HITLOperator`` when it runs; importing this module imports no Airflow.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

import pendulum

from airflow_retrywindow.gate.observe import OBSERVATIONS
from airflow_retrywindow.labels import UNMAPPED, UTC_SHOWN
from airflow_retrywindow.records.override import Approver, OverrideEntry, stored_time
from airflow_retrywindow.redaction import describe_exception, safe_text
from airflow_retrywindow.verdicts import overridable, standing

if TYPE_CHECKING:
    from airflow_retrywindow.gate.decide import DecisionTable, TargetDecision
    from airflow_retrywindow.hooks.api_reader import ApprovalRow, TaskInstanceRow

#: the option an approval task offers for "repeat anyway"
APPROVE = "Approve"
#: the form field holding the stated reason; an approval without one does not count
REASON_PARAM = "reason"
#: the optional form field naming the targets an approval releases
TARGETS_PARAM = "targets"
#: the approval task's state once its answer is final
ANSWERED = "success"
#: the most characters of a reason kept in the record
MAX_REASON_TEXT = 500

#: the verdicts a person may override: the model cannot know what they know (the
#: verdicts table, :mod:`airflow_retrywindow.verdicts`, says which)
OVERRIDABLE = overridable()
#: the verdicts that stand whatever a person answers, and why
STANDING = standing()


@dataclass(frozen=True)
class Override:
    """What the gate's approval task lets through on this evaluation, if anything.

    :param approval: the approval task's id.
    :param released: the targets released; empty when the approval does not count.
    :param approver: who approved, when the answer is a person's ``Approve``.
    :param approved_at: when they approved.
    :param reason: the reason they stated.
    :param overridden: ``(task instance name, the model's decision)`` of every
        refusal the approval overrides.
    :param note: why the approval does not count, or which named targets it does
        not release; empty when it releases everything it names.
    :param answer: the answer as read, for the record; ``None`` when none was read.
    """

    approval: str
    released: tuple[str, ...] = ()
    approver: Approver | None = None
    approved_at: pendulum.DateTime | None = None
    reason: str = ""
    overridden: tuple[tuple[str, str], ...] = ()
    note: str = ""
    answer: Mapping[str, Any] | None = None

    @property
    def applied(self) -> bool:
        """Whether the approval lets anything through."""
        return bool(self.released)

    @property
    def wording(self) -> str:
        """``refused by the model, overridden by <user>``; empty when not applied."""
        return self.entry().wording

    def covers(self, table: DecisionTable, targets: Iterable[str]) -> bool:
        """Whether a guarded task that depends on ``targets`` runs on this approval.

        Only when something holds it back and every target holding it back is
        released: a released target's only blockers are refusals the approval
        overrides.
        """
        held = [target for target in targets if table.blockers(target)]
        return bool(held) and all(target in self.released for target in held)

    def entry(self) -> OverrideEntry:
        """The record's ``override`` entry: what this evaluation stores."""
        return OverrideEntry(
            approval=self.approval,
            applied=self.applied,
            approved_by=self.approver,
            approved_at=self.approved_at,
            reason=self.reason,
            targets=self.released,
            overridden=self.overridden,
            note=self.note,
            answer=self.answer,
        )

    def as_dict(self) -> dict[str, Any]:
        """The record's ``override`` entry, JSON-ready (:meth:`OverrideEntry.as_dict`)."""
        return self.entry().as_dict()

    def status_line(self) -> str:
        """One line for the status update."""
        if not self.applied or self.approver is None or self.approved_at is None:
            return f"No override through {self.approval}: {self.note}."
        refused = ", ".join(f"{name} {decision}" for name, decision in self.overridden)
        line = (
            f"Override: {refused}: {self.wording} at {self.approved_at.format(UTC_SHOWN)} "
            f"through {self.approval}; reason: {self.reason}."
        )
        return f"{line} Not released: {self.note}." if self.note else line


def unasked(approval: str, note: str) -> Override:
    """An override that was not looked for: ``note`` says why."""
    return Override(approval=approval, note=note)


def approvable(table: DecisionTable, targets: Iterable[str], allowed: Collection[str]) -> bool:
    """Whether an approval could let a guarded task that depends on ``targets`` run.

    It could when something holds the task back, the budget allows, and every
    target holding it back is one the approval may release (``allowed``) whose
    refused task instances are all overridable refusals in a pool that can hold them.
    """
    if table.budget is not None and table.budget.blocks:
        return False
    held = [target for target in targets if table.blockers(target)]
    return bool(held) and all(
        target in allowed and _standing(_refused(table, target)) is None for target in held
    )


def may_approve(answer: ApprovalRow | None) -> bool:
    """Whether ``answer`` is a final ``Approve`` chosen by a person (more is checked later)."""
    return answer is not None and _unusable(answer, answer.task_id) is None


def judge(
    table: DecisionTable,
    answer: ApprovalRow | None,
    *,
    approval: str,
    allowed: Sequence[str],
    previous_decision: pendulum.DateTime | None,
) -> Override:
    """What the approval task's answer releases on this evaluation.

    :param table: the model's decisions, unchanged.
    :param answer: the approval task's request and answer, ``None`` when it has
        written no request in this run.
    :param approval: the approval task's id.
    :param allowed: the targets the gate lets an approval release.
    :param previous_decision: when the gate's previous decision in this run was
        made (the end of its latest earlier successful try), ``None`` for none.
    """
    seen = _answer_seen(answer)
    problem = _unusable(answer, approval)
    if problem or answer is None or answer.user_id is None or answer.responded_at is None:
        return Override(approval=approval, note=problem or "", answer=seen)
    approver = Approver(safe_text(answer.user_id), safe_text(answer.user_name or answer.user_id))
    at = answer.responded_at
    refused = Override(approval=approval, answer=seen)
    reason = _reason(answer.params_input)
    if not reason:
        return replace(
            refused,
            note=f"{approver.shown} approved at {at.format(UTC_SHOWN)} without stating a reason "
            f"(the form field {REASON_PARAM!r}); an approval counts only with one",
        )
    named, problem = _named(answer.params_input, allowed)
    if problem:
        return replace(refused, note=problem)
    if table.budget is not None and table.budget.blocks:
        return replace(
            refused,
            note=f"the budget is exceeded ({table.budget.reason}); an approval overrides the "
            "model's retry decision, not a budget",
        )
    if previous_decision is not None and at <= previous_decision:
        return replace(
            refused,
            note=f"{approver.shown} approved at {at.format(UTC_SHOWN)}, before this gate's "
            f"previous decision at {previous_decision.format(UTC_SHOWN)}: one approval lets one "
            f"repeat through; clear {approval} to ask again",
        )
    released: list[str] = []
    overridden: list[tuple[str, str]] = []
    notes: list[str] = []
    for target in named:
        rows = _refused(table, target)
        if not rows:
            continue  # nothing holds it back: nothing to override
        why = _standing(rows) or _stale(rows, at, approval)
        if why:
            notes.append(why)
            continue
        released.append(target)
        overridden.extend((row.label, row.decision) for row in rows)
    if not released and not notes:
        notes.append(f"nothing it names ({', '.join(named)}) is refused")
    return Override(
        approval=approval,
        released=tuple(released),
        approver=approver,
        approved_at=at,
        reason=reason,
        overridden=tuple(overridden),
        note="; ".join(notes),
        answer=seen,
    )


def _unusable(answer: ApprovalRow | None, approval: str) -> str | None:
    """Why the answer is not a final ``Approve`` by a person, or ``None`` when it is."""
    if answer is None:
        return (
            f"{approval} has not asked in this run yet: it asks after this gate (if it shows "
            "as skipped, clear it to ask)"
        )
    if answer.responded_at is None:
        return f"{approval} has not been answered yet (its state: {answer.state or 'none'})"
    at = answer.responded_at.format(UTC_SHOWN)
    if answer.user_id is None:
        return (
            f"nobody answered {approval} in time; Airflow chose its default "
            f"{list(answer.chosen)} at {at}, and only a person's approval counts"
        )
    who = safe_text(answer.user_name or answer.user_id)
    if answer.state != ANSWERED:
        return (
            f"the answer of {who} at {at} is not final: {approval} is "
            f"{answer.state or 'cleared'}; an answer counts once {approval} has succeeded with it"
        )
    if answer.chosen != (APPROVE,):
        chosen = ", ".join(answer.chosen) or "nothing"
        verb = "rejected" if answer.chosen == ("Reject",) else f"answered {chosen}"
        return f"{who} {verb} at {at}"
    return None


def _reason(form: Mapping[str, Any]) -> str:
    """The stated reason, safe to store, or empty."""
    value = form.get(REASON_PARAM)
    if not isinstance(value, str):
        return ""
    return safe_text(" ".join(value.split()), limit=MAX_REASON_TEXT)


def _named(form: Mapping[str, Any], allowed: Sequence[str]) -> tuple[tuple[str, ...], str]:
    """The targets the answer releases, and a problem when it names them wrongly.

    Without the form field, the targets the gate is configured for.
    """
    if TARGETS_PARAM not in form:
        return tuple(allowed), ""
    value = form[TARGETS_PARAM]
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        return (), (
            f"the form field {TARGETS_PARAM!r} must be a list of target ids, got "
            f"{safe_text(repr(value), limit=120)}"
        )
    wanted = [name.strip() for name in names if name.strip()]
    if not wanted:
        return (), f"the form field {TARGETS_PARAM!r} names no target"
    unknown = [name for name in wanted if name not in allowed]
    if unknown:
        return (), (
            f"the form field {TARGETS_PARAM!r} names "
            f"{', '.join(safe_text(repr(name), limit=60) for name in unknown)}, which an "
            f"approval of this gate may not release (it may release {', '.join(allowed)})"
        )
    return tuple(dict.fromkeys(wanted)), ""


def _refused(table: DecisionTable, target: str) -> list[TargetDecision]:
    """The task instances of ``target`` held back (budget aside)."""
    return [row for row in table.rows_of(target) if row.blockers()]


def _standing(rows: Sequence[TargetDecision]) -> str | None:
    """Why an approval cannot release these held-back task instances, or ``None``."""
    for row in rows:
        if row.capacity.blocks:
            return (
                f"{row.label} is held back by its pool ({row.capacity.reason}); an approval "
                "overrides the model's retry decision, not capacity"
            )
        if row.decision not in OVERRIDABLE:
            why = STANDING.get(row.decision, "it is not a refusal an approval may override")
            return f"{row.label}: {row.decision} stands: {why}"
    return None


def _stale(rows: Sequence[TargetDecision], at: pendulum.DateTime, approval: str) -> str | None:
    """Why the approval at ``at`` came before the latest facts about these, or ``None``."""
    for row in rows:
        since = _latest_fact(row)
        if since is None:
            return f"when the latest try of {row.label} ended is not known"
        if at <= since:
            return (
                f"approved at {at.format(UTC_SHOWN)}, before the latest try of {row.label} ended "
                f"at {since.format(UTC_SHOWN)}: that approval was for an earlier repeat; clear "
                f"{approval} to ask again"
            )
    return None


def _latest_fact(row: TargetDecision) -> pendulum.DateTime | None:
    """When the facts the model refused on were last true: the try's end, or the observation's."""
    facts = row.observed.facts
    if facts is None or facts.finished_at is None:
        return None
    instants = [facts.finished_at]
    if row.observed.source == OBSERVATIONS:
        instants.append(facts.observed_at)  # an observation newer than the approval
    return pendulum.instance(max(instants)).in_timezone("UTC")


def _answer_seen(answer: ApprovalRow | None) -> dict[str, Any] | None:
    """The answer as read, safe to store: no form values but the reason and the targets."""
    if answer is None:
        return None
    return {
        "state": answer.state,
        "tryNumber": answer.try_number,
        "askedAt": stored_time(answer.asked_at),
        "chosen": list(answer.chosen),
        "by": (
            None
            if answer.user_id is None
            else {
                "id": safe_text(answer.user_id),
                "name": safe_text(answer.user_name or answer.user_id),
            }
        ),
        "at": stored_time(answer.responded_at),
    }


# -- reading the approval task ------------------------------------------------------


class ApprovalReader(Protocol):
    """The reads of an approval: those of ``AirflowApiHook(...).get_conn()``."""

    requests: int

    def approval(
        self, dag_id: str, run_id: str, task_id: str, map_index: int = UNMAPPED
    ) -> ApprovalRow | None: ...

    def task_tries(
        self, dag_id: str, run_id: str, task_id: str, map_index: int = UNMAPPED
    ) -> list[TaskInstanceRow]: ...


@dataclass(frozen=True)
class ApprovalSnapshot:
    """What one read found about a gate's approval task.

    :param answer: the task's human-in-the-loop request and answer, ``None`` when it
        has written none in this run.
    :param previous_decision: when the gate's previous decision in this run was
        made: the end of its latest earlier try that succeeded. ``None`` when there
        is none, or when the answer is no approval (then it is not read).
    :param requests: REST API requests the reader made.
    """

    answer: ApprovalRow | None
    previous_decision: pendulum.DateTime | None
    requests: int


def read_approval(
    client: ApprovalReader,
    dag_id: str,
    run_id: str,
    approval: str,
    *,
    gate: str,
    gate_try: int,
) -> ApprovalSnapshot:
    """Read the approval task's answer, and the gate's previous decision when it approves.

    One request for the answer; when it is an approval and the gate ran before in
    this run, one more for the gate's tries.

    :param client: the REST API client.
    :param dag_id: the run's DAG.
    :param run_id: the run.
    :param approval: the approval task's id.
    :param gate: the gate's task id.
    :param gate_try: the gate's try deciding now.
    """
    answer = client.approval(dag_id, run_id, approval)
    previous = None
    if may_approve(answer) and gate_try > 1:
        previous = previous_decision(client.task_tries(dag_id, run_id, gate), gate_try)
    return ApprovalSnapshot(answer, previous, client.requests)


def previous_decision(tries: Sequence[TaskInstanceRow], current: int) -> pendulum.DateTime | None:
    """When the gate's latest earlier successful try ended: its previous decision.

    A try that failed made no decision. A successful try without an end date counts
    as deciding when the API answered, so that no approval given before it counts.

    :param tries: the gate's tries in this run.
    :param current: the try deciding now.
    """
    decided = [row for row in tries if row.try_number < current and row.state == "success"]
    if not decided:
        return None
    latest = max(decided, key=lambda row: row.try_number)
    return latest.end_date or latest.observed_at


# -- the gate's use of an approval: what it lets through, and when nobody is asked ----

#: states of an approval task the gate leaves as they are rather than skip it
APPROVAL_LEFT = frozenset({"success", "failed", "running", "skipped", "upstream_failed", "removed"})


def guarded_actions(
    table: DecisionTable, guard: Mapping[str, Sequence[str]], override: Override | None
) -> tuple[list[dict[str, Any]], list[str]]:
    """Per guarded task whether it runs or is skipped and why, and the ones held back.

    A guarded task held back by refusals the override covers runs, the model's
    refusals kept on record beside the person who overrode them.

    :param table: the decisions.
    :param guard: guarded task id -> the target ids it repeats.
    :param override: what the approval task lets through, if the gate has one.
    """
    entries: list[dict[str, Any]] = []
    held: list[str] = []
    for task_id, targets in guard.items():
        blockers = [text for target in targets for text in table.blockers(target)]
        entry: dict[str, Any] = {
            "taskId": task_id,
            "targets": list(targets),
            "action": "skip" if blockers else "run",
            "blockers": blockers,
        }
        if blockers and override is not None and override.covers(table, targets):
            entry.update(action="run", blockers=[], overridden=blockers)
            entry["override"] = override.wording
        entries.append(entry)
        if entry["action"] == "skip":
            held.append(task_id)
    return entries, held


def gate_override(
    table: DecisionTable,
    guard: Mapping[str, Sequence[str]],
    approval: str | None,
    allowed: Sequence[str],
    reader: ApprovalReader | None,
    *,
    dag_id: str,
    run_id: str,
    gate_id: str,
    gate_try: int,
) -> tuple[Override | None, int]:
    """What the approval task lets through now, and the requests its read made.

    The approval is read only when it could let held-back work through, through
    the reader that read the run; when it cannot be read, nothing is let
    through (the model's refusals stand).

    :param table: the decisions.
    :param guard: guarded task id -> the target ids it repeats.
    :param approval: the approval task's id, ``None`` when the gate has none.
    :param allowed: the targets an approval may release.
    :param reader: the reader that read the run, if one was handed over.
    :param dag_id: the DAG of the run.
    :param run_id: the run.
    :param gate_id: the gate's task id.
    :param gate_try: the gate's try number.
    """
    if approval is None:
        return None, 0
    if not any(approvable(table, targets, allowed) for targets in guard.values()):
        held = any(table.blockers(target) for targets in guard.values() for target in targets)
        why = "nothing held back is a refusal it may override" if held else "nothing is held back"
        return unasked(approval, f"{why}, so it does not ask"), 0
    if reader is None:
        return unasked(approval, "no reader of the run was handed over to read it"), 0
    before = reader.requests
    try:
        found = read_approval(reader, dag_id, run_id, approval, gate=gate_id, gate_try=gate_try)
    except Exception as error:
        note = f"its answer could not be read ({describe_exception(error)})"
        return unasked(approval, note), reader.requests - before
    decided = judge(
        table,
        found.answer,
        approval=approval,
        allowed=allowed,
        previous_decision=found.previous_decision,
    )
    return decided, found.requests - before


def asks_in_vain(
    table: DecisionTable,
    guard: Mapping[str, Sequence[str]],
    held: Sequence[str],
    allowed: Collection[str],
    override: Override | None,
) -> bool:
    """Whether the approval task would ask a person in vain, so the gate skips it:
    nothing held back could be approved. An approval that already ended (or runs) is
    left as it is.

    :param table: the decisions.
    :param guard: guarded task id -> the target ids it repeats.
    :param held: the guarded tasks held back.
    :param allowed: the targets an approval may release.
    :param override: what :func:`gate_override` found; ``None`` when the gate has no approval.
    """
    if override is None:
        return False
    if any(approvable(table, guard[task_id], allowed) for task_id in held):
        return False
    state = override.answer.get("state") if override.answer else None
    return state not in APPROVAL_LEFT


def approval_problems(
    dag: Any,
    approval: str | None,
    *,
    gate_id: str,
    downstream: Collection[str],
    guard: Iterable[str],
) -> list[str]:
    """What is wrong with the gate's approval task and where it sits, checked at parse time.

    The pattern: an HITL task offering ``Approve`` with a ``reason`` param, directly
    downstream of the gate with ``all_success``, beside the guarded tasks (neither
    upstream nor downstream of them), so that a normal run never waits for a person.
    Airflow's ``HITLOperator`` is imported when this runs.

    :param dag: the gate's DAG.
    :param approval: the approval task's id, ``None`` when the gate has none.
    :param gate_id: the gate's task id.
    :param downstream: the task ids directly downstream of the gate.
    :param guard: the gate's guarded task ids.
    """
    from airflow.providers.standard.operators.hitl import HITLOperator

    if approval is None:
        return []
    task = dag.task_dict.get(approval)
    if task is None:
        return [f"approval task {approval!r} is not a task of DAG {dag.dag_id!r}"]
    if not isinstance(task, HITLOperator):
        return [
            f"approval task {approval!r} is a {type(task).__name__}; it must be an "
            f"ApprovalOperator, or an HITLOperator offering {APPROVE!r}, and not mapped"
        ]
    named = f"approval task {approval!r}"
    problems: list[str] = []
    if APPROVE not in task.options or task.multiple:
        problems.append(
            f"{named} must offer {APPROVE!r} with one option chosen (multiple=False); it "
            f"offers {list(task.options)}{' with multiple=True' if task.multiple else ''}"
        )
    if task.defaults and APPROVE in task.defaults:
        problems.append(
            f"{named} defaults to {APPROVE!r}: on a response timeout Airflow would record an "
            "approval nobody gave (the gate ignores it); drop the default"
        )
    if REASON_PARAM not in task.params:
        problems.append(
            f"{named} has no {REASON_PARAM!r} param: an approval counts only with a stated "
            f"reason; add params={{{REASON_PARAM!r}: Param(type='string', minLength=1)}}"
        )
    if approval not in downstream:
        problems.append(
            f"{named} must be directly downstream of gate {gate_id!r} "
            f"({gate_id} >> {approval}), so that it asks only after the gate held "
            "refused work back"
        )
    rule = str(getattr(task.trigger_rule, "value", task.trigger_rule))
    if rule != "all_success":
        problems.append(
            f"{named} has trigger_rule {rule!r}, which would ask for an approval after "
            f"{gate_id!r} failed, with no refusal to override; use all_success"
        )
    after_approval = set(task.get_flat_relative_ids(upstream=False))
    for task_id in guard:
        guarded = dag.task_dict.get(task_id)
        if task_id in after_approval:
            problems.append(
                f"guarded task {task_id!r} is downstream of {named}: every run would wait "
                f"for a person; put both directly after {gate_id!r}, side by side"
            )
        elif guarded is not None and approval in guarded.get_flat_relative_ids(upstream=False):
            problems.append(
                f"{named} is downstream of guarded task {task_id!r}: when the gate holds "
                f"{task_id!r} back, the approval is skipped with it and never asks; put it "
                f"directly after {gate_id!r}"
            )
    return problems
