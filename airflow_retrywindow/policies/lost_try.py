"""A try that Airflow's scheduler failed by its reschedule race, recognised before the next one.

A try that defers, or that the retry-start check reschedules, ends its process
with success while its task instance waits. If the trigger fires, or the
reschedule date comes, before the scheduler has taken in that exit, Airflow
3.3's scheduler finds the task instance ``scheduled``, ``queued`` or
``running`` again, fails it and retries it on its own
(:mod:`airflow_retrywindow.scheduler_race`). No decision of ours hands that
retry back, so the retry-start check would take the try for one whose process
was killed, with an unknown outcome, and refuse it (``reconcile-remote``).

Such a try is recognised from what both sides kept:

* Airflow's event log holds a ``state mismatch`` entry for that very try, in
  which the executor reported it ``finished with state success`` while the task
  instance was already ``scheduled`` or ``queued`` again with the same try
  number: only a try that handed itself back waits to run again under its own
  number (a retry is scheduled under the next). A task instance found
  ``running`` is not taken: the LocalExecutor reports a try whose process was
  killed the same way;
* our stored decisions show the try handed back on purpose: the retry-start
  check rescheduled it, or it was let start (a handed-over retry, a check that let
  it run, or its window's first try) and so could defer.

The failure is then Airflow's, not the task's: the model decides the next try on
a retryable failure that ended when the scheduler failed it (the failure class
of the rescheduled decision, when there was one), and a resumable job's status is
read first as for any start. A repeat still needs ``safe_repeat``. Without the
event log entry, or when it cannot be read, nothing is recognised and the try is
decided as before. Pure, but for :func:`read_mismatches`, which reads the event
log through the gates' REST connection.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow_retrywindow import airflow_internals
from airflow_retrywindow.records import evidence
from airflow_retrywindow.records.evidence import RETRYABLE, UNKNOWN
from airflow_retrywindow.records.schema import version_problem

if TYPE_CHECKING:
    from airflow_retrywindow.timing.time_limit import TimeLimit

log = logging.getLogger(__name__)

#: the event Airflow's scheduler writes when it fails a try this way
STATE_MISMATCH = airflow_internals.STATE_MISMATCH
#: the task instance states the scheduler finds after a try handed itself back: the
#: same try waits to run again. Not ``running``: the LocalExecutor reports a try whose
#: task process was killed as finished with state success too, while it still runs
_HANDED_BACK = frozenset({"scheduled", "queued"})
#: how the try handed itself back
DEFERRED = "deferred or rescheduled itself"
RESCHEDULED = "rescheduled by the retry-start check"
_FAILURES = (UNKNOWN, evidence.TERMINAL, RETRYABLE)


@dataclass(frozen=True)
class StateMismatch:
    """One ``state mismatch`` entry of Airflow's event log.

    :param try_number: the try the scheduler failed.
    :param executor_state: what the executor reported of the try's process.
    :param found_state: the task instance's state the scheduler found instead.
    :param when: when the scheduler failed the try.
    """

    try_number: int
    executor_state: str
    found_state: str
    when: datetime

    @classmethod
    def of(cls, entry: Mapping[str, Any]) -> StateMismatch | None:
        """The entry read from the REST API, ``None`` when it is not such a mismatch."""
        extra, when, tried = entry.get("extra"), entry.get("when"), entry.get("tryNumber")
        if entry.get("event") != STATE_MISMATCH or not isinstance(extra, str):
            return None
        if not isinstance(when, datetime) or when.tzinfo is None:
            return None
        if isinstance(tried, bool) or not isinstance(tried, int):
            return None
        found = airflow_internals.state_mismatch(extra)
        if found is None:
            return None
        return cls(tried, found[0].lower(), found[1].lower(), when)

    @property
    def handed_back(self) -> bool:
        """Whether the try's process ended cleanly while its task instance waited again."""
        return self.executor_state == "success" and self.found_state in _HANDED_BACK


@dataclass(frozen=True)
class LostTry:
    """A try the scheduler failed by the race, and what the next decision takes from it.

    :param try_number: the lost try.
    :param how: :data:`DEFERRED` or :data:`RESCHEDULED`.
    :param failure: the failure class the model is given: retryable, or the class
        the rescheduled decision was about.
    :param mismatch: Airflow's record of it.
    """

    try_number: int
    how: str
    failure: str
    mismatch: StateMismatch

    @property
    def job_try(self) -> int:
        """The try whose job a resumable task reads: a try rescheduled at its start ran
        nothing, so the job is the one its reschedule was decided on, the try before's."""
        return self.try_number - 1 if self.how == RESCHEDULED else self.try_number

    @property
    def ended_at(self) -> datetime:
        """When the scheduler failed the try: the failure ended then."""
        return self.mismatch.when

    def subject(self) -> str:
        """What happened, for the decision's reason."""
        return (
            f"try {self.try_number} {self.how} and Airflow's scheduler failed it "
            f"(state mismatch: its exit was taken in after the task instance was "
            f"{self.mismatch.found_state} again, apache/airflow#67287); decided as a "
            f"{self.failure} failure before the task's code ran"
        )

    def as_dict(self) -> dict[str, Any]:
        """The evidence's ``lostTry``."""
        return {
            "tryNumber": self.try_number,
            "how": self.how,
            "failure": self.failure,
            "event": STATE_MISMATCH,
            "foundState": self.mismatch.found_state,
            "failedAt": self.mismatch.when.isoformat(),
        }


def may_be_lost(history: object, previous_try: int, *, first_of_window: bool) -> str | None:
    """How try ``previous_try`` handed itself back, if our decisions say it could have.

    :param history: the stored decisions of the task instance.
    :param previous_try: the try before the starting one.
    :param first_of_window: whether ``previous_try`` was its window's first try,
        which starts without a decision.
    :returns: :data:`RESCHEDULED`, :data:`DEFERRED`, or ``None`` when it was not let
        run, or when a later start already decided about it (a try rescheduled at its
        start starts again with the same number).
    """
    latest = history.get("latest") if isinstance(history, dict) else None
    decided_at = latest.get("tryNumber") if isinstance(latest, dict) else None
    if isinstance(decided_at, int) and decided_at > previous_try:
        return None
    if _rescheduled(history, previous_try) is not None:
        return RESCHEDULED
    if first_of_window:
        return DEFERRED
    permission = evidence.start_permission(history, previous_try)
    return DEFERRED if permission != evidence.UNDECIDED else None


def lost_try(
    history: object,
    previous_try: int,
    mismatches: Iterable[Mapping[str, Any]],
    *,
    first_of_window: bool,
) -> LostTry | None:
    """Try ``previous_try``, when the scheduler failed it by the race; else ``None``.

    :param history: the stored decisions of the task instance.
    :param previous_try: the try before the starting one.
    :param mismatches: Airflow's ``state mismatch`` entries of the event log for it.
    :param first_of_window: whether ``previous_try`` was its window's first try.
    """
    how = may_be_lost(history, previous_try, first_of_window=first_of_window)
    if how is None:
        return None
    for entry in mismatches:
        found = StateMismatch.of(entry)
        if found is None or found.try_number != previous_try or not found.handed_back:
            continue
        failure = RETRYABLE
        if how == RESCHEDULED:
            failure = str(_rescheduled(history, previous_try))
        return LostTry(previous_try, how, failure, found)
    return None


def _rescheduled(history: object, try_number: int) -> str | None:
    """The failure class the retry-start check rescheduled ``try_number`` on, if it did."""
    latest = history.get("latest") if isinstance(history, dict) else None
    if not isinstance(latest, dict) or version_problem(latest):
        return None
    if (
        latest.get("tryNumber") == try_number
        and latest.get("check") == "retry-start"
        and latest.get("action") == "reschedule"
        and latest.get("failure") in _FAILURES
    ):
        return str(latest["failure"])
    return None


def read_mismatches(
    ti: Any, try_number: int, limit: TimeLimit | None = None
) -> list[dict[str, Any]]:
    """Airflow's ``state mismatch`` entries for try ``try_number`` of ``ti``; ``[]`` if unread.

    Read through the gates' REST connection (``[retry_window] default_conn_id``).
    Not being able to read them recognises nothing: the try is decided as before.

    :param ti: the starting try's task instance.
    :param try_number: the try before it.
    :param limit: the start check's time limit, which the read shares.
    """
    from airflow_retrywindow import configuration
    from airflow_retrywindow.hooks.airflow_api import AirflowApiHook
    from airflow_retrywindow.redaction import describe_exception

    try:
        api = AirflowApiHook(
            configuration.default_conn_id(), timeout=configuration.api_timeout(), time_limit=limit
        ).get_conn()
        return api.event_logs(
            ti.dag_id,
            ti.run_id,
            ti.task_id,
            event=STATE_MISMATCH,
            try_number=try_number,
            map_index=int(getattr(ti, "map_index", -1)),
        )
    except Exception as error:
        log.warning(
            "Could not read Airflow's event log for a state mismatch of try %s (%s); "
            "it is decided as a try whose process was lost",
            try_number,
            describe_exception(error),
        )
        return []
