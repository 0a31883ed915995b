"""A gate and a sensor hold the repeats of targets whose pool's breaker is open, on a real run.

``rw_gate_pool_open`` runs twice (``airflow dags test``) against the test API server, the
gate and the sensor reading the pool through ``/api/v2`` like any other decision. Its
pool ``rw_gate_feed`` is a breaker pool (``[retry_window] breaker_pools``), and the test
writes the breaker's state where the breakers' controller keeps it, in the pool's slots
and description, with the controller's own REST client (``PATCH /api/v2/pools/{name}``,
as a user allowed to edit pools):

* open (its dependency down): the repeats the model would let run are held
  (``dependency-held``), not run;
* closed again: nothing is held, and both repeats run.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pendulum
import pytest

from airflow_retrywindow.hooks.api_reader import AirflowApi
from airflow_retrywindow.records.breaker_state import (
    CLOSED,
    KEY,
    OPEN,
    BreakerState,
    owners_lines,
)
from airflow_retrywindow.verdicts import DEPENDENCY_HELD
from tests.gate.conftest import POOLS
from tests.gate.gate_runs import ApiServer, dags_test, decisions, gate_env, states, xcom

pytestmark = [pytest.mark.airflow, pytest.mark.slow]
DAG_ID = "rw_gate_pool_open"
POOL = "rw_gate_feed"
SIZE, DESCRIPTION = POOLS[POOL]
#: the pool named a breaker pool, with the default round, for the run's gate and sensor
BREAKER_POOLS = {"AIRFLOW__RETRY_WINDOW__BREAKER_POOLS": json.dumps({POOL: {}})}
DECIDERS = {"gate_append": "append", "wait_append_b": "append_b"}
#: why the test's breaker is open, as the controller words a round that opened it
WHY_OPEN = "3 calls refused, none served"


def pools(server: ApiServer) -> AirflowApi:
    """The REST client the breakers' controller sets pools with, as the user allowed to."""
    login, password = server.operator
    return AirflowApi(server.url, login=login, password=password)


def write_breaker(server: ApiServer, phase: str) -> BreakerState:
    """Give the pool the breaker ``phase``, its slots and description line, as the
    controller does."""
    now = pendulum.now("UTC")
    state = BreakerState.closed(POOL, SIZE, now.subtract(minutes=5), "watching the pool")
    if phase == OPEN:
        state = replace(state.moved(OPEN, 0, now, WHY_OPEN), next_probe=now.add(minutes=1))
    else:
        state = state.moved(CLOSED, SIZE, now, "back at the pool's size")
    api = pools(server)
    row = api.pool(POOL)
    assert row is not None
    api.set_pool(row, state.slots, state.described(row.description))
    return state


def _record(run_id: str, task_id: str, output: str) -> dict[str, Any]:
    found = xcom(DAG_ID, run_id, task_id)
    assert isinstance(found, dict), f"{task_id} kept no decision record:\n{output[-4000:]}"
    return found


def _row(record: dict[str, Any], task_id: str) -> dict[str, Any]:
    (row,) = [row for row in record["decisions"] if row["taskId"] == task_id]
    return row


@pytest.fixture(scope="module")
def held(api_server: ApiServer) -> tuple[str, str]:
    written = write_breaker(api_server, OPEN)
    row = pools(api_server).pool(POOL)
    # the pool says it as the controller leaves it: its owner's words, then the breaker's
    assert row is not None and row.slots == 0, row
    assert owners_lines(row.description) == [DESCRIPTION], row
    assert BreakerState.in_description(row.description) == written, row
    return dags_test(DAG_ID, gate_env(api_server, **BREAKER_POOLS))


@pytest.fixture(scope="module")
def closed_again(api_server: ApiServer, held: tuple[str, str]) -> tuple[str, str]:
    write_breaker(api_server, CLOSED)
    return dags_test(DAG_ID, gate_env(api_server, **BREAKER_POOLS))


def test_an_open_breaker_holds_the_repeats_of_the_gate_and_the_sensor(
    held: tuple[str, str],
) -> None:
    run_id, output = held
    found = states(DAG_ID, run_id)
    assert found["append"] == found["append_b"] == "failed", found
    # a held repeat does not reach the dependency: neither retry ran
    assert found["retry_append"] == "skipped", found
    assert found["retry_append_b"] == "skipped", found
    assert found["wait_append_b"] == "skipped", found  # timed out, soft_fail
    for decider, target in DECIDERS.items():
        record = _record(run_id, decider, output)
        row = _row(record, target)
        assert row["decision"] == DEPENDENCY_HELD, row
        kept = BreakerState.of(row[KEY])
        assert kept is not None, row
        assert (kept.pool, kept.phase, kept.slots, kept.size) == (POOL, OPEN, 0, SIZE), kept
        assert kept.reason == WHY_OPEN, kept
        assert f"pool {POOL}'s breaker is open since " in row["reason"], row
        assert POOL in record["statusUpdate"], record["statusUpdate"]


def test_a_closed_breaker_holds_nothing(closed_again: tuple[str, str]) -> None:
    run_id, output = closed_again
    found = states(DAG_ID, run_id)
    assert found["retry_append"] == "success", found
    assert found["retry_append_b"] == "success", found
    for decider, target in DECIDERS.items():
        record = _record(run_id, decider, output)
        assert decisions(record)[target] != DEPENDENCY_HELD, record
        kept = BreakerState.of(_row(record, target)[KEY])
        assert kept is not None and (kept.phase, kept.slots) == (CLOSED, SIZE), kept
