"""How a breaker moves a pool's slots, one round at a time (pure).

Each round the controller counts what the pool's tasks got from the dependency since
the round before (:class:`Reading`) and :func:`step` says what the slots become:

* **closed** (the owner's size): refused calls with none served (``trip_calls`` of them)
  open the breaker; refusals above a tenth of the calls, with some served, limit it;
* **open**: no slot, but one probe slot a round for the first five minutes, then one every
  three minutes (at most twenty an hour). Any success starts the recovery;
* **recovering**: two slots, then twice as many each round nothing is refused, up to the
  owner's size, so a pool of ``size`` slots is back within ``log2(size) + 1`` rounds. A
  round with refusals cuts the slots to what the dependency served, never by more than
  half: it does not start over;
* **limited**: the slots are what the dependency served in the round (the seconds its
  successful calls held a slot, over the round's seconds), cut again on refusals, and
  one more each time the successes since pay nine times over for the refusals of the
  round that last cut it (one slot too many may refuse as many), so refused calls stay
  near a tenth of all calls while the limit follows the dependency.

A round of refused calls with none served opens a recovering or limited breaker again.
On-call forces a pool ``open`` (no probe) or ``closed`` (the owner's size) with an
Airflow Variable; a size set by hand is the owner's new size and closes the breaker.
Times are the API server's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import timedelta

import pendulum

from airflow_retrywindow.breaker.settings import BreakerSettings
from airflow_retrywindow.records.breaker_state import (
    CLOSED,
    FAILED,
    LIMITED,
    MISSED,
    OPEN,
    RECOVERING,
    STARTED,
    SUCCEEDED,
    BreakerState,
    Probe,
)

#: the share of calls a breaker lets the dependency refuse before it limits the pool
REFUSED_SHARE = 0.1
#: successes owed for each refused call before a limited breaker tries a slot more
OWED_PER_REFUSAL = 9
#: an open breaker probes every round this long, then at most every PROBE_SPACING
EARLY_PROBING = timedelta(minutes=5)
PROBE_SPACING = timedelta(minutes=3)
#: the slots a recovering breaker starts from
RECOVERY_START = 2
#: rounds in a row of refused calls with none served that open a recovering or limited
#: breaker: a call that takes longer than a round ends in neither
QUIET_ROUNDS = 2
#: who forced a state, as the state keeps it
ON_CALL = "on-call"
#: a retry that failed while its breaker is open (it probed, or ran when it opened) waits
#: at least this many probe spacings: the next probes go to other task instances, whose
#: order in the scheduler's queue would give every probe to the same one, spending its
#: every attempt
PROBE_ROTATION = 4


@dataclass(frozen=True)
class Reading:
    """What one round counted of the pool, since the round before.

    :param at: when it was read, on the API server's clock.
    :param size: the pool's size as read.
    :param occupied: slots held now by tries running or queued (deferred ones too where
        the pool counts them).
    :param successes: tries of the pool that succeeded.
    :param failures: tries whose failure counts against the dependency: a failure its
        retry policy classed retryable or unknown, or a retry Airflow scheduled.
    :param served: slots the successful calls held on average over the round.
    :param forced: ``open`` or ``closed`` when on-call forces it.
    """

    at: pendulum.DateTime
    size: int
    occupied: int
    successes: int
    failures: int
    served: float = 0.0
    forced: str | None = None

    @property
    def refused_share(self) -> float:
        """The share of the round's counted calls that were refused."""
        calls = self.successes + self.failures
        return self.failures / calls if calls else 0.0


@dataclass(frozen=True)
class Step:
    """What a round does to the pool.

    :param state: the breaker after the round.
    :param slots: the size to give the pool, ``None`` to leave it as it is.
    :param probe: whether to open one slot for a probe now, and close it once a task took it.
    """

    state: BreakerState
    slots: int | None = None
    probe: bool = False


def step(state: BreakerState, reading: Reading, settings: BreakerSettings) -> Step:
    """The round's step for ``state`` given ``reading``."""
    if reading.successes and state.quiet:
        state = replace(state, quiet=0)
    if reading.forced is not None:
        return _forced(state, reading)
    if state.by == ON_CALL:
        state = _lifted(state, reading.at)
    if reading.size != state.slots:
        return _resized(state, reading)
    advance = {CLOSED: _closed, OPEN: _open, RECOVERING: _recovering, LIMITED: _limited}
    return advance[state.phase](state, reading, settings)


def tripped(
    state: BreakerState, refused: int, at: pendulum.DateTime, by: str, settings: BreakerSettings
) -> BreakerState | None:
    """The breaker a failing try opens, or ``None`` when it opens none.

    A try whose failure counts against the dependency opens a closed breaker at once, in
    its own process and before its slot is freed, when ``refused`` (itself included, at
    least ``trip_calls``) calls were refused since the newest served call began. A
    dependency that serves part of the load looks the same for a moment: its first probe
    is served, and the breaker comes back at half the pool's size (:func:`_open`), from
    where its round limits the pool to what it serves.

    :param refused: the calls refused since the pool's last success, this one included.
    :param by: the task instance, as the state names who changed it.
    """
    if state.phase != CLOSED or refused < settings.trip_calls:
        return None
    reason = f"{refused} calls refused since the pool's last success; tripped by {by}"
    opened = state.moved(OPEN, 0, at, reason)
    return replace(opened, by=by, probes=0, next_probe=at + timedelta(seconds=settings.round))


def open_wait(state: BreakerState, at: pendulum.DateTime, settings: BreakerSettings) -> int | None:
    """The shortest wait of a retry that failed at ``at`` while ``state`` is open, in whole
    seconds; ``None`` when it is not open."""
    if state.phase != OPEN:
        return None
    return int(PROBE_ROTATION * _spacing(at - state.since, settings).total_seconds())


def _closed(state: BreakerState, reading: Reading, settings: BreakerSettings) -> Step:
    refused, served = reading.failures, reading.successes
    if refused >= settings.trip_calls and not served:
        return _opened(state, reading, settings, f"{refused} calls refused, none served")
    if refused >= settings.trip_calls and reading.refused_share > REFUSED_SHARE:
        return _limit(state, reading, "limited")
    return Step(replace(state, checked_at=reading.at))


def _open(state: BreakerState, reading: Reading, settings: BreakerSettings) -> Step:
    at = reading.at
    probe = state.last_probe
    if reading.successes:
        if probe is not None and probe.outcome == STARTED:
            probe = Probe(probe.at, SUCCEEDED)
        # served at the first probe of a breaker just opened: the dependency serves part of
        # the load, or a blip is over: back at half the pool's size, not from the start
        short = state.probes <= 1 and at - state.since <= 2 * timedelta(seconds=settings.round)
        slots = min(state.size, max(RECOVERY_START, state.size // 2 if short else 0))
        recovering = replace(state, last_probe=probe, next_probe=None)
        reason = f"{reading.successes} calls served: the dependency answers again"
        return _to(recovering, RECOVERING, slots, at, reason)
    if probe is not None and probe.outcome == STARTED and reading.failures:
        state = replace(state, last_probe=Probe(probe.at, FAILED))
    elif probe is not None and probe.outcome == STARTED and not reading.occupied:
        # no outcome, nothing under way: no task took the probe's slot, the scheduler was
        # slower than its wait; it is opened again now, the spacing kept
        state = replace(
            state, probes=state.probes - 1, next_probe=at, last_probe=Probe(probe.at, MISSED)
        )
    due = state.next_probe is None or at >= state.next_probe
    if not due or reading.occupied:
        # a try still holds a slot: its outcome tells before another probe could
        return Step(replace(state, checked_at=at))
    spacing = _spacing(at - state.since, settings)
    probing = replace(
        state, checked_at=at, probes=state.probes + 1, next_probe=at + spacing,
        last_probe=Probe(at, STARTED), reason=f"probe {state.probes + 1} of the outage",
    )  # fmt: skip
    return Step(probing, probe=True)


def _recovering(state: BreakerState, reading: Reading, settings: BreakerSettings) -> Step:
    quiet = _quiet(state, reading, settings)
    if quiet is not None:
        return quiet
    if reading.failures and reading.refused_share > REFUSED_SHARE:
        return _limit(state, reading, "cut")
    slots = min(state.size, 2 * state.slots)
    return _to(state, RECOVERING, slots, reading.at, "nothing refused: twice the slots")


def _limited(state: BreakerState, reading: Reading, settings: BreakerSettings) -> Step:
    quiet = _quiet(state, reading, settings)
    if quiet is not None:
        return quiet
    if reading.failures and reading.refused_share > REFUSED_SHARE:
        return _limit(state, reading, "cut")
    owed = max(0, state.owed - reading.successes)
    if owed:
        kept = replace(state, owed=owed, checked_at=reading.at)
        return Step(kept)
    # each slot more is paid for as the last cut was: the dependency may serve no more
    return _to(
        replace(state, owed=state.price), LIMITED, state.slots + 1, reading.at, "one slot more"
    )


def _to(state: BreakerState, phase: str, slots: int, at: pendulum.DateTime, why: str) -> Step:
    """``state`` moved to ``phase`` with ``slots``; closed once back at the owner's size."""
    if slots >= state.size:
        closed = replace(state.moved(CLOSED, state.size, at, "back at the pool's size"), owed=0)
        return Step(closed, slots=state.size if state.slots != state.size else None)
    moved = state.moved(phase, slots, at, why)
    return Step(moved, slots=slots if slots != state.slots else None)


def _limit(state: BreakerState, reading: Reading, verb: str) -> Step:
    """``state`` cut to what the round's successful calls held, never by more than half: a
    refusal does not start over, and a round's estimate may miss calls still under way."""
    half = math.ceil(state.slots / 2)
    slots = max(half, min(state.slots - 1, max(1, round(reading.served))))
    reason = (
        f"{reading.failures} of {reading.failures + reading.successes} calls refused, "
        f"{reading.served:.1f} slots served: {verb} to {slots}"
    )
    # one slot more may cost what the round's refusals did: a refused call ends at once,
    # so one slot too many refuses about as many calls a round as many slots too many do
    price = OWED_PER_REFUSAL * reading.failures
    limited = replace(state, owed=price, price=price)
    return _to(limited, LIMITED, slots, reading.at, reason)


def _opened(state: BreakerState, reading: Reading, settings: BreakerSettings, why: str) -> Step:
    at = reading.at
    opened = replace(
        state.moved(OPEN, 0, at, why), probes=0, owed=0,
        next_probe=at + timedelta(seconds=settings.round),
    )  # fmt: skip
    return Step(opened, slots=0 if state.slots else None)


def _quiet(state: BreakerState, reading: Reading, settings: BreakerSettings) -> Step | None:
    """The step of a round whose calls were refused with none served, ``None`` for another.

    Two such rounds in a row open the breaker: the dependency is down. One alone changes
    nothing: calls longer than a round may still be served.
    """
    if reading.successes or reading.failures < min(settings.trip_calls, state.slots):
        return None
    if state.quiet + 1 >= QUIET_ROUNDS:
        return _opened(state, reading, settings, "refused again, none served")
    return Step(replace(state, quiet=state.quiet + 1, checked_at=reading.at))


def _spacing(open_for: timedelta, settings: BreakerSettings) -> timedelta:
    round_ = timedelta(seconds=settings.round)
    return round_ if open_for < EARLY_PROBING else max(round_, PROBE_SPACING)


def _forced(state: BreakerState, reading: Reading) -> Step:
    at, size = reading.at, (state.size if state.phase != CLOSED else reading.size)
    phase, slots = (OPEN, 0) if reading.forced == OPEN else (CLOSED, size)
    if state.by == ON_CALL and state.phase == phase:
        return Step(replace(state, checked_at=at))
    moved = replace(state.moved(phase, slots, at, f"forced {phase} by on-call"), by=ON_CALL)
    return Step(replace(moved, size=size), slots=slots if slots != reading.size else None)


def _lifted(state: BreakerState, at: pendulum.DateTime) -> BreakerState:
    """``state`` once on-call's force is lifted: open probes at once, closed stays."""
    if state.phase == OPEN:
        return replace(state, by="controller", next_probe=at, reason="on-call's force lifted")
    return replace(state, by="controller", reason="on-call's force lifted")


def _resized(state: BreakerState, reading: Reading) -> Step:
    """A size the breaker did not set: the owner's new size; the breaker closes on it."""
    if state.phase == CLOSED:
        return Step(replace(state, size=reading.size, slots=reading.size, checked_at=reading.at))
    reason = f"set to {reading.size} slots by hand: the pool's size now"
    closed = state.moved(CLOSED, reading.size, reading.at, reason)
    return Step(replace(closed, size=reading.size, owed=0))
