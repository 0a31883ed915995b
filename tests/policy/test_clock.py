"""The clock mapping: conservative rounding at every boundary."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pendulum
import pytest

from airflow_retrywindow.timing.clock import Clock, ClockError, seconds_down, seconds_up

ORIGIN = pendulum.datetime(2026, 12, 2, 10, 0, 0, tz="UTC")
CLOCK = Clock(origin=ORIGIN)


@pytest.mark.parametrize(
    ("micros", "up", "down"),
    [(0, 0, 0), (1, 1, 0), (999_999, 1, 0), (1_000_000, 1, 1), (1_000_001, 2, 1)],
)
def test_rounding_at_second_boundaries(micros: int, up: int, down: int) -> None:
    when = ORIGIN + timedelta(microseconds=micros)
    assert CLOCK.up(when) == up
    assert CLOCK.down(when) == down


def test_durations_round_up_and_allowances_round_down() -> None:
    assert seconds_up(timedelta(seconds=35, microseconds=1)) == 36
    assert seconds_up(timedelta(seconds=35)) == 35
    assert seconds_down(timedelta(seconds=59, microseconds=999_999)) == 59
    assert seconds_up(timedelta(microseconds=-1)) == 0


def test_origin_moves_back_to_the_earliest_instant_on_a_whole_second() -> None:
    early = pendulum.datetime(2026, 12, 2, 9, 59, 30, 500_000, tz="UTC")
    clock = Clock.starting_at(ORIGIN, early, ORIGIN.add(hours=1))
    assert clock.origin == pendulum.datetime(2026, 12, 2, 9, 59, 30, tz="UTC")
    assert clock.down(early) == 0
    assert clock.up(ORIGIN) == 30


def test_other_timezones_land_on_the_same_utc_clock() -> None:
    lisbon = pendulum.datetime(2026, 7, 2, 11, 0, 5, tz="Europe/Lisbon")  # UTC+1
    assert Clock(pendulum.datetime(2026, 7, 2, 10, tz="UTC")).up(lisbon) == 5
    stdlib = datetime(2026, 12, 2, 10, 0, 7, tzinfo=timezone.utc)
    assert CLOCK.down(stdlib) == 7


def test_round_trip_through_the_recorded_origin() -> None:
    replayed = Clock.from_iso(CLOCK.iso())
    assert CLOCK.iso() == "2026-12-02T10:00:00Z"
    assert replayed.at(140) == ORIGIN.add(seconds=140)


def test_naive_and_out_of_range_times_are_refused() -> None:
    with pytest.raises(ClockError, match="naive datetime 2026-12-02T10:00:00"):
        CLOCK.up(datetime(2026, 12, 2, 10))
    with pytest.raises(ClockError, match="before the clock origin"):
        CLOCK.down(ORIGIN.subtract(seconds=1))
    with pytest.raises(ClockError, match="cannot represent it"):
        CLOCK.up(ORIGIN.add(seconds=1_000_000_001))
