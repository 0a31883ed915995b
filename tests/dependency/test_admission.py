"""The dependency's state from a pool's task instances, and what a starting retry does."""

from __future__ import annotations

from datetime import timedelta

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
    round_of,
    round_start,
)
from airflow_retrywindow.dependency.fleet import Fleet, PoolTry
from airflow_retrywindow.dependency.settings import (
    MAX_HOLD,
    DependencySettingError,
    DependencySettings,
    PoolSettings,
)
from airflow_retrywindow.records.dependency_state import CLOSED, OPEN, RECOVERING

SETTINGS = DependencySettings()
#: the start of a round, so that tests know where rounds begin
T0 = round_start(round_of(pendulum.datetime(2026, 12, 4, 14, tz="UTC"), SETTINGS), SETTINGS)
POOL = "positions_api"


def a_try(number: int, state: str, try_number: int = 2, **times: pendulum.DateTime) -> PoolTry:
    return PoolTry(
        dag_id="dag",
        run_id="run",
        task_id=f"load_{number}",
        map_index=-1,
        state=state,
        try_number=try_number,
        max_tries=3,
        start_date=times.get("start", T0 - timedelta(seconds=20)),
        end_date=times.get("end"),
    )


def retry_of(item: PoolTry, **changes: object) -> Retry:
    fields: dict[str, object] = {
        "key": item.key,
        "try_number": item.try_number,
        "attempts_left": item.max_tries - item.try_number + 2,
        "backoff_seconds": 15,
        "latest_start": T0 + timedelta(hours=1),
    }
    fields.update(changes)
    return Retry(**fields)  # type: ignore[arg-type]


def outage(count: int = 12, at: pendulum.DateTime = T0 + timedelta(seconds=15)) -> Fleet:
    """``count`` task instances whose retries all started at once against a down service."""
    tries = tuple(a_try(n, "running", start=at) for n in range(count))
    return Fleet(POOL, at + timedelta(seconds=1), tries)


def test_retries_started_together_after_failures_open_the_breaker() -> None:
    state = outage().state(SETTINGS)
    assert state.state == OPEN
    assert len(state.failing) == 12 and len(state.eligible) == 12


def test_fewer_failing_task_instances_than_the_trip_leave_it_closed() -> None:
    assert outage(count=2).state(SETTINGS).state == CLOSED
    retry = retry_of(outage(count=2).tries[0])
    assert admit(outage(count=2).state(SETTINGS), retry, SETTINGS).action == RUN


def test_a_terminal_failure_ends_failed_and_does_not_count() -> None:
    ended = T0 + timedelta(seconds=5)
    tries = tuple(a_try(n, "failed", try_number=1, end=ended) for n in range(5))
    read = Fleet(POOL, ended + timedelta(seconds=1), tries)
    assert read.state(SETTINGS).state == CLOSED
    # the same failures, classed unknown by the policy (its XCom key): they count
    counted = frozenset(item.key for item in tries)
    assert Fleet(POOL, read.read_at, tries, counted).state(SETTINGS).state == OPEN


def test_each_round_probes_its_budget_and_every_other_retry_is_held() -> None:
    state = outage().state(SETTINGS)
    actions = [admit(state, retry_of(item), SETTINGS).action for item in outage().tries]
    assert actions.count(PROBE) == SETTINGS.budget(state.first_tries) == 1
    assert actions.count(HOLD) == 11


def test_workers_reading_the_same_pool_in_the_same_round_pick_the_same_probes() -> None:
    one = outage().state(SETTINGS)
    later = Fleet(POOL, one.read_at + timedelta(seconds=30), outage().tries).state(SETTINGS)
    number = round_of(one.read_at, SETTINGS)
    assert round_of(later.read_at, SETTINGS) == number
    assert probes_of(one, number, SETTINGS) == probes_of(later, number, SETTINGS)


def test_probes_rotate_among_the_task_instances_over_rounds() -> None:
    state = outage().state(SETTINGS)
    number = round_of(state.read_at, SETTINGS)
    probes = {probes_of(state, number + ahead, SETTINGS)[0] for ahead in range(40)}
    assert len(probes) >= 8


def test_a_task_instance_probes_once_a_round() -> None:
    state = outage().state(SETTINGS)
    number = round_of(state.read_at, SETTINGS)
    (probe,) = probes_of(state, number, SETTINGS)
    item = next(each for each in outage().tries if each.key == probe)
    assert admit(state, retry_of(item), SETTINGS).action == PROBE
    assert admit(state, retry_of(item, probed_round=number), SETTINGS).action == HOLD


def test_a_task_instance_with_one_attempt_left_never_probes() -> None:
    tries = tuple(a_try(n, "running", try_number=4, start=T0) for n in range(5))
    state = Fleet(POOL, T0 + timedelta(seconds=1), tries).state(SETTINGS)
    assert state.state == OPEN and state.eligible == ()
    assert {admit(state, retry_of(item), SETTINGS).action for item in tries} == {HOLD}


def test_the_budget_follows_the_first_tries_of_the_last_round() -> None:
    assert SETTINGS.budget(0) == 1
    assert SETTINGS.budget(12) == 2  # floor(0.2 x 12)
    assert SETTINGS.budget(100) == 20


def test_a_hold_waits_the_retrys_own_backoff_doubled_at_each_hold_and_at_least_a_round() -> None:
    state = outage().state(SETTINGS)
    number = round_of(state.read_at, SETTINGS)
    probes = set(probes_of(state, number, SETTINGS))
    held = next(item for item in outage().tries if item.key not in probes)
    waits = []
    for holds in range(12):
        found = admit(state, retry_of(held, holds=holds), SETTINGS)
        assert found.action == HOLD and found.hold_until is not None
        assert found.hold_until >= round_start(number + 1, SETTINGS)
        wait = (found.hold_until - state.read_at).total_seconds()
        grown = min(15 * 2**holds, MAX_HOLD)
        if found.next_probe is None:
            # its own backoff doubled, spread by at most a fifth of it
            assert grown <= wait <= grown * 1.2 + SETTINGS.round_seconds
        else:
            # earlier only for the round in which it probes
            at = round_of(found.next_probe, SETTINGS)
            assert held.key in probes_of(state, at, SETTINGS)
            assert wait <= grown * 1.2 + SETTINGS.round_seconds
        waits.append(wait)
    assert waits[3] > waits[0] > 0


def test_a_held_retry_is_refused_at_its_latest_start_not_before() -> None:
    state = outage().state(SETTINGS)
    number = round_of(state.read_at, SETTINGS)
    probes = set(probes_of(state, number, SETTINGS))
    held = next(item for item in outage().tries if item.key not in probes)
    latest = state.read_at + timedelta(seconds=90)
    found = admit(state, retry_of(held, latest_start=latest), SETTINGS)
    assert found.action == HOLD and found.hold_until is not None and found.hold_until <= latest
    at_latest = Fleet(POOL, latest, outage().tries).state(SETTINGS)
    refused = admit(at_latest, retry_of(held, latest_start=latest), SETTINGS)
    assert refused.action == REFUSE and refused.decision == "deadline-infeasible"
    assert "positions_api" in refused.reason and "deadline" in refused.reason


def test_a_success_after_the_latest_failure_releases_the_held_retries_in_waves() -> None:
    failed_at = T0 + timedelta(seconds=10)
    succeeded_at = T0 + timedelta(seconds=70)
    tries = (
        *(a_try(n, "up_for_reschedule", end=failed_at) for n in range(10)),
        a_try(10, "up_for_retry", end=failed_at),
        a_try(
            11, "success", try_number=3, start=succeeded_at - timedelta(seconds=1), end=succeeded_at
        ),
    )
    read = Fleet(POOL, succeeded_at + timedelta(seconds=5), tries)
    state = read.state(SETTINGS)
    assert state.state == RECOVERING
    retry = retry_of(tries[0])
    assert admit(state, retry, SETTINGS, released_this_round=0).action == RELEASE
    first_wave = 2 * SETTINGS.budget(state.first_tries)
    held = admit(state, retry, SETTINGS, released_this_round=first_wave)
    assert held.action == HOLD and held.hold_until is not None
    assert held.hold_until <= round_start(round_of(read.read_at, SETTINGS) + 2, SETTINGS)


def test_a_success_from_before_the_failing_began_does_not_recover_it() -> None:
    earlier = a_try(20, "success", try_number=3, end=T0 - timedelta(seconds=200))
    read = outage()
    state = Fleet(POOL, read.read_at, (*read.tries, earlier)).state(SETTINGS)
    assert state.successes == 1
    assert state.state == OPEN


def test_held_retries_checked_after_the_recovery_do_not_open_it_again() -> None:
    succeeded_at = T0 + timedelta(seconds=70)
    after = succeeded_at + timedelta(seconds=20)
    tries = (
        # held retries whose checks ended after the probe's success, and one checking now
        *(a_try(n, "up_for_reschedule", end=after) for n in range(6)),
        a_try(6, "running", start=after),
        a_try(7, "success", try_number=3, end=succeeded_at),
    )
    state = Fleet(POOL, after + timedelta(seconds=5), tries).state(SETTINGS)
    assert state.state == RECOVERING
    # two rounds without a success, and nothing seen to end failed: open again, to probe
    later = Fleet(POOL, succeeded_at + timedelta(seconds=150), tries).state(SETTINGS)
    assert later.state == OPEN


def test_a_failure_after_the_recovery_opens_it_again() -> None:
    tries = (
        *(a_try(n, "up_for_reschedule", end=T0) for n in range(5)),
        a_try(5, "success", end=T0 + timedelta(seconds=10)),
        a_try(6, "up_for_retry", end=T0 + timedelta(seconds=20)),
    )
    assert Fleet(POOL, T0 + timedelta(seconds=21), tries).state(SETTINGS).state == OPEN


def test_on_call_forces_the_state() -> None:
    forced_closed = Fleet(POOL, T0, outage().tries, forced=CLOSED).state(SETTINGS)
    assert admit(forced_closed, retry_of(outage().tries[0]), SETTINGS).action == RUN
    assert "forced closed" in forced_closed.describe(SETTINGS)
    assert Fleet(POOL, T0, (), forced=OPEN).state(SETTINGS).state == OPEN


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


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[1, 2]", "dependency_pools = '[1, 2]'"),
        ('{"p": "on"}', "dependency_pools['p'] = 'on'"),
        ('{"p": {"trips": 3}}', "dependency_pools['p'].trips = 3"),
        ('{"p": {"probe_ratio": 2}}', "dependency_pools['p'].probe_ratio = 2"),
        ('{"p": {"round": 0}}', "dependency_pools['p'].round = 0"),
    ],
)
def test_a_bad_pool_setting_names_the_pool_the_field_and_the_value(text: str, named: str) -> None:
    with pytest.raises(DependencySettingError, match="is not valid") as raised:
        PoolSettings.parse(SETTINGS, text, option="dependency_pools")
    assert named in str(raised.value)
