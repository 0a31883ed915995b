"""Read a resumable job's status through its operator, once, before deciding.

Airflow 3.3's ``ResumableJobMixin`` keeps the remote job's id in the task state
store under the operator's ``external_id_key``, and on the next try asks the
remote system for that job's status before it submits anything. The gate asks the
same question first, through the operator's own ``get_job_status``,
``is_job_active`` and ``is_job_succeeded``, so the model decides on what the job
really did. The read never submits, cancels or polls; it has its own timeout,
and any error leaves the outcome unknown (fail closed). A thread cannot be
stopped, so the read is handed nothing of the try's it could change: a deep copy
of the operator without its hooks and a read-only view of the context
(:mod:`~airflow_retrywindow.policies.read_only`). What ``get_job_status`` sets on
itself, and whatever a read abandoned at its timeout does later, stays off the try.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pendulum

from airflow_retrywindow.policies.job_status import (
    JobOutcome,
    JobRead,
    classify_status,
    first_seen_failed,
    tolerated_errors,
)
from airflow_retrywindow.policies.read_only import ReadOnlyContext, detached_copy
from airflow_retrywindow.policies.status_words import StatusWords, built_in_words
from airflow_retrywindow.records.evidence import EVIDENCE_KEY
from airflow_retrywindow.records.try_start import TRY_START_KEY, TryStart
from airflow_retrywindow.records.work_scope import WorkScope
from airflow_retrywindow.redaction import describe_exception

log = logging.getLogger(__name__)

#: the status read's own timeout when the DAG author sets none
DEFAULT_STATUS_READ_TIMEOUT = timedelta(seconds=30)


def resumable(task: Any) -> bool:
    """Whether ``task`` keeps its remote job's id for the next try (a durable resumable job)."""
    from airflow_retrywindow.version_compat import ResumableJobMixin

    if ResumableJobMixin is None:  # an Airflow before 3.3 (AIP-103) has no such operators
        return False
    return isinstance(task, ResumableJobMixin) and bool(getattr(task, "durable", True))


@dataclass(frozen=True)
class StatusReader:
    """Reads the status of a resumable task's stored job, once, within ``timeout``.

    :param timeout: how long the read may take; later it counts as unknown.
    :param failed_statuses: statuses that confirm a failure for these operators, beside
        the built-in ones of a known operator class.
    :param never_submitted_statuses: statuses saying the service never received the job.
    """

    timeout: timedelta = DEFAULT_STATUS_READ_TIMEOUT
    failed_statuses: tuple[str, ...] = ()
    never_submitted_statuses: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        timeout: timedelta,
        failed_statuses: Iterable[str],
        never_submitted_statuses: Iterable[str] = (),
    ) -> StatusReader:
        """Check the arguments the DAG author gave the policy."""
        if not timedelta(0) < timeout <= timedelta(minutes=10):
            raise ValueError(
                f"status_read_timeout must be more than 0 s and at most 600 s, got {timeout}; "
                "the read runs while the gate decides, so keep it short"
            )
        failed = _statuses("failed_statuses", failed_statuses)
        never = _statuses("never_submitted_statuses", never_submitted_statuses)
        both = sorted(StatusWords.of(failed).failed & StatusWords.of(never).failed)
        if both:
            raise ValueError(
                f"failed_statuses and never_submitted_statuses both list {both!r}: a status "
                "says one or the other"
            )
        return cls(timeout=timeout, failed_statuses=failed, never_submitted_statuses=never)

    def words(self, task: Any) -> StatusWords:
        """What ``task``'s statuses mean: its class's built-in words and the declared ones."""
        declared = StatusWords.of(self.failed_statuses, self.never_submitted_statuses)
        return built_in_words(task) | declared

    def read(
        self, task: Any, context: Mapping[str, Any], failed_try: int, scope: WorkScope
    ) -> JobRead:
        """The status of the job that try ``failed_try`` left behind.

        :param task: the operator (a ``ResumableJobMixin``).
        :param context: the task context of the try that decides.
        :param failed_try: the try whose outcome is being reconciled.
        :param scope: the run, try window and work unit of the try that decides: a job
            stored in another is neither reconnected to nor collected.
        """
        key = str(task.external_id_key)
        store = context["task_state_store"]
        job_id = store.get(key)
        started = TryStart.of(store.get(TRY_START_KEY))
        unread = self._unreadable(job_id, started, failed_try)
        if unread is not None or started is None:
            return JobRead(key, _id_text(job_id), JobOutcome.NO_ID, pendulum.now("UTC"), why=unread)
        return self._read(task, context, job_id, scope.differs(started.stored_in(job_id)))

    def read_at_start(
        self, task: Any, context: Mapping[str, Any], scope: WorkScope, *, first_of_window: bool
    ) -> JobRead | None:
        """What the mixin will do with the stored job, in a try that starts with a decision.

        A decided retry, or the first try of a window (a clear), runs the mixin, which
        reconnects to a stored job that is active, collects one that succeeded, and
        submits otherwise. ``None`` when no id is stored: the try submits.

        :param scope: the starting try's run, try window and work unit.
        :param first_of_window: a person's clear opened this window: a job stored
            before it may be taken over when it is of the same run and work unit.
        """
        store = context["task_state_store"]
        job_id = store.get(str(task.external_id_key))
        if job_id in (None, ""):
            return None
        started = TryStart.of(store.get(TRY_START_KEY))
        stored_in = started.stored_in(job_id) if started is not None else None
        problem = (
            scope.same_work(stored_in)
            if first_of_window and stored_in is not None
            else scope.differs(stored_in)
        )
        return self._read(task, context, job_id, problem)

    def _read(
        self, task: Any, context: Mapping[str, Any], job_id: object, out_of_scope: str | None
    ) -> JobRead:
        key = str(task.external_id_key)
        read_at = pendulum.now("UTC")
        try:
            # a detached copy reads, in a read-only view of the context: what get_job_status
            # sets stays off the try (BigQuery's keeps the job it read as its job_id, from
            # which the try's submit_job would derive its id), and a read abandoned at its
            # timeout has nothing of the try's left to change
            reader = detached_copy(task)
            status = self._status(reader, job_id, ReadOnlyContext(context, reader))
            outcome = classify_status(
                status,
                active=bool(reader.is_job_active(status)),
                succeeded=bool(reader.is_job_succeeded(status)),
                words=self.words(task),
            )
        except Exception as error:
            log.warning("Could not read the status of job %s: %s", job_id, error)
            return JobRead(key, str(job_id), JobOutcome.UNKNOWN, read_at, why=_why(error))
        would = JobRead(key, str(job_id), outcome, read_at).allows
        if would is not None and out_of_scope is not None:
            # the mixin would take another window's or DAG version's work as this try's
            why = f"the mixin would {would} job {job_id} ({status}), but {out_of_scope}"
            return JobRead(
                key, str(job_id), JobOutcome.UNKNOWN, read_at, status=status, why=why, would=would
            )
        since = None
        if outcome.confirms_failure:
            store = context["task_state_store"]
            since = first_seen_failed(store.get(EVIDENCE_KEY), str(job_id))
        return JobRead(
            key,
            str(job_id),
            outcome,
            read_at,
            status=status,
            failed_since=since,
            why=None if outcome is not JobOutcome.UNKNOWN else _unclassified(status),
            tolerated_errors=tolerated_errors(reader) if outcome is JobOutcome.SUCCEEDED else None,
        )

    @staticmethod
    def _unreadable(job_id: object, started: TryStart | None, failed_try: int) -> str | None:
        """Why there is no job to read for ``failed_try``, or ``None`` when there is."""
        if job_id in (None, ""):
            return "no job id is stored, so a job may have been submitted whose id was never kept"
        if started is None or started.try_number != failed_try:
            return f"try {failed_try} left no record of the job id it started with"
        if started.expects == "submit" and started.job_id == str(job_id):
            return (
                f"try {failed_try} stored no new job id: it may have submitted a job whose id "
                "was never kept"
            )
        return None

    def _status(self, task: Any, job_id: object, context: Mapping[str, Any]) -> str:
        # a thread, so a hanging service cannot hold the decision past the timeout
        pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="retry-window-read")
        try:
            future = pool.submit(task.get_job_status, job_id, context)
            try:
                status = future.result(timeout=self.timeout.total_seconds())
            except concurrent.futures.TimeoutError:
                raise TimeoutError(
                    f"no status within {self.timeout.total_seconds():g} s (status_read_timeout)"
                ) from None
        finally:
            pool.shutdown(wait=False)
        if not isinstance(status, str):
            raise TypeError(f"get_job_status returned {type(status).__name__}, not a status string")
        return status


def _statuses(name: str, given: Iterable[str]) -> tuple[str, ...]:
    listed = tuple((given,) if isinstance(given, str) else given)
    if not all(isinstance(s, str) and s.strip() for s in listed):
        raise ValueError(f"{name} must be a list of non-empty status strings, got {listed!r}")
    return listed


def _id_text(job_id: object) -> str | None:
    return None if job_id in (None, "") else str(job_id)


def _why(error: BaseException) -> str:
    return f"the read failed: {describe_exception(error)}"


def _unclassified(status: str) -> str:
    return (
        f"status {status!r} is neither active nor succeeded for the operator, and not a "
        "failure the operator's words list; add it to failed_statuses if it confirms one"
    )
