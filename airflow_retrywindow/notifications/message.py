"""Message: the subject and body a retry window notification carries.

The body follows the runbook's hand-off: the decision and its reason, the status
update (confirmed state, what is still unknown, the next action, when the next
evidence is due), the unit of work, and for ``deadline-infeasible`` the impact to
report instead of retrying (how late, who is affected, the operational
alternative). For a policy decision taken on a resumable job's status read, it
names the job and says whether the request reached the service, whether the job
finished, what still needs validation and what the next try does with the job.
For a gate with an approval task it states the approved override
(who, when, why, which targets) beside the model's unchanged decisions, or, when
work is held back, why there is none; a target's estimate sources are named only
when one of them is a gate override. When no decision could be found, the
message says so plainly and that the retry is to be treated as refused; it is
never empty.

Everything in a message passes through :func:`~airflow_retrywindow.redaction.safe_text`
as its last step, so a registered secret or a URL's credentials never leave in it.

Pure: nothing here imports Airflow (the masker is looked up only when present).
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from airflow_retrywindow.labels import UTC_SHOWN, label, parse_label
from airflow_retrywindow.notifications.notice import Lateness, Notice
from airflow_retrywindow.notifications.outage import Outage
from airflow_retrywindow.records.override import OverrideEntry
from airflow_retrywindow.redaction import safe_text

#: the decision a message names when none was found
NO_DECISION = "no-decision"
#: the longest subject kept; mail clients cut long ones anyway
MAX_SUBJECT = 250
#: the longest body kept
MAX_TEXT = 20_000
_PREFIX = "[retry window]"
_NEVER_ACTS = "The gate only decides: it submitted, cancelled and observed no job."
#: how real times are written in a notification: dated, UTC
_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class TaskTry:
    """The try a notification is about.

    :param dag_id: the DAG.
    :param run_id: the DAG run.
    :param task_id: the task whose callback sends the notification.
    :param try_number: the try, when known.
    :param map_index: the map index of a mapped task, ``-1`` otherwise.
    """

    dag_id: str
    run_id: str
    task_id: str
    try_number: int | None = None
    map_index: int = -1

    @property
    def name(self) -> str:
        """``dag.task`` (with ``[index]`` for a mapped task), as a subject names it."""
        return f"{self.dag_id}.{label(self.task_id, self.map_index)}"

    def line(self) -> str:
        """Where the decision was taken, for the body."""
        tried = f", try {self.try_number}" if self.try_number is not None else ""
        return f"DAG {self.dag_id}, run {self.run_id}, task {self.task_id}{tried}."


@dataclass(frozen=True)
class Impact:
    """What a ``deadline-infeasible`` report names besides the lateness.

    :param affected: who receives the delivery late: funds, clients, downstream consumers.
    :param alternative: the operational alternative, e.g. deliver what is validated now.
    """

    affected: str | None = None
    alternative: str | None = None


@dataclass(frozen=True)
class Message:
    """A notification, composed and masked, ready for any channel.

    :param subject: one line naming the decision, the DAG and the task.
    :param text: the plain-text body.
    :param decision: the headline decision (``no-decision`` when none was found).
    :param reason: the headline decision's reason (or why none was found).
    """

    subject: str
    text: str
    decision: str
    reason: str

    @property
    def html(self) -> str:
        """The body as HTML: the plain text, escaped, its lines kept."""
        return f'<pre style="white-space: pre-wrap">{html.escape(self.text)}</pre>'


def compose(
    task: TaskTry,
    notices: Sequence[Notice],
    *,
    work_unit: object = None,
    impact: Impact | None = None,
    evidence: str = "",
    override: OverrideEntry | None = None,
    outage: Outage | None = None,
) -> Message:
    """The message for decisions found for ``task``.

    :param task: the try whose callback sends it.
    :param notices: the decisions, one per task decided (one for a policy).
    :param work_unit: the unit of work (a mapping or text).
    :param impact: who is affected and the alternative, for ``deadline-infeasible``.
    :param evidence: where the full evidence is kept, in words.
    :param override: a gate's ``override`` entry, when it has an approval task.
    :param outage: the outage of the task's breaker pool the failure belongs to.
    """
    if not notices:
        raise ValueError("notices must hold at least one decision")
    head = next((notice for notice in notices if notice.refused), notices[0])
    single = len(notices) == 1
    title = (
        f"Retry window: {head.decision} for task {head.task_id}, {_label(head)}."
        if single
        else f"Retry window: {len(notices)} decisions by {task.task_id}."
    )
    lines = [title, task.line(), ""]
    for notice in notices:
        lines += _decision_lines(notice, heading=not single)
    if override is not None:
        lines += _override_lines(override, held=any(notice.refused for notice in notices))
    if outage is not None:
        lines += _outage_lines(outage)
    late = [(notice.task_id, notice.lateness) for notice in notices if notice.lateness]
    if late:
        released = _released(override, [task_id for task_id, _ in late])
        lines += _impact_lines(late, impact or Impact(), released=released)
    lines += [f"Unit of work: {_work_unit(work_unit)}."]
    if evidence:
        lines += [f"Evidence: {evidence}."]
    read = [n.job.job for n in notices if n.job is not None and n.job.outcome != "no-id"]
    lines += [_read_once(read) if read else _NEVER_ACTS]
    if single:
        tried = f" try {task.try_number}" if task.try_number is not None else ""
        subject = f"{head.decision}: {task.name}{tried}, {_label(head)}"
        if outage is not None:
            subject = (
                f"{head.decision}: pool {outage.pool}'s breaker {outage.state.words()}; "
                f"{task.name}{tried} {_label(head)}"
            )
    else:
        subject = f"{task.name}: " + "; ".join(
            f"{notice.task_id} {notice.decision} ({_label(notice)})" for notice in notices
        )
    return _masked(subject, lines, decision=head.decision, reason=head.reason)


def compose_missing(
    task: TaskTry,
    *,
    why: str,
    consequence: str,
    failure: str | None = None,
    work_unit: object = None,
) -> Message:
    """The message when no decision can be shown: fail closed, in plain words.

    :param task: the try whose callback sends it.
    :param why: why no decision can be shown, e.g. none was stored for this try.
    :param consequence: what that means for the task or the work it guards.
    :param failure: the try's exception, already described, if any.
    :param work_unit: the unit of work (a mapping or text).
    """
    lines = [
        f"Retry window: no decision was found for task {task.task_id}.",
        task.line(),
        "",
        f"Why: {why}.",
        f"What happens now: {consequence}.",
        f"Failure: {failure or 'none reported'}.",
        "Next: nothing was decided, so nothing says another try is safe. Find out what the "
        "failed try did, repair the cause, then clear the task.",
        f"Unit of work: {_work_unit(work_unit)}.",
        _NEVER_ACTS,
    ]
    tried = f" try {task.try_number}" if task.try_number is not None else ""
    subject = f"{NO_DECISION}: {task.name}{tried}, treat the retry as refused"
    return _masked(subject, lines, decision=NO_DECISION, reason=why)


def _read_once(jobs: Sequence[str]) -> str:
    """What the gate did to the jobs it reconciled: one status read each, nothing more."""
    return (
        f"The gate only decides: it read the status of {', '.join(jobs)} once, through the "
        "operator, and submitted, cancelled and polled no job."
    )


def _label(notice: Notice) -> str:
    """The short part of the outcome: ``retry refused``, ``held back by the gate``, ..."""
    return notice.outcome.partition(":")[0]


def _decision_lines(notice: Notice, *, heading: bool) -> list[str]:
    lines = [f"Task {notice.task_id}:"] if heading else []
    lines += [
        f"Decision: {notice.decision}",
        f"What happens now: {notice.outcome}",
        f"Reason: {notice.reason}",
    ]
    if notice.composition:
        lines.append(f"Retry policies: {notice.composition}")
    lines += _job_lines(notice)
    if notice.estimate:
        lines.append(f"Estimate: {notice.estimate}")
    if notice.status:
        lines.append(f"Status update: {notice.status}")
    else:
        lines.append(
            "Status update: nothing was decided, so nothing is confirmed beyond the failure; "
            "next: read the cause in the reason and repair it before anyone clears the task."
        )
    return [*lines, ""]


def _job_lines(notice: Notice) -> list[str]:
    """The resumable job read before deciding: its id, its status, the three answers."""
    if notice.job_problem:
        return [
            f"Reconciled job: the stored reconciliation could not be read ({notice.job_problem}); "
            "nothing is said here about the job."
        ]
    if notice.job is None:
        return []
    lines = [f"Reconciled before deciding: {notice.job.job}"]
    return [*lines, *(f"  {question}: {answer}" for question, answer in notice.job_answers())]


def _override_lines(override: OverrideEntry, *, held: bool) -> list[str]:
    """The approved override, or, when work is held back, why there is none."""
    if not override.applied or override.approved_at is None:
        if not held:  # nothing waits on an approval: no line to keep the mail short
            return []
        why = override.note or "no reason was stored"
        return [f"No override through {override.approval}: {why}.", ""]
    refused = ", ".join(f"{name} {decision}" for name, decision in override.overridden)
    lines = [
        f"Approved override: refused by the model, overridden by {override.approver} at "
        f"{override.approved_at.format(UTC_SHOWN)} through {override.approval}.",
        f"  Reason: {override.reason}",
        f"  Targets: {', '.join(override.targets)}"
        + (f"; the model's decisions stand in the record: {refused}" if refused else ""),
    ]
    if override.note:
        lines.append(f"  Not released: {override.note}")
    return [*lines, ""]


def _outage_lines(outage: Outage) -> list[str]:
    """The outage, its impact so far, and that it is told once."""
    lines = [f"Outage: {outage.line()}."]
    if outage.refused:
        lines.append(
            "  Deadline missed: this task can no longer finish, validation included, before "
            "its deadline (held in its pool past its latest start, or its retry's wait while "
            "the breaker is open does not fit)."
        )
    lines += [
        f"  Told once per outage ({outage.name}): the pool's other failures in it send "
        "nothing, except the first refused for its deadline; Airflow Variable "
        f"{outage.variable} names the outage told.",
        "",
    ]
    return lines


def _released(override: OverrideEntry | None, task_ids: Sequence[str]) -> bool:
    """Whether an applied override released every one of ``task_ids`` (``load[3]``
    counts as its target ``load``)."""
    if override is None or not override.applied:
        return False
    return all(parse_label(task_id).task_id in override.targets for task_id in task_ids)


def _impact_lines(
    late: Sequence[tuple[str, Lateness]], impact: Impact, *, released: bool
) -> list[str]:
    # an override runs the repeat anyway: the delivery is still at risk, but not
    # because a retry was refused
    lines = [
        "Impact to report: the approved override released the repeat, which is still "
        "estimated to end after the deadline:"
        if released
        else "Impact to report instead of retrying:"
    ]
    for task_id, lateness in late:
        lines.append(
            f"  Delivery at risk ({task_id}): the next attempt would end, validation "
            f"included, at {lateness.finish}, {_span(lateness.seconds)} after the "
            f"{lateness.deadline} deadline."
        )
    lines += [
        "  Affected population: "
        + (
            impact.affected
            or "not given to the notifier (affected=...); name the funds, clients or "
            "consumers who receive this delivery late"
        ),
        "  Operational alternative: "
        + (
            impact.alternative
            or "not given to the notifier (alternative=...); agree one with the business "
            "consumer before the deadline"
        ),
        "",
    ]
    return lines


def _span(seconds: int) -> str:
    if seconds < 120:
        return f"{seconds} s"
    minutes, rest = divmod(seconds, 60)
    return f"{seconds} s ({minutes} min {rest} s)" if rest else f"{seconds} s ({minutes} min)"


def _work_unit(work_unit: object) -> str:
    if isinstance(work_unit, Mapping) and work_unit:
        return ", ".join(f"{key}={value}" for key, value in work_unit.items())
    if isinstance(work_unit, str) and work_unit.strip():
        return work_unit.strip()
    return "not given"


def _masked(subject: str, lines: Sequence[str], *, decision: str, reason: str) -> Message:
    """The message with every secret masked; the subject on one line."""
    # masked before the whitespace is folded, so folding cannot hide a secret from the masker
    masked = safe_text(f"{_PREFIX} {subject}", limit=MAX_TEXT)
    one_line = _WHITESPACE.sub(" ", masked).strip()
    return Message(
        subject=safe_text(one_line, limit=MAX_SUBJECT),
        text=safe_text("\n".join(lines).rstrip() + "\n", limit=MAX_TEXT),
        decision=safe_text(decision, limit=MAX_SUBJECT),
        reason=safe_text(reason, limit=MAX_TEXT),
    )
