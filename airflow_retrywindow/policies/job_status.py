"""What one read of a remote job's status tells the model, and nothing more.

A resumable-job operator (Airflow's ``ResumableJobMixin``) keeps its remote job's
id in the task state store and answers three questions about a status: is the
job active, did it succeed, and (by elimination) did it fail. The gate asks them
once, through the operator's own methods, to turn an unknown outcome into a
known one. This module maps the answer onto the model without loosening it:

* an active job is ``running``: the next try reconnects to it and submits nothing;
* a succeeded job is ``succeeded``: the next try only collects its result, and the
  output still needs validation;
* a failed job (a status the operator's words say is a failure, see
  :mod:`~airflow_retrywindow.policies.status_words`) is a confirmed, ``retryable``
  failure that ended no later than the first read that saw it: the model decides
  backoff, deadline, attempts and ``safe_repeat`` as for any retryable failure. So
  is a job the service says it never received, when the operator declares that
  status (``never_submitted_statuses``);
* anything else stays ``unknown``: a status nobody declared, a job the service does
  not know (it may have gone to another project or location), a read that failed,
  no stored id.

The three questions of a lost confirmation are kept apart in the record: did the
request reach the service, did the job finish, and what still needs validation.
Pure: no Airflow import.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any

import pendulum

from airflow_retrywindow import airflow_internals
from airflow_retrywindow.model import TaskState
from airflow_retrywindow.policies.status_words import NO_WORDS, StatusWords, normal_status
from airflow_retrywindow.records import reconciliation
from airflow_retrywindow.records.reconciliation import ALLOWS, Reconciliation, stored_job_id
from airflow_retrywindow.redaction import safe_text

#: statuses saying the service does not know the job id: not proof it never ran
NOT_FOUND_STATUSES = frozenset({"not_found", "notfound", "missing", "unknown_job"})
#: the longest status text kept
_MAX_TEXT = 200


class JobOutcome(str, Enum):
    """What one status read found."""

    ACTIVE = reconciliation.ACTIVE
    SUCCEEDED = reconciliation.SUCCEEDED
    FAILED = reconciliation.FAILED
    NOT_FOUND = reconciliation.NOT_FOUND
    #: kept apart while deciding; stored as :data:`NOT_FOUND` (see :attr:`stored`)
    NEVER_SUBMITTED = "never-submitted"
    UNKNOWN = reconciliation.UNKNOWN
    NO_ID = reconciliation.NO_ID

    def __str__(self) -> str:
        return self.value

    @property
    def stored(self) -> str:
        """The outcome as stored: a job never submitted is one the service does not know."""
        return JobOutcome.NOT_FOUND.value if self is JobOutcome.NEVER_SUBMITTED else self.value

    @property
    def confirms_failure(self) -> bool:
        """Whether the job is known to have ended, or never started, without its result."""
        return self is JobOutcome.FAILED or self is JobOutcome.NEVER_SUBMITTED

    @property
    def model_state(self) -> TaskState:
        """The state the model is given for the attempt behind this job."""
        return _STATES[self]


_STATES = {
    JobOutcome.ACTIVE: TaskState.RUNNING,
    JobOutcome.SUCCEEDED: TaskState.SUCCEEDED,
    JobOutcome.FAILED: TaskState.RETRYABLE,
    JobOutcome.NOT_FOUND: TaskState.UNKNOWN,
    JobOutcome.NEVER_SUBMITTED: TaskState.RETRYABLE,
    JobOutcome.UNKNOWN: TaskState.UNKNOWN,
    JobOutcome.NO_ID: TaskState.UNKNOWN,
}


def classify_status(
    status: str, *, active: bool, succeeded: bool, words: StatusWords = NO_WORDS
) -> JobOutcome:
    """The outcome of a status, from the operator's own predicates first.

    :param status: the raw status the operator's ``get_job_status`` returned.
    :param active: what the operator's ``is_job_active`` said of it.
    :param succeeded: what the operator's ``is_job_succeeded`` said of it.
    :param words: the statuses that confirm a failure, or that the job was never
        submitted, for this operator: declared or built in, never guessed.
    """
    if active and succeeded:
        return JobOutcome.UNKNOWN  # the operator contradicts itself: trust neither
    if active:
        return JobOutcome.ACTIVE
    if succeeded:
        return JobOutcome.SUCCEEDED
    normal = normal_status(status)
    if normal in words.never_submitted:
        return JobOutcome.NEVER_SUBMITTED
    if normal in NOT_FOUND_STATUSES:
        return JobOutcome.NOT_FOUND
    if normal in words.failed:
        return JobOutcome.FAILED
    return JobOutcome.UNKNOWN


@dataclass(frozen=True)
class JobRead:
    """One read of a remote job's status, kept as evidence.

    :param key: the operator's ``external_id_key`` in the task state store.
    :param job_id: the stored job id, ``None`` when there was none to read.
    :param outcome: what the read found.
    :param read_at: when it was read (or tried).
    :param status: the raw status, when the read answered.
    :param failed_since: for a failure, the first read that saw this job failed;
        the failure ended no later than that.
    :param why: for an unknown outcome, why it stays unknown (safe to store).
    :param tolerated_errors: for a succeeded job, how many errors it tolerated
        (BigQuery's non-fatal ``errors`` of a DONE job), when the operator shows them.
    :param would: for a job whose status is known but whose id is not this try's to
        use (another run, try window or DAG version), what the mixin would do with it:
        ``"reconnect"`` or ``"collect"``. Never stored.
    """

    key: str
    job_id: str | None
    outcome: JobOutcome
    read_at: datetime
    status: str | None = None
    failed_since: datetime | None = None
    why: str | None = None
    tolerated_errors: int | None = None
    would: str | None = None

    @property
    def model_state(self) -> TaskState:
        """The state the model is given for the attempt behind this job."""
        return self.outcome.model_state

    @property
    def finished_at(self) -> datetime | None:
        """When the attempt ended, no later than: ``None`` while it is not confirmed."""
        if self.outcome.confirms_failure:
            return self.failed_since or self.read_at
        if self.outcome is JobOutcome.SUCCEEDED:
            return self.read_at
        return None

    @property
    def allows(self) -> str | None:
        """``"reconnect"`` or ``"collect"``: what a next try does without repeating the work."""
        return ALLOWS.get(self.outcome.stored)

    @property
    def reached_service(self) -> bool | None:
        """Did the request reach the service? ``None`` when the read cannot tell."""
        if self.outcome is JobOutcome.NEVER_SUBMITTED:
            return False  # the operator declared this status to mean so
        if self.outcome in (JobOutcome.NOT_FOUND, JobOutcome.UNKNOWN, JobOutcome.NO_ID):
            return None  # not found may be another project or location: not proof
        return True

    @property
    def finished(self) -> bool | None:
        """Did the job finish? ``None`` when the read cannot tell."""
        if self.outcome is JobOutcome.ACTIVE:
            return False
        if self.outcome in (JobOutcome.SUCCEEDED, JobOutcome.FAILED):
            return True
        return None

    @property
    def to_validate(self) -> str | None:
        """What must still be checked before the delivery is called done."""
        job = f"job {self.job_id}"
        if self.outcome is JobOutcome.SUCCEEDED and self.tolerated_errors:
            return (
                f"the output of {job}: it ended DONE with {self.tolerated_errors} errors "
                "tolerated, so rows may be missing"
            )
        if self.outcome is JobOutcome.SUCCEEDED:
            return f"the output of {job}: DONE is not a correct result"
        if self.outcome is JobOutcome.ACTIVE:
            return f"the output of {job} once it ends"
        if self.outcome is JobOutcome.NEVER_SUBMITTED:
            return f"that no job ran under another id, project or location than {job}"
        if self.outcome is JobOutcome.NOT_FOUND:
            return f"whether {job} ran under another project or location, and what it wrote"
        if self.outcome in (JobOutcome.UNKNOWN, JobOutcome.NO_ID):
            return "whether any job of the try ran, and what it wrote"
        return None

    def describe(self) -> str:
        """One clause for the decision's reason."""
        job = f"job {self.job_id}"
        texts = {
            JobOutcome.ACTIVE: f"{job} is {self.status}: the next try reconnects to {job}, "
            "submits nothing",
            JobOutcome.SUCCEEDED: f"{job} is {self.status}{self._tolerated()}: the next try "
            "only collects its result; the output still needs validation",
            JobOutcome.FAILED: f"{job} is {self.status}: a confirmed failure",
            JobOutcome.NOT_FOUND: f"{job} is {self.status}: the service does not know it, "
            "which does not prove it never ran (another project or location looks the same), "
            "so the outcome stays unknown; list the status in never_submitted_statuses if it "
            "proves the job was never submitted",
            JobOutcome.NEVER_SUBMITTED: f"{job} is {self.status}: the service never received "
            "it (never_submitted_statuses)",
            JobOutcome.UNKNOWN: f"the status of {job} stays unknown ({self.why})",
            JobOutcome.NO_ID: f"nothing to reconcile: {self.why}",
        }
        return texts[self.outcome]

    def _tolerated(self) -> str:
        return f" with {self.tolerated_errors} errors tolerated" if self.tolerated_errors else ""

    def as_dict(self) -> dict[str, Any]:
        """The read as stored in the evidence; ids and statuses are masked text."""
        return Reconciliation(
            key=self.key,
            job_id=None if self.job_id is None else stored_job_id(self.job_id),
            status=_text(self.status),
            read_at=pendulum.instance(self.read_at),
            outcome=self.outcome.stored,
            reached_service=self.reached_service,
            finished=self.finished,
            to_validate=_text(self.to_validate),
            allows=self.allows,
            failed_since=(
                None if self.failed_since is None else pendulum.instance(self.failed_since)
            ),
            error=self.why,
            tolerated_errors=self.tolerated_errors,
        ).as_dict()


def _text(value: str | None) -> str | None:
    return None if value is None else safe_text(value, limit=_MAX_TEXT)


def tolerated_errors(task: Any) -> int | None:
    """How many errors the job an operator just read tolerated, when it shows them.

    BigQuery's operator keeps the job it read (``_job``); a DONE job's ``errors``
    are the errors it tolerated without failing. Other operators show none:
    ``None``.
    """
    errors = getattr(airflow_internals.bigquery_job(task), "errors", None)
    return len(errors) if isinstance(errors, list) else None


def first_seen_failed(history: object, job_id: str) -> datetime | None:
    """The earliest stored read that saw ``job_id`` failed or never submitted, if any.

    A failure ended no later than the first read that saw it; reading it again
    later must not move its end, or a backoff would never run out. Ids are compared
    as they are stored (:func:`~airflow_retrywindow.records.reconciliation.stored_job_id`).
    """
    decisions = history.get("decisions") if isinstance(history, Mapping) else None
    wanted = stored_job_id(job_id)
    seen: list[datetime] = []
    for entry in decisions if isinstance(decisions, list) else []:
        read = entry.get("reconciliation") if isinstance(entry, Mapping) else None
        if not isinstance(read, Mapping) or read.get("externalId") != wanted:
            continue
        if not _confirmed_failure(read):
            continue
        try:
            seen.append(pendulum.parse(str(read.get("failedSince") or read.get("readAt"))))  # type: ignore[arg-type]
        except (ValueError, TypeError):
            continue
    return min(seen) if seen else None


def _confirmed_failure(read: Mapping[str, Any]) -> bool:
    """Whether a stored read confirmed a failure: failed, or not found and never submitted."""
    outcome = read.get("outcome")
    if outcome == JobOutcome.FAILED.value:
        return True
    return outcome == JobOutcome.NOT_FOUND.value and read.get("reachedService") is False
