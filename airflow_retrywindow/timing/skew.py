"""One clock: how far this worker's clock is from the API server's, and what to do about it.

Airflow's API server keeps the times a decision is measured against: a try's
end, the data interval a deadline starts from. A worker whose clock runs behind
it by X sees X more seconds before the deadline than there are; one whose clock
runs ahead sees a backoff end X seconds early. So the retry policy and the gate
measure the difference on each decision, from the ``Date`` of an answer of the
API server, and use it:

* the ``Date`` is a whole second, and the answer took time: a request sent at
  local ``t0`` and answered at ``t1`` with ``Date: D`` puts the server's clock
  minus this worker's (the *offset*) within ``[D - t1, D + 1 - t0]``
  (:meth:`ClockOffset.measured`). A server may also send a ``Date`` it noted a
  little earlier (uvicorn, under Airflow's API server, renews it once a second
  from its event loop), so the upper bound allows one second more; a ``Date``
  older still can only make the server look further behind than it is, and
  several answers together (:meth:`ClockOffset.combined`) keep the freshest;
* when that whole interval lies beyond the tolerance, on either side, the clocks
  disagree too much to decide: :meth:`ClockOffset.check` raises
  :class:`~airflow_retrywindow.exceptions.ClockError` saying which clock runs
  ahead and by about how much;
* within it, nobody knows which clock is right: "now" is this worker's, or the
  server's somewhere in ``local now + [low, high]``. The decision is taken at the
  earliest and the latest of those (:meth:`ClockOffset.possible_nows`) and the
  stricter kept (:func:`strictest`): a refusal over a hold, a hold over a wait, a
  wait over a retry now, the later end of a wait over the earlier
  (:func:`decide_at_both_ends`, the one loop the retry policy, the retry-start
  check and the gate all decide through). Each part of a
  decision moves one way with "now" (a deadline only comes nearer, an observation
  only ages, a backoff only runs out), so no "now" between the two can allow more than the
  stricter does, and the decision is never looser than either clock's alone.

Pure: no Airflow, no network.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

import pendulum

from airflow_retrywindow.exceptions import ClockError
from airflow_retrywindow.timing.clock import require_aware
from airflow_retrywindow.verdicts import ALLOWS_NOW, WAITING_RANKS, verdict

T = TypeVar("T")

#: the resolution of an HTTP ``Date`` header
DATE_RESOLUTION = timedelta(seconds=1)
#: how long before it answers a server may have noted the ``Date`` it sends: uvicorn
#: renews its ``Date`` once a second
DATE_LAG = timedelta(seconds=1)
#: how many more times a server is asked before this worker's clock is found ahead of
#: it: uvicorn renews its ``Date`` every tenth turn of its event loop, seconds late on a
#: busy server, whose answers then make this worker look ahead
CONFIRMATIONS = 2
#: the pause before asking again: longer than a server takes to renew its Date
CONFIRMATION_PAUSE = 1.2


@dataclass(frozen=True)
class ClockOffset:
    """The API server's clock minus this worker's, known to lie within ``low..high``.

    :param low: the smallest offset the measurement allows.
    :param high: the largest offset the measurement allows.
    :param source: what was asked, e.g. the API server's URL (no credentials).
    """

    low: timedelta
    high: timedelta
    source: str

    @classmethod
    def measured(
        cls, sent: datetime, received: datetime, server_date: datetime, source: str
    ) -> ClockOffset:
        """The offset one answer bounds.

        :param sent: this worker's clock when the request was sent.
        :param received: this worker's clock when the answer arrived.
        :param server_date: the answer's ``Date``: the server's clock, a whole second.
        :param source: what was asked, for messages.
        """
        start = require_aware(sent, "sent")
        end = require_aware(received, "received")
        date = require_aware(server_date, "server_date")
        if end < start:
            raise ClockError(
                f"this worker's clock went back by {(start - end).total_seconds():.3f} s "
                f"while it asked {source}; its time cannot be trusted"
            )
        return cls(low=date - end, high=date + DATE_RESOLUTION + DATE_LAG - start, source=source)

    @classmethod
    def same_clock(cls, source: str) -> ClockOffset:
        """No offset: the server runs in this process, on this clock."""
        return cls(low=timedelta(0), high=timedelta(0), source=source)

    def combined(self, other: ClockOffset) -> ClockOffset:
        """What this measurement and a later one of the same server say together.

        Every lower bound holds (a ``Date`` noted early only lowers it), so the
        largest is kept; an upper bound holds only if its ``Date`` was fresh, so the
        largest, the freshest, is kept too: a late ``Date`` never makes this worker's
        clock look ahead.

        :param other: another measurement of the same server.
        """
        return ClockOffset(max(self.low, other.low), max(self.high, other.high), self.source)

    @property
    def about(self) -> float:
        """The middle of the interval, in seconds: the best single guess."""
        return ((self.low + self.high) / 2).total_seconds()

    def check(self, tolerance: timedelta) -> ClockOffset:
        """This offset, if the clocks may agree within ``tolerance``; else a ``ClockError``.

        Beyond means the whole interval lies outside ``[-tolerance, +tolerance]``:
        the measurement leaves no doubt that the clocks disagree by more.

        :param tolerance: how far the clocks may disagree.
        """
        if self.low > tolerance:
            ahead, behind, least = f"the API server's ({self.source})", "this worker's", self.low
        elif self.high < -tolerance:
            ahead, behind, least = "this worker's", f"the API server's ({self.source})", -self.high
        else:
            return self
        raise ClockError(
            f"clock skew: {ahead} clock runs about {abs(self.about):.0f} s ahead of "
            f"{behind} (at least {least.total_seconds():.1f} s; between "
            f"{self.low.total_seconds():+.1f} and {self.high.total_seconds():+.1f} s, server "
            f"minus worker), more than the tolerance of {tolerance.total_seconds():g} s "
            "([retry_window] clock_skew_tolerance); no time on this worker can be trusted, so "
            "nothing is decided. Synchronise both clocks (NTP) and decide again"
        )

    def possible_nows(self, local: datetime) -> tuple[pendulum.DateTime, ...]:
        """The earliest and the latest "now" either clock may mean, earlier first: this
        worker's own, or the server's at either end of the interval; one when they
        are all the same.

        :param local: this worker's "now".
        """
        now = require_aware(local, "local")
        earliest = now + min(self.low, timedelta(0))
        latest = now + max(self.high, timedelta(0))
        return (earliest,) if earliest == latest else (earliest, latest)

    def nearest(self, offset: timedelta) -> timedelta:
        """The offset within ``low..high`` nearest to ``offset``.

        A time this worker noted (when an answer arrived) is moved onto the server's
        clock by it: whichever "now" is tried, the answer's arrival stays where the
        measurement puts it, never after the server's own times in that answer.
        """
        return min(max(offset, self.low), self.high)

    def as_dict(self) -> dict[str, Any]:
        """The measurement for a record: seconds, server minus worker."""
        return {
            "source": self.source,
            "offsetLow": round(self.low.total_seconds(), 3),
            "offsetHigh": round(self.high.total_seconds(), 3),
        }


def server_date(value: str | None, source: str) -> pendulum.DateTime:
    """An HTTP ``Date`` header as an aware UTC time, or a ``ClockError`` naming ``source``.

    :param value: the header, e.g. ``"Thu, 03 Dec 2026 13:21:29 GMT"``; ``None`` if absent.
    :param source: what answered, for the message.
    """
    if not value:
        raise ClockError(
            f"{source} answered without a Date header, so its clock cannot be compared "
            "with this worker's; nothing is decided"
        )
    try:
        parsed = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        shown = value[:60]
        raise ClockError(f"{source} answered with a Date header that is no HTTP date: {shown!r}")
    return pendulum.instance(parsed).in_timezone("UTC")


def confirmed_ahead(
    found: ClockOffset,
    again: Callable[[], ClockOffset],
    tolerance: timedelta,
    left: Callable[[], float],
) -> ClockOffset:
    """``found``, or, when it puts this worker's clock ahead by more than ``tolerance``,
    that verdict confirmed: the server is asked ``again`` after a pause, up to
    :data:`CONFIRMATIONS` times while ``left()`` seconds allow, and every answer is
    taken together (a late ``Date`` only ever makes this worker look ahead).

    :param again: measures the server's clock once more.
    :param left: the seconds the measurement may still take.
    """
    for _ in range(CONFIRMATIONS):
        if found.high >= -tolerance or left() <= CONFIRMATION_PAUSE:
            break
        # not time.sleep: an Event's wait keeps working under a faked clock (faketime)
        threading.Event().wait(CONFIRMATION_PAUSE)
        found = found.combined(again())
    return found


def decide_at_both_ends(
    clock: ClockOffset | None,
    decide: Callable[[pendulum.DateTime, timedelta], T],
    keep: Callable[[Sequence[T]], T],
) -> T:
    """The decision at the earliest and the latest possible "now", the stricter kept.

    Each "now" comes with the shift that moves the times this worker noted onto the
    server's clock (:meth:`ClockOffset.nearest`); this worker's own "now", unshifted,
    when the clock was not measured.

    :param clock: the measured offset, already checked against the tolerance; ``None``
        when nothing measured it.
    :param decide: the decision at one "now", given that "now" and the shift.
    :param keep: the answer that allows least among the answers, earlier "now" first,
        e.g. :func:`strictest`.
    """
    local = pendulum.now("UTC")
    if clock is None:
        return keep([decide(local, timedelta(0))])
    return keep([decide(now, clock.nearest(now - local)) for now in clock.possible_nows(local)])


def strictness(decision: object) -> int:
    """How strict a verdict is, from the verdicts table: the lower, the stricter.

    A refusal (0), a hold on a failing dependency (1), a wait for a backoff (2), a
    start now (3).

    :param decision: a :class:`~airflow_retrywindow.model.decisions.Decision` or a
        verdict's name; anything else (a target never tried) allows a start now.
    """
    found = verdict(decision)
    return ALLOWS_NOW if found is None else found.rank


def strictest(
    answers: Sequence[T],
    *,
    decision: Callable[[T], object],
    wait_until: Callable[[T], datetime | None],
) -> T:
    """The answer that allows least, among the answers for each possible "now".

    A refusal over a hold, a hold over a wait, a wait over a start now (the ranks of
    the verdicts table); between two waits or two holds, the one that ends later;
    otherwise the answer for the latest "now" (the last one).

    :param answers: one answer per possible "now", earlier first.
    :param decision: the decision of an answer.
    :param wait_until: when an answer's wait ends, if it has one.
    """
    if not answers:
        raise ValueError("strictest needs at least one answer")
    chosen = answers[-1]
    for answer in reversed(answers[:-1]):
        if _stricter(answer, chosen, decision, wait_until):
            chosen = answer
    return chosen


def _stricter(
    first: T,
    second: T,
    decision: Callable[[T], object],
    wait_until: Callable[[T], datetime | None],
) -> bool:
    """Whether ``first`` allows strictly less than ``second``."""
    rank, other = strictness(decision(first)), strictness(decision(second))
    if rank != other:
        return rank < other
    if rank not in WAITING_RANKS:
        return False
    ends, other_ends = wait_until(first), wait_until(second)
    return ends is not None and (other_ends is None or ends > other_ends)
