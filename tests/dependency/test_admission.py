"""The dependency's state from one read's counts, and what a starting retry does."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pendulum
import pytest

from airflow_retrywindow.dependency.admission import (
    HOLD,
    PROBE,
    REFUSE,
    RELEASE,
    RUN,
    Retry,
    admit,
    probes_of,
    released,
    repeat_held_until,
    round_of,
    round_start,
    unread,
)
from airflow_retrywindow.dependency.fleet import CANDIDATES, DependencyState, PoolTry
from airflow_retrywindow.dependency.pool_read import read_pool
from airflow_retrywindow.dependency.settings import (
    MAX_HOLD,
    DependencySettingError,
    DependencySettings,
    PoolSettings,
)
from airflow_retrywindow.records.dependency_state import CLOSED, OPEN, RECOVERING
from tests.gate.fake_reader import FakeReader

SETTINGS = DependencySettings()
#: the start of a round, so that tests know where rounds begin
T0 = round_start(round_of(pendulum.datetime(2026, 12, 4, 14, tz="UTC"), SETTINGS), SETTINGS)
POOL = "positions_api"


def a_try(number: int, state: str, try_number: int = 2, **times: Any) -> PoolTry:
    return PoolTry(
        dag_id="dag",
        run_id="run",
        task_id=f"load_{number}",
        map_index=-1,
        state=state,
        try_number=try_number,
        max_tries=times.get("max_tries", 3),
        start_date=times.get("start", T0 - timedelta(seconds=20)),
        end_date=times.get("end"),
    )


def read(tries: list[PoolTry], at: pendulum.DateTime, **given: Any) -> DependencyState:
    """The pool's state as the REST API's listings of ``tries`` give it at ``at``."""
    reader = FakeReader([], pool_tries={POOL: tries})
    return read_pool(reader, POOL, given.pop("settings", SETTINGS), now=at, **given).state(
        given.get("settings", SETTINGS)
    )


def retry_of(item: PoolTry, **changes: Any) -> Retry:
    fields: dict[str, Any] = {
        "key": item.key,
        "try_number": item.try_number,
        "attempts_left": item.max_tries - item.try_number + 2,
        "backoff_seconds": 15,
        "latest_start": T0 + timedelta(hours=1),
    }
    fields.update(changes)
    return Retry(**fields)


def held_retries(
    count: int = 12, at: pendulum.DateTime = T0 + timedelta(seconds=15)
) -> list[PoolTry]:
    """``count`` retries held at their start against a down service (in the triggerer)."""
    return [a_try(n, "deferred", start=at) for n in range(count)]


def outage(count: int = 12) -> DependencyState:
    return read(held_retries(count), T0 + timedelta(seconds=16))


def test_retries_held_together_open_the_breaker() -> None:
    state = outage()
    assert state.state == OPEN
    assert state.failing == 12 and len(state.candidates) == 12


def test_fewer_failing_task_instances_than_the_trip_leave_it_closed() -> None:
    state = outage(count=2)
    assert state.state == CLOSED
    assert admit(state, retry_of(held_retries(2)[0]), SETTINGS).action == RUN


def test_first_tries_under_way_and_terminal_failures_do_not_count() -> None:
    ended = T0 + timedelta(seconds=5)
    tries = [
        *(a_try(n, "failed", try_number=1, end=ended) for n in range(5)),
        *(a_try(10 + n, "running", try_number=1) for n in range(20)),
        *(a_try(40 + n, "deferred", try_number=1) for n in range(20)),
    ]
    assert read(tries, ended + timedelta(seconds=1)).state == CLOSED


def test_a_failure_counts_while_its_retry_waits_however_long_the_retry_delay() -> None:
    # failed an hour ago, its retry_delay not over: far past the look-back window
    long_ago = T0 - timedelta(hours=1)
    tries = [a_try(n, "up_for_retry", try_number=1, end=long_ago) for n in range(4)]
    state = read(tries, T0)
    assert state.state == OPEN and state.failing == 4


def test_each_round_probes_its_budget_and_every_other_retry_is_held() -> None:
    state = outage()
    actions = [admit(state, retry_of(item), SETTINGS).action for item in held_retries()]
    assert actions.count(PROBE) == SETTINGS.min_probes == 1
    assert actions.count(HOLD) == 11


def test_retries_starting_one_by_one_in_a_round_probe_its_budget_once() -> None:
    """Twelve first tries failed; their retries start one after another in one round,
    each reading the pool as it starts. A retry joining the ones in a retry, or a failed
    probe going back to wait for its next try, does not move the round's probe: the
    probes are drawn from every failing task instance, waiting ones included."""
    ended = T0 + timedelta(seconds=2)
    tries = {n: a_try(n, "up_for_retry", try_number=1, end=ended) for n in range(12)}
    actions = []
    for step, n in enumerate((5, 0, 11, 3, 8, 1, 10, 6, 2, 9, 4, 7)):
        at = T0 + timedelta(seconds=17 + 3 * step)
        tries[n] = a_try(n, "running", start=at)
        state = read(list(tries.values()), at + timedelta(seconds=1))
        assert state.state == OPEN
        found = admit(state, retry_of(tries[n]), SETTINGS).action
        actions.append(found)
        # a probe fails against the outage and waits for its next try; a held one defers
        tries[n] = (
            a_try(n, "up_for_retry", start=at, end=at + timedelta(seconds=1))
            if found == PROBE
            else a_try(n, "deferred", start=at)
        )
    assert round_of(T0 + timedelta(seconds=17 + 3 * 12), SETTINGS) == round_of(T0, SETTINGS)
    assert actions.count(PROBE) == SETTINGS.min_probes
    assert actions.count(HOLD) == 12 - SETTINGS.min_probes


def test_readers_of_the_same_pool_in_the_same_round_pick_the_same_probes() -> None:
    one = outage()
    later = read(held_retries(), one.read_at + timedelta(seconds=30))
    number = round_of(one.read_at, SETTINGS)
    assert round_of(later.read_at, SETTINGS) == number
    assert probes_of(one, number, SETTINGS) == probes_of(later, number, SETTINGS)


def test_probes_rotate_among_the_task_instances_over_rounds() -> None:
    state = outage()
    number = round_of(state.read_at, SETTINGS)
    probes = {probes_of(state, number + ahead, SETTINGS)[0] for ahead in range(40)}
    assert len(probes) >= 8


def test_a_retry_the_triggerer_woke_probes_once_whatever_its_worker_reads_then() -> None:
    state = outage()
    number = round_of(state.read_at, SETTINGS)
    (probe,) = probes_of(state, number, SETTINGS)
    item = next(each for each in held_retries() if each.key == probe)
    assert admit(state, retry_of(item), SETTINGS).action == PROBE
    assert admit(state, retry_of(item, probed_round=number), SETTINGS).action == HOLD
    # its worker starts in the next round, and a retry left the ones listed: it still
    # probes, as the triggerer chose it, once
    others = [each for each in held_retries() if each.key != probe][1:]
    later = read([item, *others], round_start(number + 1, SETTINGS) + timedelta(seconds=2))
    assert admit(later, retry_of(item, woken=True), SETTINGS).action == PROBE
    woken_and_probed = retry_of(item, woken=True, probed_round=number + 1)
    assert admit(later, woken_and_probed, SETTINGS).action == HOLD
    # woken, it probes only while the pool is open: recovered, it waits for its wave
    assert admit(replace(later, state=RECOVERING), retry_of(item, woken=True), SETTINGS).action in (
        RELEASE,
        HOLD,
    )


def test_a_read_lists_at_most_a_page_of_candidates_whatever_the_pool_holds() -> None:
    tries = held_retries(10_000)
    reader = FakeReader([], pool_tries={POOL: tries})
    count = read_pool(reader, POOL, SETTINGS, now=T0 + timedelta(seconds=16))
    assert count.in_retry == 10_000 and len(count.candidates) == CANDIDATES
    assert len(reader.calls) == 3  # waiting, in a retry, successes since the failing began


def test_a_closed_pool_is_read_in_two_requests() -> None:
    reader = FakeReader([], pool_tries={POOL: held_retries(2)})
    read_pool(reader, POOL, SETTINGS, now=T0)
    assert len(reader.calls) == 2


def test_the_cut_offs_are_on_the_api_servers_clock() -> None:
    """The worker's clock is 40 s behind the server's: the look-back starts on the server's."""
    reader = FakeReader([], pool_tries={POOL: held_retries()})
    offset = timedelta(seconds=40)
    reader.clock_offset = type("Offset", (), {"low": offset, "high": offset})()  # type: ignore[attr-defined]
    local = T0 + timedelta(minutes=30)
    count = read_pool(reader, POOL, SETTINGS, now=local)
    assert count.read_at == local + offset
    assert count.since == local + offset - timedelta(seconds=SETTINGS.window_seconds)


def test_a_retry_with_one_attempt_left_probes_only_where_its_failed_probe_is_held_again() -> None:
    """retries=1: every held retry is on its last attempt. Waiting in the triggerer, a failed
    probe is held again rather than spent, so one probes each round; rescheduled (no
    triggerer), none may, as a failed probe would spend the last attempt."""
    tries = [a_try(n, "deferred", try_number=2, max_tries=1) for n in range(5)]
    state = read(tries, T0 + timedelta(seconds=1))
    assert state.state == OPEN
    number = round_of(state.read_at, SETTINGS)
    protected = [
        item for item in tries if admit(state, retry_of(item, protected=True), SETTINGS).runs
    ]
    assert [item.key for item in protected] == list(probes_of(state, number, SETTINGS))
    spent = {admit(state, retry_of(item), SETTINGS).action for item in tries}
    assert spent == {HOLD}


def test_forced_open_sends_no_probe_and_forced_closed_holds_nothing() -> None:
    at = T0 + timedelta(seconds=16)
    forced_open = read(held_retries(), at, forced=OPEN)
    assert {admit(forced_open, retry_of(item), SETTINGS).action for item in held_retries()} == {
        HOLD
    }
    assert forced_open.describe(SETTINGS) == "pool positions_api is forced open by on-call"
    forced_closed = read(held_retries(), at, forced=CLOSED)
    assert {admit(forced_closed, retry_of(item), SETTINGS).action for item in held_retries()} == {
        RUN
    }
    assert read([], at, forced=OPEN).state == OPEN


def test_a_held_retry_is_refused_at_its_latest_start_not_before() -> None:
    state = outage()
    number = round_of(state.read_at, SETTINGS)
    probes = set(probes_of(state, number, SETTINGS))
    held = next(item for item in held_retries() if item.key not in probes)
    latest = state.read_at + timedelta(seconds=90)
    found = admit(state, retry_of(held, latest_start=latest), SETTINGS)
    assert found.action == HOLD and found.hold_until is not None and found.hold_until <= latest
    refused = admit(replace(state, read_at=latest), retry_of(held, latest_start=latest), SETTINGS)
    assert refused.action == REFUSE and refused.decision == "deadline-infeasible"
    assert "positions_api" in refused.reason and "deadline" in refused.reason


def test_a_retry_whose_pool_cannot_be_read_waits_longer_at_each_hold() -> None:
    retry = retry_of(held_retries()[0])
    waits = [
        (unread(POOL, replace(retry, holds=holds), SETTINGS, "timed out", T0).hold_until, holds)
        for holds in range(10)
    ]
    assert [until - T0 for until, _ in waits][:3] == [timedelta(seconds=s) for s in (15, 30, 60)]
    assert max(until for until, _ in waits) == T0 + timedelta(seconds=MAX_HOLD)
    late = unread(POOL, retry, SETTINGS, "timed out", T0 + timedelta(hours=2))
    assert late.action == REFUSE and "could not be read (timed out)" in late.reason


def test_a_rescheduled_hold_waits_its_own_backoff_doubled_at_each_hold() -> None:
    state = outage()
    number = round_of(state.read_at, SETTINGS)
    probes = set(probes_of(state, number, SETTINGS))
    held = next(item for item in held_retries() if item.key not in probes)
    waits = []
    for holds in range(12):
        found = admit(state, retry_of(held, holds=holds), SETTINGS)
        assert found.action == HOLD and found.hold_until is not None
        assert found.hold_until >= round_start(number + 1, SETTINGS)
        wait = (found.hold_until - state.read_at).total_seconds()
        grown = min(15 * 2**holds, MAX_HOLD)
        assert wait <= grown * 1.2 + SETTINGS.round_seconds
        if found.next_probe is None:
            assert grown <= wait
        waits.append(wait)
    assert waits[3] > waits[0] > 0


def test_a_success_after_the_failing_began_releases_the_held_retries_in_waves() -> None:
    succeeded_at = T0 + timedelta(seconds=70)
    tries = [
        *held_retries(40),
        a_try(99, "success", try_number=3, start=succeeded_at, end=succeeded_at),
    ]
    state = read(tries, succeeded_at + timedelta(seconds=5))
    assert state.state == RECOVERING and state.successes == 1
    actions = [admit(state, retry_of(item), SETTINGS).action for item in held_retries(40)]
    # two for the round's probe and two for the success, of forty
    assert 1 <= actions.count(RELEASE) <= 12
    assert actions.count(RELEASE) + actions.count(HOLD) == 40


def test_a_success_from_before_the_failing_began_does_not_recover_it() -> None:
    earlier = a_try(20, "success", try_number=3, end=T0 - timedelta(seconds=60))
    assert read([*held_retries(), earlier], T0 + timedelta(seconds=16)).state == OPEN


def test_a_released_retry_that_fails_again_opens_it_again() -> None:
    tries = [
        *held_retries(5),
        a_try(5, "success", end=T0 + timedelta(seconds=30)),
        a_try(6, "up_for_retry", end=T0 + timedelta(seconds=40)),
    ]
    assert read(tries, T0 + timedelta(seconds=41)).state == OPEN


def test_waves_grow_from_the_first_success_whatever_later_successes_do() -> None:
    """A thousand held retries, their dependency back: each round the released ones run
    and succeed, and the next wave is twice as large. Once released, a retry stays released.
    """
    held = [a_try(n, "deferred", start=T0) for n in range(1000)]
    done: list[PoolTry] = [a_try(5000, "success", try_number=3, end=T0 + timedelta(seconds=60))]
    released_at: dict[tuple[str, str, str, int], int] = {}
    rounds = 0
    at = T0 + timedelta(seconds=61)
    while held and rounds < 30:
        rounds += 1
        state = read([*held, *done], at)
        assert state.state == RECOVERING
        now_released = [item for item in held if admit(state, retry_of(item), SETTINGS).runs]
        for item in now_released:
            released_at.setdefault(item.key, rounds)
        # a retry released earlier is released still
        assert all(released(state, retry_of(item), SETTINGS) for item in now_released)
        held = [item for item in held if item not in now_released]
        done += [replace(item, state="success", end_date=at) for item in now_released]
        at += timedelta(seconds=SETTINGS.round_seconds)
    assert not held
    assert rounds <= 12  # about log2(1000) rounds, not hours


def test_a_repeat_a_gate_holds_is_spread_and_grows_with_the_outage() -> None:
    state = outage()
    number = round_of(state.read_at, SETTINGS)
    ends = {repeat_held_until(state, ("", "", f"t{n}", -1), SETTINGS) for n in range(20)}
    assert len(ends) == 20  # spread, not all at the round's start
    assert min(ends) >= round_start(number + 1, SETTINGS)
    later = replace(state, read_at=state.read_at + timedelta(minutes=20))
    key = ("", "", "t0", -1)
    assert repeat_held_until(later, key, SETTINGS) - later.read_at >= timedelta(minutes=20)


def test_pools_are_tuned_or_switched_off_by_name_and_default_pool_is_nobodys() -> None:
    pools = PoolSettings.parse(
        SETTINGS, '{"positions_api": {"trip_tasks": 5}, "legacy": "off"}', option="dependency_pools"
    )
    assert pools.of("default_pool") is None
    assert pools.of("legacy") is None
    tuned = pools.of("positions_api")
    assert tuned is not None and tuned.trip_tasks == 5 and tuned.round_seconds == 60
    assert pools.of("warehouse") == SETTINGS
    assert pools.unknown({"positions_api", "warehouse"}) == ["legacy"]


def test_the_retired_probe_ratio_is_passed_over() -> None:
    pools = PoolSettings.parse(SETTINGS, '{"p": {"probe_ratio": 0.5}}', option="dependency_pools")
    assert pools.of("p") == SETTINGS


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[1, 2]", "dependency_pools = '[1, 2]'"),
        ('{"p": "on"}', "dependency_pools['p'] = 'on'"),
        ('{"p": {"trips": 3}}', "dependency_pools['p'].trips = 3"),
        ('{"p": {"min_probes": 101}}', "dependency_pools['p'].min_probes = 101"),
        ('{"p": {"round": 0}}', "dependency_pools['p'].round = 0"),
    ],
)
def test_a_bad_pool_setting_names_the_pool_the_field_and_the_value(text: str, named: str) -> None:
    with pytest.raises(DependencySettingError, match="is not valid") as raised:
        PoolSettings.parse(SETTINGS, text, option="dependency_pools")
    assert named in str(raised.value)
