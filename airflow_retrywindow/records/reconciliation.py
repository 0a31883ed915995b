"""Reconciliation: a resumable job's status read, as a policy decision stored it, read back.

Before it decides on an unknown outcome of a resumable job (Airflow's
``ResumableJobMixin``), :class:`~airflow_retrywindow.RetryWindowPolicy` (and the
retry-start check) reads the job's status once and keeps what it found in the
decision's ``reconciliation`` entry (written by :meth:`Reconciliation.as_dict`, from
:meth:`~airflow_retrywindow.policies.job_status.JobRead.as_dict`). The Retry window
view, the notifier and ``airflow-retrywindow explain`` read it back here, so they
say the same things in the same words: which job, its raw status and when it was
read, whether the request reached the service, whether the job finished, what
still needs validation, and what the next try does with the job.

An entry that cannot be read raises :class:`~airflow_retrywindow.exceptions.RecordError`
naming the field and the value: nothing is said about a job on a guess. Every
text passes through the caller's mask (:func:`~airflow_retrywindow.redaction.safe_text`
unless the caller gives another). Pure: nothing here imports Airflow.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pendulum

from airflow_retrywindow.exceptions import RecordError
from airflow_retrywindow.redaction import safe_text

#: the key of the entry in a stored policy decision
KEY = "reconciliation"
#: what one status read can find, as stored
ACTIVE = "active"
SUCCEEDED = "succeeded"
FAILED = "failed"
NOT_FOUND = "not-found"
UNKNOWN = "unknown"
NO_ID = "no-id"
OUTCOMES = (ACTIVE, SUCCEEDED, FAILED, NOT_FOUND, UNKNOWN, NO_ID)
#: what a next try does with the job without repeating the work
RECONNECT = "reconnect"
COLLECT = "collect"
#: what a next try does without repeating the work, by outcome; the others allow nothing
ALLOWS = {ACTIVE: RECONNECT, SUCCEEDED: COLLECT}
#: the actions of a decision taken when a try starts: the try runs, or starts again later
RUN = "run"
RESCHEDULE = "reschedule"
#: the longest text kept of one stored field
MAX_TEXT = 2_000
#: the longest job id kept, written and compared alike; BigQuery's run to 1,024 characters
MAX_JOB_ID = 1_024

#: how stored text is made safe to show
Mask = Callable[[str], str]
#: how a time is written
TimeText = Callable[[pendulum.DateTime], str]


def _safe(text: str) -> str:
    return safe_text(text, limit=MAX_TEXT)


def stored_job_id(job_id: object) -> str:
    """A job id as it is stored, and as a stored one is looked for: masked, at most
    :data:`MAX_JOB_ID` characters. The one place both the writer and the reader cut it.

    :param job_id: the id as the operator keeps it in the task state store.
    """
    return safe_text(str(job_id), limit=MAX_JOB_ID)


@dataclass(frozen=True)
class Reconciliation:
    """What one read of a resumable job's status found, as stored with a decision.

    :param key: the operator's ``external_id_key`` in the task state store.
    :param job_id: the stored job id; ``None`` when none was stored.
    :param status: the raw status the service answered; ``None`` when nothing was read.
    :param read_at: when it was read (or when reading was given up).
    :param outcome: ``active``, ``succeeded``, ``failed``, ``not-found``, ``unknown`` or ``no-id``.
    :param reached_service: whether the request reached the service; ``None``: cannot tell.
    :param finished: whether the job finished; ``None``: cannot tell.
    :param to_validate: what must still be checked before the delivery is called done.
    :param allows: ``reconnect`` or ``collect``: what a next try does without repeating the work.
    :param failed_since: for a failure, the first read that saw the job failed.
    :param error: why the outcome stays unknown, when it does.
    :param tolerated_errors: for a succeeded job, how many errors it tolerated, when shown.
    """

    key: str
    job_id: str | None
    status: str | None
    read_at: pendulum.DateTime
    outcome: str
    reached_service: bool | None
    finished: bool | None
    to_validate: str | None
    allows: str | None
    failed_since: pendulum.DateTime | None = None
    error: str | None = None
    tolerated_errors: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """The read as stored in a decision's ``reconciliation`` entry.

        Texts are stored as given: the writer makes them safe before it builds the read.
        """
        return {
            "externalIdKey": self.key,
            "externalId": self.job_id,
            "status": self.status,
            "readAt": self.read_at.in_tz("UTC").isoformat(),
            "outcome": self.outcome,
            "reachedService": self.reached_service,
            "finished": self.finished,
            "toValidate": self.to_validate,
            "allows": self.allows,
            "failedSince": (
                None if self.failed_since is None else self.failed_since.in_tz("UTC").isoformat()
            ),
            "error": self.error,
            "toleratedErrors": self.tolerated_errors,
        }

    @classmethod
    def of(cls, stored: object, *, mask: Mask = _safe) -> Reconciliation:
        """Read a decision's ``reconciliation`` entry.

        :param stored: the entry as stored.
        :param mask: makes each stored text safe to show.
        :raises RecordError: naming the field and the value when it cannot be read.
        """
        if not isinstance(stored, Mapping):
            raise RecordError(KEY, stored, "must be an object")
        outcome = stored.get("outcome")
        if not isinstance(outcome, str) or outcome not in OUTCOMES:
            raise RecordError(f"{KEY}.outcome", outcome, f"must be one of {', '.join(OUTCOMES)}")
        allows = stored.get("allows")
        if allows != ALLOWS.get(outcome):
            wanted = ALLOWS.get(outcome)
            raise RecordError(
                f"{KEY}.allows",
                allows,
                f"must be {wanted if wanted else 'null'} for the outcome {outcome}",
            )
        return cls(
            key=_required_text(stored, "externalIdKey", mask),
            job_id=(
                _text(stored, "externalId", mask)
                if outcome == NO_ID
                else _required_text(stored, "externalId", mask)
            ),
            status=_text(stored, "status", mask),
            read_at=_instant(stored, "readAt"),
            outcome=outcome,
            reached_service=_flag(stored, "reachedService"),
            finished=_flag(stored, "finished"),
            to_validate=_text(stored, "toValidate", mask),
            allows=ALLOWS.get(outcome),
            failed_since=(
                None if stored.get("failedSince") is None else _instant(stored, "failedSince")
            ),
            error=_text(stored, "error", mask),
            tolerated_errors=_count(stored, "toleratedErrors"),
        )

    @property
    def job(self) -> str:
        """``job <id>``, or what stands for it when no id was stored."""
        return f"job {self.job_id}" if self.job_id else "a job whose id was never stored"

    def does(self) -> str:
        """What a try let run on this read does with the job."""
        if self.allows == RECONNECT:
            return f"reconnects to {self.job}, submits nothing"
        if self.allows == COLLECT:
            return f"only collects the result of {self.job}, submits nothing"
        if self.outcome == FAILED:
            return f"submits a new job ({self.job} failed)"
        if self.outcome == NOT_FOUND and self.reached_service is False:
            return f"submits a new job (the service never received {self.job})"
        return "runs the task's code"

    def answers(
        self, when: TimeText, *, action: str | None, start_at: str | None = None
    ) -> tuple[tuple[str, str], ...]:
        """The facts of the read and what follows from it: (question, answer), in order.

        :param when: how a time is written.
        :param action: the decision's stored action: retry, fail, default, run or reschedule.
        :param start_at: for a rescheduled try, when it may start, written.
        """
        status = (
            f"{self.status}, read at {when(self.read_at)}"
            if self.status is not None
            else f"not read, at {when(self.read_at)}"
        )
        if self.error:
            status += f": {self.error}"
        try_label = "This try" if action in (RUN, RESCHEDULE) else "Next try"
        return (
            ("Job", f"{self.key} = {self.job_id}" if self.job_id else f"{self.key}: none stored"),
            ("Status", status),
            ("Reached the service", self._reached()),
            ("Finished", self._finished(when)),
            ("Still to validate", self.to_validate or self._nothing_to_validate()),
            (try_label, self._next(action, start_at)),
        )

    def _nothing_to_validate(self) -> str:
        return "nothing: the job left no result to check" if self.outcome == FAILED else "nothing"

    def _reached(self) -> str:
        if self.reached_service is None:
            return "cannot tell"
        if self.reached_service:
            return f"yes: the service knows {self.job}"
        return (
            f"no, as far as the service says: it does not know {self.job} (the request may "
            "have gone to another project or location)"
        )

    def _finished(self, when: TimeText) -> str:
        if self.finished is None:
            return "cannot tell"
        if not self.finished:
            return f"no: {self.job} is still {self.status or 'active'}"
        now = f"{self.job} is {self.status}" if self.status else f"{self.job} ended"
        if self.outcome == FAILED:
            seen = f", first seen failed at {when(self.failed_since)}" if self.failed_since else ""
            return f"yes, without its result: {now}{seen}"
        return f"yes: {now}"

    def _next(self, action: str | None, start_at: str | None) -> str:
        if action == RUN:
            return f"ran: {self.does()}"
        if action == RESCHEDULE:
            return f"rescheduled to {start_at or 'the end of the backoff'}, decided again then"
        if action == "retry":
            return self.does()
        if action == "default":
            return "as Airflow's own retry settings say (on_error='default')"
        if action == "fail":
            return "none: refused, and no further try is scheduled"
        return f"as the stored action says: {action}" if action else "no action was stored"


def action_words(action: str, job: Reconciliation | None, *, start_at: str | None = None) -> str:
    """A decision's stored action in words: ``ran: reconnects to job X, submits nothing``.

    ``retry``, ``fail`` and ``default`` stay as stored, with what the next try does
    when a job was read.

    :param action: the stored action, already safe to show.
    :param job: the decision's reconciliation, if any.
    :param start_at: for a rescheduled try, when it may start, written.
    """
    if action == RUN:
        return f"ran: {job.does()}" if job else "ran"
    if action == RESCHEDULE:
        return f"rescheduled to {start_at}" if start_at else "rescheduled"
    if action == "retry" and job is not None:
        return f"retry: the next try {job.does()}"
    return action


def _required_text(stored: Mapping[str, object], name: str, mask: Mask) -> str:
    value = stored.get(name)
    if not isinstance(value, str) or not value.strip():
        raise RecordError(f"{KEY}.{name}", value, "must be a non-empty text")
    return mask(value.strip())


def _text(stored: Mapping[str, object], name: str, mask: Mask) -> str | None:
    value = stored.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise RecordError(f"{KEY}.{name}", value, "must be a non-empty text or null")
    return mask(value.strip())


def _count(stored: Mapping[str, object], name: str) -> int | None:
    value = stored.get(name)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise RecordError(f"{KEY}.{name}", value, "must be a whole number or null")
    return value


def _flag(stored: Mapping[str, object], name: str) -> bool | None:
    value = stored.get(name)
    if value is not None and not isinstance(value, bool):
        raise RecordError(f"{KEY}.{name}", value, "must be true, false or null")
    return value


def _instant(stored: Mapping[str, object], name: str) -> pendulum.DateTime:
    value = stored.get(name)
    try:
        # tz=None keeps a time without an offset naive, so it is refused below
        parsed = pendulum.parse(value, tz=None, strict=True) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, pendulum.DateTime) or parsed.tzinfo is None:
        raise RecordError(f"{KEY}.{name}", value, "must be an ISO 8601 time with an offset")
    return parsed.in_timezone("UTC")
