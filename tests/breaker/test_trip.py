"""A failing try and its pool's breaker: the mark it leaves, and the trip it makes.

The REST API is the local imitation of Airflow's (:mod:`tests.hooks.fake_api`), reached
through the provider's default connection, set as a deployment sets it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pendulum
import pytest

from airflow_retrywindow.breaker.settings import CONTROLLER_DAG, CONTROLLER_TASK
from airflow_retrywindow.breaker.trip import _refused_since_success, failed_try, read
from airflow_retrywindow.records.breaker_state import OPEN, BreakerState, failure_key
from tests.breaker.fake_pools import tried
from tests.breaker.states import POOL, closed, opened
from tests.hooks.fake_api import FakeAirflowApi, Served, pool, serve, stamp, task_instance

SETTING = "AIRFLOW__RETRY_WINDOW__BREAKER_POOLS"


@dataclass
class TaskInstance:
    """What the trip reads of Airflow's runtime task instance, and the XCom it pushes."""

    try_number: int = 2
    dag_id: str = "positions"
    task_id: str = "call"
    run_id: str = "manual__1"
    map_index: int = 7
    xcom: dict[str, Any] = field(default_factory=dict)

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value


def _fail(context: dict[str, Any], failure: str, *, ends: bool) -> None:
    """What the retry policy does with a failure: read the pool's breaker, then the trip."""
    failed_try(context, failure, ends=ends, found=read(context, failure))


def _context(pool_name: str = POOL) -> dict[str, Any]:
    return {"task": SimpleNamespace(pool=pool_name), "ti": TaskInstance()}


def _ended(state: str, seconds_ago: int) -> dict[str, Any]:
    """A task instance of the pool that ended ``state`` ``seconds_ago`` by this clock."""
    end = pendulum.now("UTC").subtract(seconds=seconds_ago)
    row = task_instance(f"call_{seconds_ago}", dag_id="positions")
    return {**row, "pool": POOL, "state": state, "end_date": stamp(end),
            "start_date": stamp(end.subtract(seconds=5))}  # fmt: skip


def _controller_running() -> dict[str, Any]:
    return {**task_instance(CONTROLLER_TASK, dag_id=CONTROLLER_DAG), "state": "deferred"}


@pytest.fixture
def api() -> FakeAirflowApi:
    """A breaker pool, closed, two calls refused since its last success, a controller."""
    return FakeAirflowApi(
        # a pool of three slots: three calls refused since its last success are a pool's worth
        pools=[pool(POOL, 3, description=closed(size=3).described("Positions API"))],
        task_instances=[
            _ended("up_for_retry", 3),
            _ended("up_for_retry", 8),
            _ended("success", 12),
            _ended("up_for_retry", 20),
            _controller_running(),
        ],
    )


@pytest.fixture
def server(api: FakeAirflowApi, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    for served in serve(api):
        monkeypatch.setenv("AIRFLOW_CONN_AIRFLOW_API_DEFAULT", served.connection())
        monkeypatch.setenv(SETTING, json.dumps({POOL: {"round": 30, "trip_calls": 3}}))
        yield served


def _trip_logs(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        each.getMessage()
        for each in caplog.records
        if each.name == "airflow_retrywindow.breaker.trip"
    ]


def _breaker(api: FakeAirflowApi) -> BreakerState | None:
    (row,) = [each for each in api.pools if each["name"] == POOL]
    return BreakerState.in_description(row["description"])


def test_the_calls_refused_are_those_that_ended_after_the_newest_served_call_began() -> None:
    now = pendulum.datetime(2026, 12, 7, 14, tz="UTC")

    def rows(*states: str, served: float = 7.0) -> list[Any]:
        return [
            tried(POOL, state, now.subtract(seconds=n), served if state == "success" else 1.0)
            for n, state in enumerate(states)
        ]

    # the success ended 2 s ago, its call began 9 s ago: the three refusals since count
    found = rows("up_for_retry", "up_for_retry", "success", "up_for_retry")
    assert _refused_since_success(found) == 3
    # a call that began after the refusals: they count for nothing against it
    assert _refused_since_success(rows("up_for_retry", "success", "up_for_retry", served=1.0)) == 1
    assert _refused_since_success(rows("success", "up_for_retry", served=0.5)) == 0
    assert _refused_since_success(rows("up_for_retry", "up_for_retry", "up_for_retry")) == 3
    assert _refused_since_success([]) == 0


@pytest.mark.parametrize("failure", ["terminal", "transient", "skipped"])
def test_a_failure_that_does_not_count_neither_marks_nor_reads(
    failure: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # no connection exists: any read would fail and be logged
    monkeypatch.setenv(SETTING, json.dumps({POOL: {}}))
    context = _context()
    with caplog.at_level(logging.WARNING):
        _fail(context, failure, ends=True)
    assert context["ti"].xcom == {} and _trip_logs(caplog) == []
    _fail(None, "retryable", ends=True)  # no context: nothing to count


def test_a_try_of_a_pool_that_is_no_breaker_neither_marks_nor_reads(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(SETTING, json.dumps({"warehouse": {}}))
    context = _context()
    with caplog.at_level(logging.WARNING):
        _fail(context, "retryable", ends=True)
        _fail(_context("default_pool"), "unknown", ends=True)
    assert context["ti"].xcom == {} and _trip_logs(caplog) == []


def test_the_third_call_refused_since_the_last_success_trips_the_breaker(
    server: Served,
) -> None:
    context = _context()
    _fail(context, "retryable", ends=False)
    assert context["ti"].xcom == {}  # a retry follows: its row counts it, no mark needed
    state = _breaker(server.api)
    assert state is not None and (state.phase, state.slots, state.size) == (OPEN, 0, 3)
    assert state.by == "positions.call[7] (manual__1)"
    assert state.reason == (
        "3 calls refused since the pool's last success; tripped by positions.call[7] (manual__1)"
    )
    (row,) = server.api.pools
    assert row["slots"] == 0 and row["description"].startswith("Positions API\n")
    # the pool, its tries since a round ago, the controller's task, the triggerer, the change
    assert [(each.method, each.path.rsplit("/", 1)[-1]) for each in server.api.received] == [
        ("POST", "token"), ("GET", POOL), ("GET", "taskInstances"), ("GET", "taskInstances"),
        ("GET", "health"), ("PATCH", POOL),
    ]  # fmt: skip


def test_a_try_that_ends_failed_marks_its_failure_and_trips_too(server: Served) -> None:
    context = _context()
    _fail(context, "unknown", ends=True)
    assert context["ti"].xcom == {failure_key(POOL): 2}
    state = _breaker(server.api)
    assert state is not None and state.phase == OPEN


def test_fewer_calls_refused_than_the_trip_leave_the_breaker_closed(
    server: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SETTING, json.dumps({POOL: {"round": 30, "trip_calls": 4}}))
    _fail(_context(), "retryable", ends=False)
    assert _breaker(server.api) == closed(size=3)
    assert "PATCH" not in {each.method for each in server.api.received}


def test_no_trip_where_no_controller_runs_the_breaker(
    server: Served, caplog: pytest.LogCaptureFixture
) -> None:
    server.api.task_instances = server.api.task_instances[:-1]  # the controller's task is gone
    with caplog.at_level(logging.WARNING):
        _fail(_context(), "retryable", ends=False)
    assert _breaker(server.api) == closed(size=3)
    assert "no controller runs it" in caplog.text and "the pool is not held" in caplog.text
    server.api.task_instances.append(_controller_running())
    server.api.triggerer_status = "unhealthy"  # nor where no triggerer runs its trigger
    _fail(_context(), "retryable", ends=False)
    assert _breaker(server.api) == closed(size=3)


def test_a_breaker_that_holds_already_or_is_not_watched_is_left_to_its_controller(
    server: Served,
) -> None:
    server.api.pools = [pool(POOL, 0, description=opened().described(None))]
    _fail(_context(), "retryable", ends=False)
    assert _breaker(server.api) == opened()
    server.api.pools = [pool(POOL, 24, description="no controller wrote here yet")]
    _fail(_context(), "retryable", ends=False)
    assert _breaker(server.api) is None
    assert "PATCH" not in {each.method for each in server.api.received}


def test_an_api_that_cannot_be_read_never_raises_into_the_policy(
    server: Served, caplog: pytest.LogCaptureFixture
) -> None:
    server.api.refuse_every_token = True
    context = _context()
    with caplog.at_level(logging.WARNING):
        _fail(context, "unknown", ends=True)
    assert context["ti"].xcom == {failure_key(POOL): 2}  # marked before anything is read
    assert "the failing try could not read it" in caplog.text
    assert "the controller counts the failure in its next round" in caplog.text


def test_a_failing_probe_closes_its_slot_before_it_is_freed(server: Served) -> None:
    # the controller opened one slot for a probe; the probe failed at once
    server.api.pools = [pool(POOL, 1, description=opened().described("Positions API"))]
    _fail(_context(), "retryable", ends=False)
    (row,) = server.api.pools
    assert row["slots"] == 0
    assert _breaker(server.api) == opened()  # the controller's state, untouched
