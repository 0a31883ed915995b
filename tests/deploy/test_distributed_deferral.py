"""The distributed path's deferral day: the sensor must defer its backoff to the triggerer,
which is restarted meanwhile; a sensor that did not defer fails the day, however late a
busy machine started it (``devstack.distributed.deferral_day``, ``Deferral``)."""

from __future__ import annotations

from typing import Any

import pendulum
import pytest

from devstack import distributed
from devstack.distributed import (
    DEFERRAL_DAY,
    Deferral,
    Failure,
    SensorClock,
    deferral_day,
)

UNTIL = pendulum.datetime(2026, 12, 5, 4, 1, 30, tz="UTC")


def seen(wait: float, *, deferred: float, held: float, resumed_after: float = 2.0) -> Deferral:
    return Deferral(
        wait=wait,
        deferred=deferred,
        held=held,
        until=UNTIL,
        resumed_at=UNTIL.add(seconds=resumed_after),
    )


def test_a_wait_deferred_throughout_and_resumed_after_the_backoff_passes() -> None:
    assert seen(80.0, deferred=79.2, held=0.6).problems() == []


def test_a_sensor_started_under_the_short_wait_fails_though_it_rightly_slept() -> None:
    found = seen(6.0, deferred=0.0, held=6.0).problems(short_wait=10.0)
    assert any("6.0 s of its backoff left" in problem for problem in found), found
    assert any("never deferred" in problem for problem in found), found


def test_a_sensor_that_slept_a_wait_too_short_to_measure_still_fails() -> None:
    # held and deferred are both within the sampling's slack: only the deferral check sees it
    found = seen(1.0, deferred=0.0, held=1.0).problems(short_wait=10.0)
    assert any("never deferred" in problem for problem in found), found


def test_a_sensor_that_held_a_worker_slot_fails() -> None:
    found = seen(80.0, deferred=60.0, held=20.0).problems()
    assert any("held a worker slot for 20.0 s" in problem for problem in found), found


def test_a_sensor_resumed_long_after_the_backoff_fails() -> None:
    found = seen(80.0, deferred=80.0, held=0.0, resumed_after=75.0).problems()
    assert any("not just after" in problem for problem in found), found


class Day:
    """Stands in for ``run_day`` and ``first_wait``: one run, whether the triggerer was
    restarted, and how much of the backoff the sensor had left."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, restarted: bool, left: float) -> None:
        self.restarted, self.left = restarted, left
        self.played: list[Any] = []
        monkeypatch.setattr(distributed, "run_day", self.run_day)
        monkeypatch.setattr(distributed, "first_wait", self.first_wait)

    def run_day(self, stack: Any, day: Any, *, restart_triggerer: bool) -> Any:
        assert restart_triggerer
        self.played.append(day)
        return f"manual__{day.business_date}", SensorClock(), self.restarted

    def first_wait(self, stack: Any, run_id: str) -> tuple[pendulum.DateTime, pendulum.DateTime]:
        return UNTIL.subtract(seconds=self.left), UNTIL


def test_a_restarted_day_is_the_one_run(monkeypatch: pytest.MonkeyPatch) -> None:
    day = Day(monkeypatch, restarted=True, left=80.0)
    run_id, _ = deferral_day(stack=None)  # type: ignore[arg-type]
    assert day.played == [DEFERRAL_DAY]
    assert run_id == f"manual__{DEFERRAL_DAY.business_date}"


@pytest.mark.parametrize("left", [6.0, 80.0])
def test_a_sensor_never_seen_deferred_fails_the_day_without_another_run(
    monkeypatch: pytest.MonkeyPatch, left: float
) -> None:
    day = Day(monkeypatch, restarted=False, left=left)
    with pytest.raises(Failure, match=rf"never seen deferred \(it started with {left:.1f} s"):
        deferral_day(stack=None)  # type: ignore[arg-type]
    assert day.played == [DEFERRAL_DAY]
