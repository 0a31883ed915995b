"""The controller's trigger and task, run on a controlled clock against a pool in memory."""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pendulum
import pytest
from airflow.triggers.base import TaskSuccessEvent, TriggerEvent

from airflow_retrywindow.breaker import control
from airflow_retrywindow.breaker.control import Controller
from airflow_retrywindow.breaker.settings import BreakerPools, BreakerSettings
from airflow_retrywindow.hooks.api_reader import PoolListing, PoolRow, PoolTry
from airflow_retrywindow.records.breaker_state import OPEN, BreakerState
from airflow_retrywindow.triggers import pool_breaker
from airflow_retrywindow.triggers.pool_breaker import PoolBreakerTrigger

START = pendulum.datetime(2026, 12, 7, 14, 0, tz="UTC")
POOLS = BreakerPools({"positions_api": BreakerSettings(round=15, trip_calls=3)})


class Pools:
    """One pool in memory, read and set as the REST API reads and sets it."""

    def __init__(self, row: PoolRow, ended: list[PoolTry]) -> None:
        self.row = row
        self.ended = ended
        self.sizes: list[int] = []
        self.clock_offset = None
        self.away = False

    def pools(self, names: Collection[str] | None = None) -> dict[str, PoolRow]:
        if self.away:
            raise ConnectionError("the API server is away")
        return {self.row.name: self.row}

    def pool_listing(self, pool: str, states: Collection[str], **kwargs: Any) -> PoolListing:
        since: datetime = kwargs["ended_since"]
        rows = [each for each in self.ended if each.end_date and each.end_date >= since]
        return PoolListing(tuple(rows), len(rows))

    def xcom_count(self, key: str, since: datetime) -> int:
        return 0

    def variables(self, prefix: str) -> dict[str, str]:
        return {}

    def set_pool(self, pool: PoolRow, slots: int, description: str) -> PoolRow:
        self.sizes.append(slots)
        self.row = replace(self.row, slots=slots, description=description)
        return self.row


class Clock:
    """A clock that moves only when the trigger waits."""

    def __init__(self, at: pendulum.DateTime) -> None:
        self.at = at
        self.waits: list[float] = []

    def now(self) -> pendulum.DateTime:
        return self.at

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.at = self.at.add(seconds=seconds)


def refused(count: int, at: pendulum.DateTime) -> list[PoolTry]:
    return [
        PoolTry("d", "r", "call", n, "up_for_retry", 1, 3, at.subtract(seconds=2), at)
        for n in range(count)
    ]


@pytest.fixture
def running(monkeypatch: pytest.MonkeyPatch) -> tuple[Pools, Clock]:
    row = PoolRow("positions_api", 8, 0, 0, 8, False, "Positions API")
    found = Pools(row, [])
    clock = Clock(START)
    monkeypatch.setattr("airflow_retrywindow.configuration.breaker_pools", lambda: POOLS)
    # the API server's clock is the trigger's: a round never reads this machine's
    monkeypatch.setattr(control, "server_now", lambda api: clock.now())
    monkeypatch.setattr(pool_breaker, "KEPT", {})  # no controller kept from another test
    monkeypatch.setattr(
        pool_breaker,
        "breaker_controller",
        lambda conn_id: Controller(found, POOLS, sleep=lambda s: None),
    )
    return found, clock


def yielded(trigger: PoolBreakerTrigger, clock: Clock) -> list[TriggerEvent]:
    trigger.clock = clock.now  # type: ignore[method-assign]
    trigger.sleep = clock.sleep  # type: ignore[method-assign]

    async def collect() -> list[TriggerEvent]:
        return [event async for event in trigger.run()]

    return asyncio.run(collect())


def events(trigger: PoolBreakerTrigger, clock: Clock) -> list[dict[str, Any]]:
    return [event.payload for event in yielded(trigger, clock)]


def test_the_trigger_watches_a_closed_pool_each_round_until_its_lease_is_renewed(
    running: tuple[Pools, Clock],
) -> None:
    found, clock = running
    trigger = PoolBreakerTrigger(conn_id="api", due={}, renew_at=START.add(seconds=150).isoformat())
    (event,) = events(trigger, clock)
    # its first round wrote the breaker's line; nine more rounds changed nothing
    assert found.sizes == [8]
    assert BreakerState.in_description(found.row.description) is not None
    assert event == {"due": {"positions_api": START.add(seconds=150).isoformat()}, "holding": False}
    assert sum(clock.waits) == pytest.approx(150)


@pytest.mark.parametrize("started_by_the_scheduler", [True, False])
def test_a_pool_that_starts_holding_renews_the_lease_before_its_next_round(
    running: tuple[Pools, Clock], monkeypatch: pytest.MonkeyPatch, started_by_the_scheduler: bool
) -> None:
    found, clock = running
    monkeypatch.setattr(pool_breaker, "AIRFLOW_V_3_3_PLUS", started_by_the_scheduler)
    found.ended = refused(5, START.add(seconds=10))
    trigger = PoolBreakerTrigger(conn_id="api", due={}, renew_at=START.add(hours=1).isoformat())
    (event,) = yielded(trigger, clock)
    state = BreakerState.in_description(found.row.description)
    assert state is not None and state.phase == OPEN and found.row.slots == 0
    # watched at 0 s, tripped at 15 s, then a yield 5 s before the next round: a short lease
    assert clock.at == START.add(seconds=25)
    if started_by_the_scheduler:
        # Airflow 3.3: the run ends, with no worker; the next starts in the triggerer
        assert isinstance(event, TaskSuccessEvent)
        return
    assert type(event) is TriggerEvent and event.payload["holding"] is True
    assert event.payload["due"] == {"positions_api": START.add(seconds=30).isoformat()}


def test_a_trigger_the_scheduler_started_keeps_the_rounds_its_pools_lines_tell(
    running: tuple[Pools, Clock], monkeypatch: pytest.MonkeyPatch
) -> None:
    found, clock = running
    monkeypatch.setattr(pool_breaker, "AIRFLOW_V_3_3_PLUS", True)
    opened = BreakerState.closed("positions_api", 8, START, "").moved(OPEN, 0, START, "refused")
    # the run before looked at the pool 5 s ago, and ended
    looked = replace(opened, checked_at=START.subtract(seconds=5), next_probe=START.add(hours=1))
    found.row = replace(found.row, slots=0, description=looked.described("Positions API"))
    (event,) = yielded(PoolBreakerTrigger(conn_id="api", due={}, renew_at=""), clock)
    # its round waited for the 10 s left of it, then kept the open pool's line current
    assert clock.waits[0] == pytest.approx(10)
    assert found.sizes == [0]
    state = BreakerState.in_description(found.row.description)
    assert state is not None and state.checked_at == START.add(seconds=10)
    # the lease the scheduler began is renewed within a round, by ending the run
    assert isinstance(event, TaskSuccessEvent)
    assert clock.at == START.add(seconds=15)


def test_a_round_that_fails_is_made_again_with_a_new_controller(
    running: tuple[Pools, Clock], monkeypatch: pytest.MonkeyPatch
) -> None:
    found, clock = running
    built: list[str] = []

    def controller(conn_id: str) -> Controller:
        built.append(conn_id)
        if len(built) == 1:
            raise RuntimeError("the connection's password changed")
        return Controller(found, POOLS, sleep=lambda s: None)

    monkeypatch.setattr(pool_breaker, "breaker_controller", controller)
    monkeypatch.setattr(pool_breaker, "AIRFLOW_V_3_3_PLUS", False)  # resumed by a worker
    first = PoolBreakerTrigger(conn_id="api", due={}, renew_at=START.add(hours=1).isoformat())
    (event,) = events(first, clock)
    # nobody could look at the pools: the lease is renewed short, before the next round
    assert event["holding"] is True and found.sizes == []
    assert clock.at == START.add(seconds=10)
    second = PoolBreakerTrigger(
        conn_id="api", due=event["due"], renew_at=START.add(seconds=40).isoformat()
    )
    (event,) = events(second, clock)
    assert built == ["api", "api"]
    assert found.sizes == [8]  # the second trigger's round watched the pool
    assert event["holding"] is False


def test_the_controllers_task_defers_with_a_plain_timedelta_lease(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow.sdk.exceptions import TaskDeferred

    from airflow_retrywindow.operators.pool_breaker import LEASE_GRACE, PoolBreakerOperator

    monkeypatch.setattr("airflow_retrywindow.configuration.breaker_pools", lambda: POOLS)
    task = PoolBreakerOperator(task_id="control", airflow_conn_id="api")
    with pytest.raises(TaskDeferred) as deferred:
        task.renew({}, {"due": {"positions_api": START.isoformat()}, "holding": True})
    # a plain timedelta: the task's supervisor encodes no pendulum type
    assert type(deferred.value.timeout) is timedelta
    classpath, kwargs = deferred.value.trigger.serialize()
    assert classpath.endswith("PoolBreakerTrigger")
    renew_at = pendulum.parse(kwargs["renew_at"])
    # held: the lease is renewed a round after the next round is due
    assert renew_at == START.add(seconds=15)
    assert deferred.value.timeout > timedelta(0) or renew_at < pendulum.now("UTC")
    assert timedelta(seconds=30) >= LEASE_GRACE


def test_the_next_trigger_keeps_the_controller_until_a_round_fails(
    running: tuple[Pools, Clock], monkeypatch: pytest.MonkeyPatch
) -> None:
    found, clock = running
    built: list[Controller] = []

    def controller(conn_id: str) -> Controller:
        built.append(Controller(found, POOLS, sleep=lambda s: None))
        return built[-1]

    monkeypatch.setattr(pool_breaker, "breaker_controller", controller)
    for _ in range(2):  # a run of the controller's DAG each: the first client's token kept
        events(PoolBreakerTrigger(conn_id="api", due={}, renew_at=""), clock)
    assert len(built) == 1 and {"api": built[0]} == pool_breaker.KEPT
    # a round that fails drops it: the next reads the connection anew
    found.away = True
    events(PoolBreakerTrigger(conn_id="api", due={}, renew_at=""), clock)
    assert len(built) == 1 and pool_breaker.KEPT == {}
    found.away = False
    events(PoolBreakerTrigger(conn_id="api", due={}, renew_at=""), clock)
    assert len(built) == 2 and {"api": built[1]} == pool_breaker.KEPT


@pytest.mark.parametrize("airflow_3_3", [True, False])
def test_the_controllers_task_starts_in_the_triggerer_where_airflow_can(
    monkeypatch: pytest.MonkeyPatch, airflow_3_3: bool
) -> None:
    from airflow_retrywindow.operators.pool_breaker import LEASE_GRACE, RENEW, PoolBreakerOperator

    monkeypatch.setattr("airflow_retrywindow.configuration.breaker_pools", lambda: POOLS)
    monkeypatch.setattr("airflow_retrywindow.version_compat.AIRFLOW_V_3_3_PLUS", airflow_3_3)
    task = PoolBreakerOperator(task_id="control", airflow_conn_id="api")
    if not airflow_3_3:  # Airflow 3.1 and 3.2 start no task from a trigger: a worker does
        assert task.start_from_trigger is False and task.start_trigger_args is None
        return
    # the scheduler defers each run's task to the trigger with no worker, on a short lease
    assert task.start_from_trigger is True
    started = task.start_trigger_args
    assert started is not None
    assert started.trigger_cls == pool_breaker.CLASSPATH and started.next_method == RENEW
    assert started.trigger_kwargs == {"conn_id": "api", "due": {}, "renew_at": ""}
    # renewed within a round, with half a round and the scheduler's check to spare
    assert started.timeout == timedelta(seconds=15 + 7.5) + LEASE_GRACE
