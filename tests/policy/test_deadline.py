"""Deadlines resolved against a run's context, daylight-saving changes included."""

from __future__ import annotations

from datetime import datetime

import pendulum
import pytest

from airflow_retrywindow.timing.deadline import Deadline, DeadlineError


def daily_run(day: tuple[int, int, int], tz: str = "UTC") -> dict[str, pendulum.DateTime]:
    start = pendulum.datetime(*day, tz=tz)
    return {"data_interval_start": start, "data_interval_end": start.add(days=1)}


def test_offsets_from_the_data_interval() -> None:
    run = daily_run((2026, 12, 1))
    assert Deadline.after_data_interval_end(hours=6).resolve(run) == pendulum.datetime(
        2026, 12, 2, 6, tz="UTC"
    )
    assert Deadline.after_data_interval_start(hours=30).resolve(run) == pendulum.datetime(
        2026, 12, 2, 6, tz="UTC"
    )


def test_fixed_deadline_is_kept_in_utc() -> None:
    fixed = Deadline.at(pendulum.datetime(2026, 12, 2, 6, tz="Europe/Lisbon"))
    assert fixed.resolve({}) == pendulum.datetime(2026, 12, 2, 6, tz="UTC")


@pytest.mark.parametrize(
    ("day", "expected_utc"),
    [
        # winter (UTC+0) and summer (UTC+1): 06:00 local either way
        ((2026, 12, 1), pendulum.datetime(2026, 12, 2, 6, tz="UTC")),
        ((2026, 7, 1), pendulum.datetime(2026, 7, 2, 5, tz="UTC")),
        # the nights the clocks change: the morning after keeps its local 06:00
        ((2026, 3, 28), pendulum.datetime(2026, 3, 29, 5, tz="UTC")),
        ((2026, 10, 24), pendulum.datetime(2026, 10, 25, 6, tz="UTC")),
    ],
)
def test_daily_at_keeps_local_time_across_dst(
    day: tuple[int, int, int], expected_utc: pendulum.DateTime
) -> None:
    deadline = Deadline.daily_at("06:00", tz="Europe/Lisbon")
    assert deadline.resolve(daily_run(day, tz="Europe/Lisbon")) == expected_utc


def test_daily_at_in_a_dst_gap_and_overlap_takes_the_earlier_instant() -> None:
    deadline = Deadline.daily_at("01:30", tz="Europe/Lisbon")
    # 29 March 2026: 01:00 -> 02:00, so 01:30 never happens; its earlier reading
    # (at UTC+1) is 00:30 UTC, the later one (at UTC+0) 01:30 UTC
    gap = deadline.resolve(daily_run((2026, 3, 28), tz="Europe/Lisbon"))
    assert gap == pendulum.datetime(2026, 3, 29, 0, 30, tz="UTC")
    # 25 October 2026: 02:00 -> 01:00, so 01:30 happens twice; the first is UTC+1
    overlap = deadline.resolve(daily_run((2026, 10, 24), tz="Europe/Lisbon"))
    assert overlap == pendulum.datetime(2026, 10, 25, 0, 30, tz="UTC")


def test_daily_at_is_the_first_occurrence_at_or_after_the_interval_end() -> None:
    end = pendulum.datetime(2026, 12, 2, 7, tz="UTC")
    run = {"data_interval_start": end.subtract(hours=1), "data_interval_end": end}
    assert Deadline.daily_at("06:00", tz="UTC").resolve(run) == pendulum.datetime(
        2026, 12, 3, 6, tz="UTC"
    )


def test_computed_deadline_must_return_an_aware_datetime() -> None:
    good = Deadline.computed(lambda context: context["data_interval_end"].add(hours=1))
    assert good.resolve(daily_run((2026, 12, 1))) == pendulum.datetime(2026, 12, 2, 1, tz="UTC")
    naive = Deadline.computed(lambda context: datetime(2026, 12, 2, 6))
    with pytest.raises(DeadlineError, match="naive datetime"):
        naive.resolve({})


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Deadline.at(datetime(2026, 12, 2, 6)), "naive datetime"),
        (lambda: Deadline.daily_at("6am", tz="UTC"), "wall_clock must be 'HH:MM'"),
        (lambda: Deadline.daily_at("24:00", tz="UTC"), "got '24:00'"),
        (lambda: Deadline.daily_at("06:00", tz="Mars/Olympus"), "got 'Mars/Olympus'"),
        (lambda: Deadline.after_data_interval_end(hours=-1), "must not be negative"),
        (lambda: Deadline.after_data_interval_end(fortnights=1), "deadline offset"),
        (lambda: Deadline.coerce("06:00"), "got '06:00'"),
    ],
)
def test_bad_deadlines_are_refused_at_construction(build: object, message: str) -> None:
    with pytest.raises(DeadlineError, match=message):
        build()  # type: ignore[operator]


def test_a_run_without_a_data_interval_explains_what_to_use() -> None:
    with pytest.raises(DeadlineError, match="no data_interval_end"):
        Deadline.after_data_interval_end(hours=1).resolve({"data_interval_end": None})


def test_a_deadline_alert_is_coerced_and_anything_else_named() -> None:
    # the alert cases themselves are in test_deadline_alert.py
    with pytest.raises(DeadlineError, match="an Airflow DeadlineAlert or a callable"):
        Deadline.coerce(42)
