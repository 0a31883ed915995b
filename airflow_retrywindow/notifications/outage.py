"""Outage: a pool's outage as a notification tells it, and whether it was told already.

The retry-start check keeps each decision it takes on a retry whose pool fails
under the task state store key ``retry_window_dependency`` (see
:mod:`airflow_retrywindow.dependency.check`). A held retry (``dependency-held``) or
a held retry refused for its deadline (``deadline-infeasible``) of a pool that is
``open`` or ``recovering``, and a try that probed such a pool and failed, is an
*outage* of that pool, named by the pool and when
it began failing (``failingSince``, rounded down to the pool's round).

**Once per outage.** With no lock service, the notice of an outage is written where
every worker can read it: the Airflow Variable ``retry_window_notice_<pool>``
(:data:`NOTICE_VARIABLE`) holds the outage last told of that pool, when it began,
the latest moment it was seen open (``seenAt``) and whether a retry refused for its
deadline was told. :func:`settle` decides, from that entry and one decision,
whether to send and what to write back:

* an outage not told yet is sent, by the first task instance that holds or refuses
  a retry in it;
* during a told outage, holds, failed probes and refusals send nothing, except the
  first refusal: a missed delivery is worth its own notice. An outage
  is told at most twice: when it begins holding retries, and when it first costs
  a deadline;
* a read whose ``failingSince`` lies more than one round after the latest moment
  the told outage was seen open is a new outage, and is sent again.

``failingSince`` is the earliest failure the read still shows, so it moves later
while an outage lasts (a held retry's latest hold counts as its failure). Each
hold that reads the entry moves ``seenAt`` on when it is more than a round old, so
the outage's start, as later reads see it, stays within a round of a moment it was
seen open: a long outage is not told again. A pool that opens again while a
failure of its last outage is still in its window counts as the same outage. A
pool on-call forced open with nothing failing has no ``failingSince``: its outage
starts at each read, and a read within the longest hold (``MAX_HOLD``, an hour)
and a round of ``seenAt`` is the same outage, since its held retries read it at
least that often.

**Duplicates.** Reading and writing the entry is not atomic: task instances that
read it before the first of them has written it all send. That is bounded by the
task instances of one pool deciding within one Variable read and write (tens of
milliseconds apart), and the holds are spread over their round
(:mod:`airflow_retrywindow.dependency.admission`). An entry that cannot be read
sends (a duplicate is better than a silenced outage).

Pure: nothing here imports Airflow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pendulum

from airflow_retrywindow.dependency.admission import DEADLINE_INFEASIBLE, HOLD, PROBE, REFUSE
from airflow_retrywindow.dependency.settings import MAX_HOLD
from airflow_retrywindow.labels import UTC_SHOWN
from airflow_retrywindow.notifications.notice import Lateness, Notice
from airflow_retrywindow.records.dependency_state import OPEN, RECOVERING, DependencyRecord
from airflow_retrywindow.verdicts import DEPENDENCY_HELD

#: the Airflow Variable that holds the outage of a pool last told
NOTICE_VARIABLE = "retry_window_notice_{pool}"
#: the shape of that Variable's value this release writes and reads
NOTICE_VERSION = 1
#: how real times are written in a notification: dated, UTC
#: the pool states in which a held retry waits on an outage
_FAILING = (OPEN, RECOVERING)


@dataclass(frozen=True)
class Outage:
    """One decision of the retry-start check taken while a pool fails.

    :param pool: the pool (the dependency).
    :param state: ``open`` or ``recovering`` (``forced open by on-call`` when forced).
    :param started: when the pool began failing, as the read showed it.
    :param read_at: when the pool was read, on the API server's clock.
    :param round_seconds: the pool's round.
    :param failing: distinct task instances failing.
    :param held: task instances in a retry (held or under way) when it was read.
    :param successes: successes of the pool since the failing began.
    :param action: ``hold``, ``refuse``, or ``probe`` for a probe that failed.
    :param hold_until: when a held retry is checked again.
    :param next_probe: the start of the next round that probes.
    :param budget: the probes a round makes.
    :param since_read: whether ``started`` is only the read's time (a pool forced
        open with nothing failing).
    :param refused: whether the decision told refuses the retry: the check's
        refusal for the deadline, or the policy's refusal after a failed probe.
    """

    pool: str
    state: str
    started: pendulum.DateTime
    read_at: pendulum.DateTime
    round_seconds: int
    failing: int
    held: int
    successes: int
    action: str
    hold_until: pendulum.DateTime | None = None
    next_probe: pendulum.DateTime | None = None
    budget: int = 0
    since_read: bool = False
    refused: bool = False

    @property
    def same_within(self) -> int:
        """How long after the told outage was last seen open this one's start may lie."""
        return self.round_seconds + (MAX_HOLD if self.since_read else 0)

    @property
    def began(self) -> pendulum.DateTime:
        """When the outage began, rounded down to the pool's round: its name with the pool."""
        seconds = int(self.started.timestamp())
        return pendulum.from_timestamp(seconds - seconds % self.round_seconds, tz="UTC")

    @property
    def name(self) -> str:
        """``positions_api since 2026-12-04 14:00:00Z``: the outage's id."""
        return f"{self.pool} since {self.began.format(UTC_SHOWN)}"

    @property
    def variable(self) -> str:
        """The Airflow Variable that says whether this pool's outage was told."""
        return NOTICE_VARIABLE.format(pool=self.pool)

    def line(self) -> str:
        """The outage in one sentence, for a message's body."""
        return (
            f"pool {self.pool} is {self.state}, failing since {_written(self.started)}: "
            f"{self.failing} task instances failing, {self.held} of them in a retry (held "
            f"or under way), {self.successes} successes since (read at "
            f"{_written(self.read_at)})"
        )


def outage_of(record: object, try_number: int | None) -> Outage | None:
    """The outage the retry-start check's ``record`` was taken in, or ``None``.

    ``None`` when the record cannot be read, is not this try's, neither holds nor
    refuses, or was taken on a pool that is not failing (closed, or not read). A
    probe's record is an outage only once the probe has failed: the callback's try is
    that probe.

    :param record: the value of the task state store key ``retry_window_dependency``,
        or the record read from it.
    :param try_number: the try the callback is about.
    """
    kept = record if isinstance(record, DependencyRecord) else DependencyRecord.of(record)
    if kept is None or kept.try_number != try_number:
        return None
    if kept.action not in (HOLD, REFUSE, PROBE) or kept.state not in _FAILING:
        return None
    return Outage(
        pool=kept.pool,
        state=f"forced {kept.state} by on-call" if kept.forced else kept.state,
        # forced open by on-call with nothing failing: the outage starts at the read
        started=kept.failing_since or kept.read_at,
        read_at=kept.read_at,
        round_seconds=kept.round_seconds,
        failing=kept.failing_tasks,
        held=kept.held,
        successes=kept.successes,
        action=kept.action,
        hold_until=kept.hold_until,
        next_probe=kept.next_probe,
        budget=kept.budget,
        since_read=kept.failing_since is None,
        refused=kept.action == REFUSE,
    )


def dependency_notice(
    record: DependencyRecord,
    task_id: str,
    outage: Outage | None,
    *,
    deadline: pendulum.DateTime | None = None,
    work_seconds: int | None = None,
) -> Notice:
    """The notice for a retry the retry-start check held or refused on its pool.

    :param record: the check's record for this try (action ``hold`` or ``refuse``).
    :param task_id: the task it was kept for.
    :param outage: the pool's outage, when the pool was read failing.
    :param deadline: the task's deadline, to tell how late a refused retry would end.
    :param work_seconds: one attempt and its validation, in seconds.
    """
    refused = record.action == REFUSE
    pool = record.pool
    reason = record.reason or record.decision
    if refused:
        outcome = (
            f"retry refused: it was held while pool {pool} failed, past its latest start; "
            "the task has failed and no further try is scheduled"
        )
    else:
        until = record.hold_until
        outcome = (
            f"retry held: the same try waits for pool {pool} and is checked again at "
            f"{_written(until) if until else 'the end of its hold'}; no attempt is spent"
        )
    read_at = outage.read_at if outage else record.read_at
    return Notice(
        task_id=task_id,
        decision=DEADLINE_INFEASIBLE if refused else DEPENDENCY_HELD,
        reason=reason,
        outcome=outcome,
        refused=refused,
        status=_status(pool, outage, refused=refused),
        lateness=_lateness(read_at, deadline, work_seconds) if refused else None,
        try_number=record.try_number,
    )


@dataclass(frozen=True)
class Settled:
    """Whether a decision taken in an outage is sent, and what the notice entry becomes.

    :param send: whether this task instance sends the notice.
    :param entry: what to write to the notice Variable, ``None`` to leave it.
    :param why: why it is sent or not, for the log.
    """

    send: bool
    entry: dict[str, Any] | None
    why: str


def settle(kept: object, outage: Outage, *, by: str) -> Settled:
    """Whether ``outage``'s decision is told, given the notice entry ``kept``.

    :param kept: the notice Variable's value, as read (``None`` when unset).
    :param outage: the outage the decision was taken in.
    :param by: the task instance deciding, as the entry names who told.
    """
    told = _told(kept, outage.pool)
    if told is None or outage.started > told.seen_at.add(seconds=outage.same_within):
        entry = _entry(outage, by=by, deadline_told=outage.refused)
        return Settled(True, entry, f"outage {outage.name} was not told yet")
    seen_at = max(told.seen_at, outage.read_at)
    if outage.refused and not told.deadline_told:
        entry = {**told.entry, "seenAt": seen_at.isoformat(), "deadlineTold": True}
        return Settled(True, entry, f"the first refusal in {told.name}")
    stale = outage.read_at > told.seen_at.add(seconds=outage.round_seconds)
    moved = {**told.entry, "seenAt": seen_at.isoformat()} if stale else None
    return Settled(False, moved, f"outage {told.name} was told by {told.by}")


@dataclass(frozen=True)
class _Told:
    entry: dict[str, Any]
    name: str
    by: str
    seen_at: pendulum.DateTime
    deadline_told: bool


def _told(kept: object, pool: str) -> _Told | None:
    """The outage the entry says was told, or ``None`` when it says nothing readable."""
    if not isinstance(kept, Mapping) or kept.get("version") != NOTICE_VERSION:
        return None
    seen_at = _time(kept.get("seenAt"))
    if kept.get("pool") != pool or seen_at is None:
        return None
    return _Told(
        entry=dict(kept),
        name=str(kept.get("outage", pool)),
        by=str(kept.get("by", "another task instance")),
        seen_at=seen_at,
        deadline_told=kept.get("deadlineTold") is True,
    )


def _entry(outage: Outage, *, by: str, deadline_told: bool) -> dict[str, Any]:
    return {
        "version": NOTICE_VERSION,
        "pool": outage.pool,
        "outage": outage.name,
        "failingSince": outage.started.isoformat(),
        "seenAt": outage.read_at.isoformat(),
        "deadlineTold": deadline_told,
        "by": by,
    }


def _status(pool: str, outage: Outage | None, *, refused: bool) -> str:
    if outage is None:
        return (
            f"confirmed: pool {pool} could not be read, so its state is unknown; "
            "next: read the reason, check the pool's service, then clear the task if the "
            "delivery still matters."
        )
    if outage.next_probe is not None:
        evidence = f"the probe round at {_written(outage.next_probe)}"
    elif outage.hold_until is not None:
        evidence = (
            f"the pool's next read, when this retry comes back at {_written(outage.hold_until)}"
        )
    else:
        evidence = "the pool's next read, by the next of its held retries to come back"
    after = (
        "this task is not retried; clear it once the pool recovers if the delivery matters"
        if refused
        else f"the held retries are probed each round ({outage.budget} a round) and "
        "released in waves once one succeeds"
    )
    return (
        f"confirmed: {outage.line()}; unknown: when the pool's service recovers; "
        f"next: {after}; next evidence: {evidence}."
    )


def _lateness(
    read_at: pendulum.DateTime | None,
    deadline: pendulum.DateTime | None,
    work_seconds: int | None,
) -> Lateness | None:
    """How late an attempt started when the retry was refused would end."""
    if read_at is None or deadline is None or work_seconds is None:
        return None
    finish = read_at.add(seconds=work_seconds)
    return Lateness(
        finish=_written(finish),
        deadline=_written(deadline),
        seconds=max(int((finish - deadline).total_seconds()), 0),
    )


def _time(value: object) -> pendulum.DateTime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = pendulum.parse(value)
    except ValueError:
        return None
    return parsed.in_timezone("UTC") if isinstance(parsed, pendulum.DateTime) else None


def _written(when: pendulum.DateTime) -> str:
    return when.in_timezone("UTC").format(UTC_SHOWN)
