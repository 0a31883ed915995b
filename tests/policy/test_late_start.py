"""A try of a breaker pool that starts past its latest start is refused before its code runs.

Its pool's breaker may have held it there, first try or retry: nothing runs that cannot
finish, validation included, before its deadline. The check runs in-process, on the
worker's stand-ins; the API server's clock is a local server whose ``Date`` runs as the
test says (as in ``test_server_clock.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pendulum
import pytest
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowFailException

from airflow_retrywindow import Deadline, RetryWindowPolicy
from airflow_retrywindow.policies.retry_start import RetryStartCheck, held_past_latest_start
from airflow_retrywindow.records.breaker_state import LATE_START
from airflow_retrywindow.timing.time_limit import TimeLimit
from tests.hooks.fake_api import FakeAirflowApi, Served, serve
from tests.policy.resumable_jobs import Store, TaskInstance

START = pendulum.datetime(2026, 3, 1, tz="UTC")
POOL = "positions_api"
#: one attempt and its validation
WORK = timedelta(minutes=10, seconds=60)


@pytest.fixture(autouse=True)
def breaker_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__RETRY_WINDOW__BREAKER_POOLS", json.dumps({POOL: {}}))


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    for served in serve(FakeAirflowApi()):
        monkeypatch.setenv("AIRFLOW__CORE__EXECUTION_API_SERVER_URL", f"{served.url}/execution/")
        monkeypatch.setenv("AIRFLOW__RETRY_WINDOW__CLOCK_SKEW_TOLERANCE", "10")
        yield served


def _task(due: pendulum.DateTime, pool: str = POOL) -> PythonOperator:
    with DAG(f"rw_late_start_{pool}", schedule=None, start_date=START):
        return PythonOperator(
            task_id="load",
            python_callable=lambda: None,
            pool=pool,
            retries=2,
            retry_delay=timedelta(seconds=30),
            retry_policy=RetryWindowPolicy(
                deadline=Deadline.at(due),
                duration=timedelta(minutes=10),
                validation=timedelta(seconds=60),
                safe_repeat=True,
            ),
        )


def _context(task: PythonOperator, try_number: int = 1, resumed: str | None = None) -> Any:
    ti = TaskInstance(try_number, 2)
    ti._ti_context_from_server = SimpleNamespace(next_method=resumed, next_kwargs=None)  # type: ignore[attr-defined]
    return {"task": task, "ti": ti, "task_state_store": Store()}


def _late(context: Any) -> Any:
    limit = TimeLimit.starting_now(10, what="the test", option="clock_read_limit")
    return held_past_latest_start(context, context["task"].retry_policy, limit)


def test_a_first_try_past_its_latest_start_in_a_breaker_pool_is_refused_naming_the_pool() -> None:
    due = pendulum.now("UTC").add(minutes=10)  # its latest start was a minute ago
    context = _context(_task(due))
    with pytest.raises(AirflowFailException) as refused:
        RetryStartCheck()(context)
    reason = str(refused.value)
    assert reason.startswith("deadline-infeasible: try 1 starts at ")
    assert f"{LATE_START} {(due - WORK).format('YYYY-MM-DD HH:mm:ss[Z]')}" in reason
    assert "less 660 s of work and validation" in reason
    assert "pool positions_api's breaker may have held it there" in reason
    # a retry too, whatever its decisions say
    assert _late(_context(_task(due), try_number=3)) is not None


def test_a_try_that_can_still_finish_runs() -> None:
    context = _context(_task(pendulum.now("UTC").add(minutes=12)))
    assert _late(context) is None
    RetryStartCheck()(context)  # a first try: nothing else refuses it


def test_no_refusal_outside_a_breaker_pool() -> None:
    context = _context(_task(pendulum.now("UTC").subtract(hours=1), pool="warehouse"))
    assert _late(context) is None
    RetryStartCheck()(context)  # runs: only a breaker pool holds a try past its start


def test_a_try_resumed_from_its_own_deferral_is_not_refused() -> None:
    # it started in time; the deferral was its own, not the pool's hold
    context = _context(_task(pendulum.now("UTC").subtract(minutes=30)), resumed="execute_complete")
    assert _late(context) is None


def test_the_latest_start_is_read_on_the_api_servers_clock(server: Served) -> None:
    # on this worker's clock the try can still start for 4 s
    due = pendulum.now("UTC") + WORK + timedelta(seconds=4)
    assert _late(_context(_task(due))) is None
    # the server's clock, the deadline's, runs 8 s ahead: its latest start is past
    server.api.clock_shift = 8.0
    refused = _late(_context(_task(due)))
    assert refused is not None and LATE_START in refused.reason
