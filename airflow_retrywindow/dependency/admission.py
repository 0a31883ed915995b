"""Whether one starting retry runs, probes, waits or is refused while its pool fails (pure).

**Probes.** Rounds of ``round_seconds`` run on the API server's clock. Each round's
probes are the first ``min_probes`` of the failing task instances a read lists (the
pool's first 100 in a retry, by id, and the newest 100 waiting for one), ordered by a
hash of the pool, the round and the task instance.
Every worker and triggerer that reads the same pool in the same round orders them
alike, so no lock is needed; the order changes every round, so the probes rotate. A
task instance probes at most once a round; one the triggerer woke for its probe probes
when its worker starts, whatever the round or the retries listed then. Forced ``open``,
the pool has none.

**Holds.** A held retry waits in the triggerer, which reads the pool once a round for
all its held retries and wakes one only to run or to be refused. Where no triggerer
answers, a held retry is rescheduled and checked again after its own backoff, doubled
at each hold (at most :data:`~.settings.MAX_HOLD`), never before the next round nor
sooner than :data:`MIN_HOLD`, and earlier only for the round in which it is a probe;
a spread of up to a fifth of the hold or a round, whichever is longer, the same for a
given try every time, keeps the held retries from starting their workers together. A
hold never runs past the retry's latest start (the deadline less one attempt and its
validation); a retry still held there is refused.

**Release.** Once something of the pool succeeds after the failing began, the held
retries come back in waves: ``2 x (min_probes + successes)`` of the failing task
instances may run, each chosen by a fixed hash of its own, so every success lets two
more run, whatever the later successes do: a wave doubles as fast as the released
retries succeed, and one released never goes back to waiting. Airflow's pool slots
bound how many of them run at once.
"""

from __future__ import annotations

import functools
import hashlib
import heapq
from dataclasses import dataclass
from datetime import timedelta

import pendulum

from airflow_retrywindow.dependency.fleet import DependencyState, TaskKey
from airflow_retrywindow.dependency.settings import MAX_HOLD, DependencySettings
from airflow_retrywindow.labels import VIEW_CLOCK
from airflow_retrywindow.model.decisions import Decision
from airflow_retrywindow.records.dependency_state import CLOSED, OPEN, RECOVERING
from airflow_retrywindow.verdicts import DEPENDENCY_HELD

RUN = "run"
PROBE = "probe"
RELEASE = "release"
HOLD = "hold"
REFUSE = "refuse"
#: the model's verdicts for a retry that can no longer finish before its deadline, and
#: for one that may run now
DEADLINE_INFEASIBLE = Decision.DEADLINE_INFEASIBLE.value
RETRY_ELIGIBLE = Decision.RETRY_ELIGIBLE.value
#: the share of a hold its spread may add (at least a round)
SPREAD = 0.2
#: the shortest hold: a reschedule that comes sooner meets Airflow's scheduler race
#: (:mod:`airflow_retrywindow.scheduler_race`), which fails the held try
MIN_HOLD = 15
#: rounds looked ahead for the one in which a held retry probes
LOOKAHEAD_ROUNDS = 60
#: a wave lets this many task instances run for each success and each probe of a round
WAVE_GROWTH = 2


@dataclass(frozen=True)
class Retry:
    """The retry that is starting.

    :param key: its task instance.
    :param try_number: the try that starts.
    :param attempts_left: tries still open to it, this one included.
    :param backoff_seconds: the wait its own retry settings give this try.
    :param latest_start: when it must start at the latest to finish, validation
        included, before its deadline, on the API server's clock.
    :param holds: how often this try was held before.
    :param probed_round: the round it last probed in, if any.
    :param protected: whether a failed probe of it is held again rather than spent (it
        probes from the triggerer's hold): then even its last attempt may probe.
    :param woken: whether the triggerer woke it before its hold's end: while the pool is
        open, only to probe (its worker may start in the round after, and the retries
        listed may have changed since the triggerer chose it).
    """

    key: TaskKey
    try_number: int
    attempts_left: int
    backoff_seconds: int
    latest_start: pendulum.DateTime | None
    holds: int = 0
    probed_round: int | None = None
    protected: bool = False
    woken: bool = False

    @property
    def may_probe(self) -> bool:
        """Whether a failed probe leaves it an attempt, or costs it none."""
        return self.protected or self.attempts_left >= 2


@dataclass(frozen=True)
class Admission:
    """What a starting retry does, and why.

    :param action: ``run``, ``probe``, ``release``, ``hold`` or ``refuse``.
    :param decision: the verdict recorded: ``retry-eligible``, ``dependency-held`` or
        ``deadline-infeasible``.
    :param reason: why, naming the pool's state.
    :param round: the round it was decided in.
    :param budget: the probes of that round.
    :param hold_until: when a held retry is checked again.
    :param next_probe: the start of the next round that probes.
    """

    action: str
    decision: str
    reason: str
    round: int
    budget: int
    hold_until: pendulum.DateTime | None = None
    next_probe: pendulum.DateTime | None = None

    @property
    def runs(self) -> bool:
        """Whether the retry runs now."""
        return self.action in (RUN, PROBE, RELEASE)


def round_of(at: pendulum.DateTime, settings: DependencySettings) -> int:
    """The round ``at`` falls in (rounds count from the Unix epoch)."""
    return int(at.timestamp()) // settings.round_seconds


def round_start(number: int, settings: DependencySettings) -> pendulum.DateTime:
    """When round ``number`` starts."""
    return pendulum.from_timestamp(number * settings.round_seconds, tz="UTC")


def probes_of(
    state: DependencyState, number: int, settings: DependencySettings
) -> tuple[TaskKey, ...]:
    """The task instances that probe in round ``number``, in their order."""
    # the hashes are worked out once per read (:func:`_bases`), not once per comparison;
    # nsmallest keeps sorted()'s order, ties included, at a fraction of its cost
    bases = _bases(state)
    first = heapq.nsmallest(
        settings.min_probes,
        range(len(state.candidates)),
        key=lambda at: _rank(bases[at], number),
    )
    return tuple(state.candidates[at] for at in first)


def _probes_in(bases: tuple[int, ...], mine: int, number: int, budget: int) -> bool:
    """Whether the candidate of hash ``mine`` is among the first ``budget`` of round
    ``number``, ``bases`` the hashes of all of them: one pass, no sort."""
    own = _rank(mine, number)
    ahead = 0
    for base in bases:
        if _rank(base, number) < own:
            ahead += 1
            if ahead >= budget:
                return False
    return True


def admit(state: DependencyState, retry: Retry, settings: DependencySettings) -> Admission:
    """What ``retry`` does with its pool in ``state``, decided at ``state.read_at``."""
    now = state.read_at
    number = round_of(now, settings)
    budget = settings.min_probes
    facts = state.describe(settings)
    if state.state == CLOSED:
        return Admission(RUN, RETRY_ELIGIBLE, f"{RETRY_ELIGIBLE}: {facts}", number, budget)
    if state.state == OPEN and _probes(state, retry, number, settings) and _in_time(retry, now):
        return Admission(
            PROBE,
            RETRY_ELIGIBLE,
            f"{RETRY_ELIGIBLE}: this retry probes pool {state.pool} in its round "
            f"({budget} probe(s) a round); {facts}",
            number,
            budget,
        )
    if state.state == RECOVERING and released(state, retry, settings) and _in_time(retry, now):
        return Admission(
            RELEASE,
            RETRY_ELIGIBLE,
            f"{RETRY_ELIGIBLE}: released in a wave of the held retries "
            f"({wave(state, settings)} of {state.failing} may run); {facts}",
            number,
            budget,
        )
    return _hold(state, retry, settings, number, budget, facts)


def wave(state: DependencyState, settings: DependencySettings) -> int:
    """How many of the failing task instances a recovering pool lets run: two for each
    probe of a round and each success since the failing began."""
    return WAVE_GROWTH * (settings.min_probes + state.successes)


def released(state: DependencyState, retry: Retry, settings: DependencySettings) -> bool:
    """Whether ``retry`` is in the wave: its fixed share of the failing task instances
    falls below the wave. The share never changes and the wave only grows while the
    failing shrink, so a released retry stays released."""
    share = _base(state.pool, retry.key) / 2**64
    return share * max(state.failing, 1) < wave(state, settings)


def unread(
    pool: str, retry: Retry, settings: DependencySettings, cause: str, now: pendulum.DateTime
) -> Admission:
    """What ``retry`` does when its pool could not be read: held for its own backoff,
    doubled at each hold (at most :data:`~.settings.MAX_HOLD`), so that retries whose
    reads fail under load do not come back every backoff, each taking a worker and a
    pool slot.

    Never let run on a dependency nobody could check, and never spent: refused only at
    its latest start, like any held retry.
    """
    number = round_of(now, settings)
    facts = f"pool {pool} could not be read ({cause})"
    if not _in_time(retry, now):
        return Admission(
            REFUSE, DEADLINE_INFEASIBLE, f"{DEADLINE_INFEASIBLE}: {facts}; past its latest start",
            number, 0,
        )  # fmt: skip
    grown = min(max(retry.backoff_seconds, 1) * 2**retry.holds, MAX_HOLD)
    until = now + timedelta(seconds=grown)
    if retry.latest_start is not None:
        until = min(until, retry.latest_start)
    return Admission(
        HOLD,
        DEPENDENCY_HELD,
        f"{DEPENDENCY_HELD}: {facts}; held until {until.format(VIEW_CLOCK)}",
        number,
        0,
        hold_until=until,
    )


def _hold(  # noqa: PLR0917
    state: DependencyState,
    retry: Retry,
    settings: DependencySettings,
    number: int,
    budget: int,
    facts: str,
) -> Admission:
    now = state.read_at
    if not _in_time(retry, now):
        assert retry.latest_start is not None  # _in_time is only False with one
        return Admission(
            REFUSE,
            DEADLINE_INFEASIBLE,
            f"{DEADLINE_INFEASIBLE}: {facts}; held past its latest start "
            f"{retry.latest_start.format(VIEW_CLOCK)}, the retry cannot finish, "
            "validation included, before its deadline",
            number,
            budget,
        )
    until, probe_round = _hold_until(state, retry, settings, number)
    if retry.latest_start is not None and until > retry.latest_start:
        until = retry.latest_start
    next_probe = round_start(probe_round, settings) if probe_round is not None else None
    return Admission(
        HOLD,
        DEPENDENCY_HELD,
        f"{DEPENDENCY_HELD}: {facts}; held until {until.format(VIEW_CLOCK)} "
        f"(try {retry.try_number} is not spent; {budget} probe(s) a round)",
        number,
        budget,
        hold_until=until,
        next_probe=next_probe,
    )


def _hold_until(
    state: DependencyState, retry: Retry, settings: DependencySettings, number: int
) -> tuple[pendulum.DateTime, int | None]:
    """When a held retry is checked again, and the round it probes in, if one is near."""
    now = state.read_at
    soonest = now + timedelta(seconds=MIN_HOLD)
    if state.state != OPEN:
        # recovering: back in the next round's wave, spread over that round
        at = round_start(number + 1, settings) + _spread(retry, settings.round_seconds)
        return max(at, soonest), None
    grown = min(max(retry.backoff_seconds, 1) * 2**retry.holds, MAX_HOLD)
    until = max(now + timedelta(seconds=grown), round_start(number + 1, settings))
    # spread over a round at least: the held retries do not start their workers together
    until += _spread(retry, max(SPREAD * grown, settings.round_seconds))
    last = round_of(until, settings)
    if retry.key not in state.candidates or state.forced or not retry.may_probe:
        return max(until, soonest), None
    budget = settings.min_probes
    # looked up once for every round ahead: hashing the eligible keys again for each
    # of up to LOOKAHEAD_ROUNDS rounds cost more than the ranks themselves
    bases, mine = _bases(state), _base(state.pool, retry.key)
    for ahead in range(number + 1, min(last, number + LOOKAHEAD_ROUNDS) + 1):
        if _probes_in(bases, mine, ahead, budget):
            at = round_start(ahead, settings) + _spread(retry, settings.round_seconds / 4)
            return max(min(until, at), soonest), ahead
    return max(until, soonest), None


def _probes(
    state: DependencyState, retry: Retry, number: int, settings: DependencySettings
) -> bool:
    """Whether ``retry`` probes now, once a round: chosen in this round, or woken by the
    triggerer while the pool is open (it wakes a held retry early only to probe)."""
    if state.forced or not retry.may_probe:
        return False  # forced open: the dependency is known down, nothing probes
    if retry.probed_round is not None and retry.probed_round >= number:
        return False
    return retry.woken or retry.key in probes_of(state, number, settings)


def _in_time(retry: Retry, now: pendulum.DateTime) -> bool:
    return retry.latest_start is None or now < retry.latest_start


def _spread(retry: Retry, seconds: float) -> timedelta:
    """Up to ``seconds``, the same for a given try and hold every time."""
    return spread(retry.key, retry.try_number * 1000 + retry.holds, seconds)


def spread(key: TaskKey, salt: int, seconds: float) -> timedelta:
    """Up to ``seconds``, the same for ``key`` and ``salt`` every time."""
    fraction = _rank(_base("spread", key), salt) / 2**64
    return timedelta(seconds=round(seconds * fraction if seconds > 0 else 0, 3))


def repeat_held_until(
    state: DependencyState, key: TaskKey, settings: DependencySettings
) -> pendulum.DateTime:
    """When a repeat a gate or sensor holds is decided again.

    Like a held retry's: the next round while the pool recovers; while it is open, as
    long again as the pool has been failing (at least a round, at most
    :data:`~.settings.MAX_HOLD`), so the holds grow as the outage does. Spread by the
    task instance over a fifth of the hold or a round, whichever is longer, so the
    held gates and sensors do not read the pool at the same instant.

    :param state: the pool's state as read.
    :param key: the task instance whose repeat is held.
    :param settings: the pool's dependency settings.
    """
    now, rounds = state.read_at, settings.round_seconds
    following = round_start(round_of(now, settings) + 1, settings)
    if state.state != OPEN or state.failing_since is None:
        return following + spread(key, 0, rounds)
    grown = min(max((now - state.failing_since).total_seconds(), rounds), MAX_HOLD)
    return max(now + timedelta(seconds=grown), following) + spread(
        key, 0, max(SPREAD * grown, rounds)
    )


_MASK = (1 << 64) - 1


def _base(pool: str, key: TaskKey) -> int:
    """A task instance's fixed 64-bit hash within ``pool``."""
    text = "|".join([pool, *map(str, key)])
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), byteorder="big")


@functools.lru_cache(maxsize=8)
def _bases_of(pool: str, candidates: tuple[TaskKey, ...]) -> tuple[int, ...]:
    return tuple(_base(pool, key) for key in candidates)


def _bases(state: DependencyState) -> tuple[int, ...]:
    return _bases_of(state.pool, state.candidates)


def _rank(base: int, number: int) -> int:
    """A task instance's place in round ``number``: SplitMix64 of its hash and the round.

    Every worker computes the same from the same read; the order changes every round.
    """
    mixed = (base + (number + 1) * 0x9E3779B97F4A7C15) & _MASK
    mixed = ((mixed ^ (mixed >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    mixed = ((mixed ^ (mixed >> 27)) * 0x94D049BB133111EB) & _MASK
    return mixed ^ (mixed >> 31)
