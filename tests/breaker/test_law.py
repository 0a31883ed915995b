"""The breaker's law, round by round, on a controlled clock and a dependency as a flow."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import pendulum
import pytest

from airflow_retrywindow.breaker.law import (
    EARLY_PROBING,
    ON_CALL,
    PROBE_ROTATION,
    PROBE_SPACING,
    Reading,
    open_wait,
    step,
    tripped,
)
from airflow_retrywindow.breaker.settings import BreakerSettings
from airflow_retrywindow.records.breaker_state import (
    CLOSED,
    FAILED,
    LIMITED,
    OPEN,
    RECOVERING,
    SUCCEEDED,
    BreakerState,
    Probe,
)
from tests.breaker.dependency_model import Dependency

START = pendulum.datetime(2026, 12, 7, 14, 0, tz="UTC")
SETTINGS = BreakerSettings(round=15, trip_calls=3)


def watching(size: int = 24) -> BreakerState:
    return BreakerState.closed("positions_api", size, START, "watching the pool")


def run(state: BreakerState, dependency: Dependency, rounds: int) -> list[BreakerState]:
    """``rounds`` rounds of ``state`` against ``dependency``; the state after each."""
    seen, probing = [], False
    for number in range(1, rounds + 1):
        at = START.add(seconds=SETTINGS.round * number)
        reading = dependency.round(state.slots, SETTINGS.round, at)
        if probing:  # the probe's one call, the round after its slot opened
            reading = (
                replace(reading, successes=1, served=0.5)
                if dependency.capacity
                else (replace(reading, failures=1))
            )
        found = step(state, reading, SETTINGS)
        probing = found.probe
        state = found.state
        seen.append(state)
    return seen


def test_refused_calls_with_none_served_open_the_breaker_and_fewer_do_not() -> None:
    two = Reading(START.add(seconds=15), 24, 24, successes=0, failures=2)
    assert step(watching(), two, SETTINGS).state.phase == CLOSED
    three = replace(two, failures=3)
    found = step(watching(), three, SETTINGS)
    assert (found.state.phase, found.slots) == (OPEN, 0)


def test_a_small_steady_share_of_failures_never_moves_a_healthy_pool() -> None:
    # a large pool whose calls fail at a rate of 5 % whatever the load
    seen = run(watching(), Dependency(capacity=1000, background=0.05), rounds=40)
    assert {state.phase for state in seen} == {CLOSED}
    assert {state.slots for state in seen} == {24}


@pytest.mark.parametrize("size", [1, 2, 5, 24, 100, 1000])
def test_from_the_first_success_the_pool_is_back_within_log2_of_its_size_plus_one_rounds(
    size: int,
) -> None:
    opened = replace(watching(size), phase=OPEN, slots=0, next_probe=START)
    seen = run(opened, Dependency(capacity=10_000), rounds=20)
    # the first round probes; the round after it sees the probe's success
    first_success = 2
    back = next(number for number, state in enumerate(seen, 1) if state.phase == CLOSED)
    assert seen[-1].slots == size
    assert back - first_success + 1 <= math.log2(size) + 1, [s.slots for s in seen]


def test_a_refusal_while_recovering_at_most_halves_the_slots_and_does_not_start_over() -> None:
    recovering = replace(watching(), phase=RECOVERING, slots=16)
    # 1 of 7 calls refused, served 15 of 16 slots: cut to what was served
    few = Reading(START.add(seconds=15), 16, 16, successes=30, failures=5, served=15.0)
    assert step(recovering, few, SETTINGS).state.slots == 15
    # nearly every call refused, one served: halved, not back to the start
    many = Reading(START.add(seconds=15), 16, 16, successes=1, failures=60, served=0.4)
    found = step(recovering, many, SETTINGS)
    assert (found.state.phase, found.slots) == (LIMITED, 8)


def test_an_open_breaker_probes_every_round_for_five_minutes_then_twenty_an_hour_at_most() -> None:
    opened = replace(watching(), phase=OPEN, slots=0, since=START, next_probe=START)
    seen = run(opened, Dependency(capacity=0), rounds=4 * 60 * 2)  # two hours of 15 s rounds
    probes = [state.last_probe.at for state in seen if state.last_probe is not None]
    starts = sorted(set(probes))
    early = [at for at in starts if at - START < EARLY_PROBING]
    # one each round that starts within the first five minutes (the first 15 s in)
    rounds_early = [n for n in range(1, 100) if n * SETTINGS.round < EARLY_PROBING.total_seconds()]
    assert len(early) == len(rounds_early)
    later_hour = [at for at in starts if START.add(hours=1) <= at < START.add(hours=2)]
    assert 0 < len(later_hour) <= 20
    assert all(b - a >= PROBE_SPACING for a, b in itertools.pairwise(later_hour))
    assert all(state.phase == OPEN and state.slots == 0 for state in seen)
    assert seen[-1].last_probe is not None and seen[-1].last_probe.outcome == FAILED


def test_no_probe_while_a_try_still_holds_a_slot() -> None:
    opened = replace(watching(), phase=OPEN, slots=0, next_probe=START)
    busy = Reading(START.add(seconds=15), 0, occupied=1, successes=0, failures=0)
    assert not step(opened, busy, SETTINGS).probe
    idle = replace(busy, occupied=0)
    assert step(opened, idle, SETTINGS).probe


def test_a_probe_no_task_took_is_opened_again_the_next_round() -> None:
    opened = replace(watching(), phase=OPEN, slots=0, next_probe=START)
    at = START.add(seconds=15)
    found = step(opened, Reading(at, 0, 0, 0, 0), SETTINGS)
    assert found.probe and found.state.probes == 1
    # the next round: no outcome, nothing under way, so no task took the slot
    again = step(found.state, Reading(at.add(seconds=15), 0, 0, 0, 0), SETTINGS)
    assert again.probe and again.state.probes == 1
    assert again.state.last_probe is not None and again.state.last_probe.at == at.add(seconds=15)
    # one under way: its outcome is waited for
    running = step(found.state, Reading(at.add(seconds=15), 0, 1, 0, 0), SETTINGS)
    assert not running.probe


def test_after_an_outage_the_probe_that_succeeds_starts_the_recovery_at_two_slots() -> None:
    opened = replace(watching(), phase=OPEN, slots=0, since=START, probes=3, next_probe=START)
    seen = run(opened, Dependency(capacity=24), rounds=2)
    assert seen[1].phase == RECOVERING and seen[1].slots == 2
    assert seen[1].last_probe is not None and seen[1].last_probe.outcome == SUCCEEDED


def test_a_first_probe_served_just_after_a_trip_comes_back_at_half_the_pool() -> None:
    # a brownout looks like an outage for a moment: the trip, then its first probe served
    opened = replace(watching(16), phase=OPEN, slots=0, since=START, next_probe=START)
    seen = run(opened, Dependency(capacity=4), rounds=4)
    assert [state.slots for state in seen[:3]] == [0, 8, 4]
    assert seen[2].phase == LIMITED


@pytest.mark.parametrize(("size", "capacity"), [(24, 6), (16, 4), (8, 2), (100, 25)])
def test_a_brownout_settles_at_what_it_serves_within_three_rounds_and_refuses_a_tenth(
    size: int, capacity: int
) -> None:
    dependency = Dependency(capacity=capacity)
    seen = run(watching(size), dependency, rounds=3)
    assert seen[-1].phase == LIMITED
    assert abs(seen[-1].slots - capacity) <= 0.25 * capacity
    # then, for an hour, at most a tenth of the calls are refused
    state, refused, calls = seen[-1], 0, 0
    for number in range(4, 4 + 240):
        at = START.add(seconds=SETTINGS.round * number)
        reading = dependency.round(state.slots, SETTINGS.round, at)
        refused += reading.failures
        calls += reading.failures + reading.successes
        state = step(state, reading, SETTINGS).state
    assert refused / calls <= 0.1, (refused, calls)


def test_a_limited_breaker_follows_the_dependency_when_it_serves_more_or_less() -> None:
    dependency = Dependency(capacity=6)
    state = run(watching(), dependency, rounds=10)[-1]
    dependency.capacity = 12
    state = run(state, dependency, rounds=40)[-1]
    assert state.slots >= 12 * 0.75, state
    dependency.capacity = 3
    state = run(state, dependency, rounds=2)[-1]
    assert abs(state.slots - 3) <= 1, state


def test_a_breaker_limited_to_the_pools_size_closes() -> None:
    dependency = Dependency(capacity=6)
    state = run(watching(8), dependency, rounds=5)[-1]
    dependency.capacity = 100
    seen = run(state, dependency, rounds=30)
    assert seen[-1].phase == CLOSED and seen[-1].slots == 8


def test_a_failing_try_trips_a_closed_breaker_once_enough_were_refused() -> None:
    at = START.add(seconds=3)
    assert tripped(watching(), 2, at, "load[3]", SETTINGS) is None
    found = tripped(watching(), 3, at, "load[3]", SETTINGS)
    assert found is not None
    assert (found.phase, found.slots, found.size, found.by) == (OPEN, 0, 24, "load[3]")
    recovering = replace(watching(), phase=RECOVERING, slots=4)
    assert tripped(recovering, 30, at, "load[3]", SETTINGS) is None


def test_on_call_forces_open_and_closed_and_the_pools_size_is_kept() -> None:
    limited = replace(watching(), phase=LIMITED, slots=6)
    at = START.add(seconds=15)
    opened = step(limited, Reading(at, 6, 0, 0, 0, forced=OPEN), SETTINGS)
    assert (opened.state.phase, opened.slots, opened.state.by, opened.state.size) == (
        OPEN, 0, ON_CALL, 24,
    )  # fmt: skip
    # forced open: no probe, however long
    later = step(opened.state, Reading(at.add(minutes=10), 0, 0, 0, 0, forced=OPEN), SETTINGS)
    assert not later.probe and later.slots is None
    closed = step(later.state, Reading(at.add(minutes=11), 0, 0, 0, 0, forced=CLOSED), SETTINGS)
    assert (closed.state.phase, closed.slots) == (CLOSED, 24)
    # lifted: an open breaker probes at once
    lifted = step(opened.state, Reading(at.add(minutes=12), 0, 0, 0, 0), SETTINGS)
    assert lifted.probe and lifted.state.by == "controller"


def test_a_size_set_by_hand_is_the_pools_size() -> None:
    limited = replace(watching(), phase=LIMITED, slots=6)
    found = step(limited, Reading(START.add(seconds=15), 30, 0, 0, 0), SETTINGS)
    assert (found.state.phase, found.state.size, found.state.slots, found.slots) == (
        CLOSED, 30, 30, None,
    )  # fmt: skip
    closed = step(watching(), Reading(START.add(seconds=15), 32, 0, 0, 0), SETTINGS)
    assert (closed.state.size, closed.state.slots) == (32, 32)


def test_the_state_reads_back_from_the_pools_description_and_keeps_the_owners_words() -> None:
    state = replace(watching(), phase=OPEN, slots=0, probes=2, next_probe=START.add(minutes=1))
    state = replace(state, last_probe=Probe(START.add(seconds=30), "started"))
    described = state.described("Positions API, 24 calls at once\nowner: data platform")
    assert described.splitlines()[:2] == ["Positions API, 24 calls at once", "owner: data platform"]
    assert "open since 14:00:00Z, 0 of 24 slots" in described.splitlines()[2]
    assert BreakerState.in_description(described) == state
    # written again, one line replaces the other
    assert state.described(described).count("retry window breaker:") == 1
    assert BreakerState.in_description("retry window breaker: nonsense -- {not json") is None
    assert BreakerState.in_description(None) is None


def test_a_retry_that_failed_while_the_breaker_is_open_waits_for_the_probes_to_rotate() -> None:
    opened = replace(watching(), phase=OPEN, slots=0, since=START)
    # early in the outage: four rounds; later: four of the three-minute spacings
    assert open_wait(opened, START.add(seconds=20), SETTINGS) == PROBE_ROTATION * SETTINGS.round
    later = START.add(minutes=10)
    assert open_wait(opened, later, SETTINGS) == PROBE_ROTATION * PROBE_SPACING.total_seconds()
    assert open_wait(replace(opened, phase=LIMITED), later, SETTINGS) is None


def test_one_round_of_refusals_with_none_served_does_not_open_a_limited_breaker_two_do() -> None:
    limited = replace(watching(), phase=LIMITED, slots=4, owed=10)
    # calls longer than a round: none ended served this round, four were refused
    quiet = Reading(START.add(seconds=15), 4, 4, successes=0, failures=4, served=0.0)
    once = step(limited, quiet, SETTINGS)
    assert (once.state.phase, once.state.slots, once.slots, once.state.quiet) == (
        LIMITED,
        4,
        None,
        1,
    )
    served = Reading(START.add(seconds=30), 4, 4, successes=3, failures=0, served=3.5)
    assert step(once.state, served, SETTINGS).state.quiet == 0
    twice = step(once.state, replace(quiet, at=START.add(seconds=30)), SETTINGS)
    assert (twice.state.phase, twice.slots) == (OPEN, 0)
