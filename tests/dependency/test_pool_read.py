"""The read of a pool as a dependency, shared by the retry-start check and the gate."""

from __future__ import annotations

from datetime import timedelta

import pendulum

from airflow_retrywindow.dependency.fleet import PoolTry
from airflow_retrywindow.dependency.pool_read import counted_failed, read_fleet, server_now
from airflow_retrywindow.dependency.settings import DependencySettings
from airflow_retrywindow.hooks.api_reader import XComKey
from airflow_retrywindow.records.dependency_state import OPEN
from airflow_retrywindow.timing.skew import ClockOffset
from tests.gate.fake_reader import FakeReader

NOW = pendulum.datetime(2026, 3, 2, 5, 40, tz="UTC")
SETTINGS = DependencySettings()  # a 300 s window, three task instances trip it


def _try(task_id: str, state: str, ended: pendulum.DateTime | None) -> PoolTry:
    started = (ended or NOW).subtract(seconds=30)
    return PoolTry("feeds", "r1", task_id, -1, state, 1, 3, started, ended)


def _key(task_id: str, failure: str, at: pendulum.DateTime) -> XComKey:
    return XComKey(task_id, -1, f"retry_window.failure.{failure}", at, "feeds", "r1")


def test_a_read_lists_the_live_and_the_recently_ended_tries_of_the_pool() -> None:
    tries = [
        _try("a", "up_for_retry", NOW.subtract(seconds=50)),
        _try("b", "running", None),
        _try("c", "success", NOW.subtract(seconds=20)),
        _try("d", "success", NOW.subtract(hours=1)),  # ended before the window
    ]
    reader = FakeReader([], pool_tries={"positions": tries})
    fleet = read_fleet(reader, "positions", SETTINGS, now=NOW)
    assert [call[0] for call in reader.calls] == ["pool_tries", "pool_tries"]
    assert sorted(item.task_id for item in fleet.tries) == ["a", "b", "c"]
    assert (fleet.pool, fleet.read_at, fleet.forced) == ("positions", NOW, None)


def test_only_retryable_or_unknown_failures_in_the_window_count() -> None:
    ended = NOW.subtract(seconds=30)
    tries = [_try(name, "failed", ended) for name in ("a", "b", "c", "d")]
    keys = [
        _key("a", "retryable", ended),
        _key("b", "unknown", ended),
        _key("c", "terminal", ended),  # the task's own failure
        _key("d", "retryable", NOW.subtract(hours=1)),  # before the window
    ]
    reader = FakeReader([], pool_tries={"positions": tries}, recent_keys=keys)
    fleet = read_fleet(reader, "positions", SETTINGS, now=NOW)
    assert fleet.counted_failed == {("feeds", "r1", "a", -1), ("feeds", "r1", "b", -1)}
    assert counted_failed(keys, NOW.subtract(seconds=SETTINGS.window_seconds)) == (
        fleet.counted_failed
    )


def test_a_forced_state_is_kept_and_decides_the_state() -> None:
    reader = FakeReader([])
    fleet = read_fleet(reader, "positions", SETTINGS, forced="open", now=NOW)
    assert fleet.state(SETTINGS).state == OPEN


def test_the_read_is_timed_on_the_servers_clock_when_its_answers_measured_it() -> None:
    reader = FakeReader([])
    assert server_now(reader, NOW) == NOW  # nothing measured: this worker's clock
    reader.clock_offset = ClockOffset(timedelta(seconds=2), timedelta(seconds=4), "api")  # type: ignore[attr-defined]
    assert server_now(reader, NOW) == NOW.add(seconds=3)
    assert read_fleet(reader, "positions", SETTINGS, now=NOW).read_at == NOW.add(seconds=3)
