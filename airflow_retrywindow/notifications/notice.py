"""Notice: one decision as a notification tells it, read back from where it was stored.

A notification is sent after the decision, from a callback, so it never decides
anything itself. It reads one of the two things the provider stores:

* the evidence :class:`~airflow_retrywindow.RetryWindowPolicy` keeps for a try
  (the exact fixture, its clock origin, the model's result and the reason, see
  :mod:`airflow_retrywindow.records.evidence`), with the status read of a
  resumable job when one was reconciled before deciding
  (:mod:`airflow_retrywindow.records.reconciliation`);
* the decision record a gate or a sensor publishes as its ``return_value`` XCom
  (see :mod:`airflow_retrywindow.gate.record`), with where each estimate came
  from and, for a gate with an approval task, its ``override`` entry
  (:func:`override_of`): a guarded task let through by an approval is told as
  such, never as allowed by the model.

The facts of either are read by :class:`~airflow_retrywindow.records.decision_facts.DecisionFacts`,
the same read-model the view and ``explain`` format; this module only words them
for a message. A value that is neither is "not a retry window record".

For the evidence, the status update is rebuilt by replaying the stored fixture on
the stored clock, with the same sentence builders the gate and ``explain`` use. A
replay that disagrees with the stored result means the evidence cannot be trusted:
reading fails, and the notifier says so instead of sending it as if it held.

Pure: nothing here imports Airflow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pendulum

from airflow_retrywindow.labels import UTC_SHOWN, label
from airflow_retrywindow.model.decisions import Decision, lets_run_now
from airflow_retrywindow.records.decision_facts import DecisionFacts
from airflow_retrywindow.records.decision_record import GuardEntry, guard_entries
from airflow_retrywindow.records.evidence_entry import GATE_ERROR
from airflow_retrywindow.records.override import OverrideEntry
from airflow_retrywindow.records.reconciliation import RESCHEDULE, RUN, Reconciliation
from airflow_retrywindow.records.schema import NOT_A_RECORD, version_problem
from airflow_retrywindow.redaction import safe_text
from airflow_retrywindow.verdicts import entry_of, verdict

#: the longest account of an unreadable stored value kept
_MAX_PROBLEM = 500


@dataclass(frozen=True)
class Lateness:
    """How late the next attempt would end: the measurable part of a delivery's impact.

    :param finish: when the attempt would end, validation included (UTC text).
    :param deadline: the delivery deadline (UTC text).
    :param seconds: how many seconds after the deadline it would end.
    """

    finish: str
    deadline: str
    seconds: int


@dataclass(frozen=True)
class Notice:
    """One task's decision, as the notification tells it.

    :param task_id: the Airflow task the decision is about (``load[3]`` for a map index).
    :param decision: the model's decision, or ``gate-error`` when nothing was decided.
    :param reason: the one-line reason, as stored.
    :param outcome: what happens now in Airflow, in words.
    :param refused: whether the decision keeps the next try (or the guarded work) from running.
    :param status: the four-part status update (confirmed, unknown, next, next evidence).
    :param lateness: for ``deadline-infeasible``: how late the next attempt would end.
    :param try_number: the Airflow try the decision was taken for.
    :param estimate: where each estimate value came from, in one line; only when
        one of them is a gate override (mails stay short otherwise).
    :param action: the policy's stored action: retry, fail, default, run or reschedule.
    :param start_at: for a try the retry-start check rescheduled, when it may start (UTC text).
    :param job: the status read of a resumable job the decision was taken on.
    :param job_problem: what could not be read of a stored reconciliation, naming
        the field and the value; nothing is then said about the job.
    :param composition: which policy of a chain decided and what a classifier made of
        the failure, in words (:mod:`~airflow_retrywindow.records.composition`).
    """

    task_id: str
    decision: str
    reason: str
    outcome: str
    refused: bool
    status: str | None = None
    lateness: Lateness | None = None
    try_number: int | None = None
    estimate: str | None = None
    action: str | None = None
    start_at: str | None = None
    job: Reconciliation | None = None
    job_problem: str | None = None
    composition: str | None = None

    def job_answers(self) -> tuple[tuple[str, str], ...]:
        """The reconciled job's facts and what the next try does, as (question, answer)."""
        if self.job is None:
            return ()
        return self.job.answers(_written, action=self.action, start_at=self.start_at)


def _written(when: pendulum.DateTime) -> str:
    """A time as notifications write it: dated, UTC."""
    return when.in_timezone("UTC").format(UTC_SHOWN)


# -- the policy's evidence -----------------------------------------------------------

#: what each action told Airflow, in words; ``retry`` depends on the decision
_ACTION_OUTCOME = {
    "fail": "retry refused: the task has failed and no further try is scheduled",
    "default": (
        "not decided: the failure was handed back to Airflow's own retry settings "
        "(on_error='default')"
    ),
}


def from_evidence(entry: Mapping[str, Any], task_id: str) -> Notice:
    """The notice for one decision of the policy.

    :param entry: one evidence entry (the ``latest`` of the stored history).
    :param task_id: the task it was stored for.
    :raises ValueError: when the entry cannot be read, or its fixture does not
        replay to the recorded decision.
    """
    if not isinstance(entry, Mapping):
        raise ValueError(f"the stored evidence entry is {NOT_A_RECORD}: {_described(entry)}")
    unreadable = version_problem(entry)
    if unreadable:
        raise ValueError(f"the evidence entry is not a shape this release reads: {unreadable}")
    action, reason = _text(entry, "action"), _text(entry, "reason")
    facts = DecisionFacts.of_evidence(entry, task_id=task_id, strict=True)
    model = facts.model
    if model is None:  # written when the gate could not evaluate
        return Notice(
            task_id=task_id,
            decision=GATE_ERROR,
            reason=reason,
            outcome=_outcome(action, GATE_ERROR),
            refused=action == "fail",
            try_number=facts.try_number,
        )
    decision = model.task
    if decision.decision.value != model.stored_decision:
        raise ValueError(
            f"the stored fixture replays to {decision.decision.value}, not to the recorded "
            f"{model.stored_decision}; the evidence cannot be trusted"
        )
    lateness = None
    if decision.decision is Decision.DEADLINE_INFEASIBLE and decision.estimated_finish is not None:
        lateness = Lateness(
            finish=_written(model.clock.at(decision.estimated_finish)),
            deadline=_written(model.deadline),
            seconds=decision.estimated_finish - model.fixture.deadline,
        )
    start_at = _written(facts.start_at) if facts.start_at is not None else None
    job_problem = facts.job_problem
    return Notice(
        task_id=task_id,
        decision=decision.decision.value,
        reason=reason,
        outcome=_outcome(action, decision.decision.value, facts.job, start_at),
        refused=action == "fail",
        status=model.status(task_id),
        lateness=lateness,
        try_number=facts.try_number,
        action=action,
        start_at=start_at,
        job=facts.job,
        job_problem=safe_text(job_problem, limit=_MAX_PROBLEM) if job_problem else None,
        composition=safe_text(facts.composition) if facts.composition else None,
    )


def _outcome(
    action: str, decision: str, job: Reconciliation | None = None, start_at: str | None = None
) -> str:
    if action == "retry":
        if job is not None and job.allows:
            return f"retry allowed: the next try {job.does()}"
        found = verdict(decision)
        if found is None or not found.next_try:  # the model allowed a retry: it starts now
            found = entry_of(Decision.RETRY_ELIGIBLE)
        return f"retry allowed: {found.next_try}"
    if action == RUN:  # decided when the try started
        return f"try runs: it {job.does()}" if job else "try runs: the retry-start check let it"
    if action == RESCHEDULE:
        return (
            "try rescheduled: the same try starts again at "
            f"{start_at or 'the end of the backoff'}, and is decided again then"
        )
    if action not in _ACTION_OUTCOME:
        raise ValueError(f"action must be retry, fail, default, run or reschedule, got {action!r}")
    return _ACTION_OUTCOME[action]


# -- a gate's or a sensor's decision record ------------------------------------------


def from_gate_record(record: Mapping[str, Any]) -> tuple[Notice, ...]:
    """One notice per target of a gate's (or a sensor's) decision record.

    :param record: the record the gate pushed as its ``return_value`` XCom.
    :raises ValueError: when the record has no readable decisions.
    """
    if not isinstance(record, Mapping):
        raise ValueError(f"the stored value is {NOT_A_RECORD}: {_described(record)}")
    unreadable = version_problem(record)
    if unreadable:
        raise ValueError(f"the decision record is not a shape this release reads: {unreadable}")
    rows = record.get("decisions")
    if not isinstance(rows, list) or not rows:
        raise ValueError("the decision record holds no decisions")
    guarded = guard_entries(record)
    deadline = record.get("deadline")
    gate = str(record.get("gate", "the gate"))
    notices = []
    for row in rows:
        if not isinstance(row, Mapping):
            raise ValueError(f"a decision in the record is not an object: {row!r}")
        task_id = _text(row, "taskId")
        for told in ("decision", "reason"):  # a notice tells both: neither may be missing
            _text(row, told)
        facts = DecisionFacts.of_target(row, decided_by=gate, strict=True)
        held, run, overridden = _guarded_by(guarded, task_id)
        estimate = facts.estimate
        notices.append(
            Notice(
                task_id=label(task_id, facts.map_index),
                decision=facts.decision,
                reason=facts.reason,
                outcome=_gate_outcome(held, run, overridden),
                refused=bool(held)
                or (not run and not overridden and not lets_run_now(facts.decision)),
                status=facts.status,
                lateness=_row_lateness(row, deadline),
                try_number=facts.try_number,
                # one line only when an estimate is a gate override: mails stay short otherwise
                estimate=estimate.line() if estimate is not None and estimate.overridden else None,
            )
        )
    return tuple(notices)


def override_of(record: Mapping[str, Any]) -> OverrideEntry | None:
    """The gate record's approved override, or why there is none; ``None`` without an approval.

    :param record: the record the gate pushed as its ``return_value`` XCom.
    :raises ValueError: when the entry cannot be read: an override is never told on a guess.
    """
    if "override" not in record:
        return None
    return OverrideEntry.of(record["override"])


def _guarded_by(
    guard: Sequence[GuardEntry], task_id: str
) -> tuple[list[str], list[str], list[str]]:
    """The guarded tasks depending on ``task_id``: held back, may run, run on an override.

    One let through by an approval is named with the record's words for it
    (``refused by the model, overridden by <user>``).
    """
    held: list[str] = []
    run: list[str] = []
    overridden: list[str] = []
    for entry in guard:
        if not entry.guards(task_id):
            continue
        if not entry.runs:
            held.append(entry.task_id)
        elif entry.on_override:
            overridden.append(f"{entry.task_id} ({entry.override_words})")
        else:
            run.append(entry.task_id)
    return held, run, overridden


def _gate_outcome(held: Sequence[str], run: Sequence[str], overridden: Sequence[str]) -> str:
    if held:
        return f"held back by the gate: {', '.join(held)}"
    parts = [f"may run: {', '.join(run)}"] if run else []
    if overridden:
        parts.append(f"may run on an approved override: {', '.join(overridden)}")
    if parts:
        return "; ".join(parts)
    return "recorded only: the gate guards no task that depends on it"


def _row_lateness(row: Mapping[str, Any], deadline: object) -> Lateness | None:
    finish, slack = row.get("estimatedFinish"), row.get("slackSeconds")
    if row.get("decision") != Decision.DEADLINE_INFEASIBLE.value:
        return None
    if not (isinstance(finish, str) and isinstance(slack, int) and isinstance(deadline, str)):
        return None
    return Lateness(finish=_spaced(finish), deadline=_spaced(deadline), seconds=-slack)


def _spaced(iso: str) -> str:
    """``2026-12-01T06:14:00Z`` as ``2026-12-01 06:14:00Z``, the way notifications write times."""
    return iso.replace("T", " ", 1)


# -- reading stored values ------------------------------------------------------------


def _text(entry: Mapping[str, Any], key: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key} must be a non-empty string, got {value!r}")
    return value


def _described(value: object) -> str:
    text = repr(value)
    return safe_text(text if len(text) <= 80 else text[:77] + "...", limit=_MAX_PROBLEM)
