"""The distributed path's triggerer-restart day: tried once more only when a busy machine
started the sensor too late to defer (``devstack.distributed.restart_day``)."""

from __future__ import annotations

from typing import Any

import pendulum
import pytest

from devstack import distributed
from devstack.distributed import RESTART_DAYS, Failure, SensorClock, restart_day

BEGAN = pendulum.datetime(2026, 12, 5, 4, 0, 0, tz="UTC")


class Days:
    """Stands in for ``run_day`` and ``first_wait``: each day's run, in order, says
    whether the triggerer was restarted and how much of the backoff the sensor had left."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *runs: tuple[bool, float]) -> None:
        self.runs = list(runs)
        self.played: list[str] = []
        self.left: dict[str, float] = {}
        monkeypatch.setattr(distributed, "run_day", self.run_day)
        monkeypatch.setattr(distributed, "first_wait", self.first_wait)

    def run_day(self, stack: Any, day: Any, *, restart_triggerer: bool) -> Any:
        assert restart_triggerer
        restarted, left = self.runs[len(self.played)]
        run_id = f"manual__{day.business_date}"
        self.played.append(day.business_date)
        self.left[run_id] = left
        return run_id, SensorClock(), restarted

    def first_wait(self, stack: Any, run_id: str) -> tuple[pendulum.DateTime, pendulum.DateTime]:
        return BEGAN, BEGAN.add(seconds=self.left[run_id])


def test_a_restarted_first_day_is_the_only_one(monkeypatch: pytest.MonkeyPatch) -> None:
    days = Days(monkeypatch, (True, 20.0))
    run_id, _ = restart_day(stack=None)  # type: ignore[arg-type]
    assert days.played == [RESTART_DAYS[0].business_date]
    assert run_id == f"manual__{RESTART_DAYS[0].business_date}"


def test_a_sensor_started_under_the_short_wait_is_tried_once_more_on_another_day(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    days = Days(monkeypatch, (False, 6.0), (True, 20.0))
    run_id, _ = restart_day(stack=None)  # type: ignore[arg-type]
    assert days.played == [day.business_date for day in RESTART_DAYS]
    assert run_id == f"manual__{RESTART_DAYS[1].business_date}"


def test_a_sensor_with_time_to_defer_that_never_did_fails_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    days = Days(monkeypatch, (False, 20.0), (True, 20.0))
    with pytest.raises(Failure, match="never seen deferred"):
        restart_day(stack=None)  # type: ignore[arg-type]
    assert days.played == [RESTART_DAYS[0].business_date]


def test_two_late_sensors_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    days = Days(monkeypatch, (False, 6.0), (False, 4.0))
    with pytest.raises(Failure, match="never seen deferred"):
        restart_day(stack=None)  # type: ignore[arg-type]
    assert len(days.played) == 2
