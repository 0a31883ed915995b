"""A gate and a sensor hold the repeats of targets whose pool is failing, on a real run.

``rw_gate_pool_open`` runs twice (``airflow dags test``) against the test API server,
the gate and the sensor reading the pool through ``/api/v2`` like any other decision:

* with the pool forced ``open`` by on-call (its Variable, here from the environment):
  the repeats the model would let run are held, not run. (The three feeds of the pool
  end ``failed``, refused for an unknown outcome: a try refused for good no longer
  counts as failing, only a failure whose retry waits or runs does, so they alone do
  not trip it; ``tests/policy/test_fleet_outage_on_scheduler.py`` trips a pool with
  held retries on a real scheduler);
* with the pool forced ``closed`` by on-call (its Variable, here from the environment):
  nothing is held, and both repeats run.
"""

from __future__ import annotations

from typing import Any

import pytest
from airflow_retrywindow.dependency.pool_read import FORCE_VARIABLE
from airflow_retrywindow.records.dependency_state import CLOSED, OPEN, dependency_of

from airflow_retrywindow.verdicts import DEPENDENCY_HELD
from tests.gate.gate_runs import ApiServer, dags_test, decisions, gate_env, states, xcom

pytestmark = [pytest.mark.airflow, pytest.mark.slow]
DAG_ID = "rw_gate_pool_open"
POOL = "rw_gate_feed"
#: the on-call Variable, as Airflow reads it from the environment
FORCED = f"AIRFLOW_VAR_{FORCE_VARIABLE.format(pool=POOL).upper()}"
DECIDERS = {"gate_append": "append", "wait_append_b": "append_b"}


def _record(run_id: str, task_id: str, output: str) -> dict[str, Any]:
    found = xcom(DAG_ID, run_id, task_id)
    assert isinstance(found, dict), f"{task_id} kept no decision record:\n{output[-4000:]}"
    return found


def _row(record: dict[str, Any], task_id: str) -> dict[str, Any]:
    (row,) = [row for row in record["decisions"] if row["taskId"] == task_id]
    return row


@pytest.fixture(scope="module")
def failing(api_server: ApiServer) -> tuple[str, str]:
    return dags_test(DAG_ID, gate_env(api_server, **{FORCED: OPEN}))


@pytest.fixture(scope="module")
def forced_closed(api_server: ApiServer, failing: tuple[str, str]) -> tuple[str, str]:
    return dags_test(DAG_ID, gate_env(api_server, **{FORCED: CLOSED}))


def test_a_pool_forced_open_holds_the_repeats_of_the_gate_and_the_sensor(
    failing: tuple[str, str],
) -> None:
    run_id, output = failing
    found = states(DAG_ID, run_id)
    assert [found[f"feed_{n}"] for n in range(3)] == ["failed"] * 3, found
    # a held repeat does not reach the dependency: neither retry ran
    assert found["retry_append"] == "skipped", found
    assert found["retry_append_b"] == "skipped", found
    assert found["wait_append_b"] == "skipped", found  # timed out, soft_fail
    for decider, target in DECIDERS.items():
        record = _record(run_id, decider, output)
        row = _row(record, target)
        assert row["decision"] == DEPENDENCY_HELD, row
        kept = dependency_of(row)
        assert kept is not None, row
        assert (kept.pool, kept.state, kept.action) == (POOL, OPEN, "hold"), kept
        assert kept.hold_until is not None and kept.forced == OPEN, kept
        # the feeds were refused for good and the targets' failures are terminal: none
        # of them counts as failing
        assert kept.failing_tasks == 0, kept
        assert f"pool {POOL} is failing" in row["reason"], row
        assert "forced open by on-call" in row["reason"], row
        assert POOL in record["statusUpdate"], record["statusUpdate"]


def test_a_pool_forced_closed_by_on_call_holds_nothing(
    forced_closed: tuple[str, str],
) -> None:
    run_id, output = forced_closed
    found = states(DAG_ID, run_id)
    assert found["retry_append"] == "success", found
    assert found["retry_append_b"] == "success", found
    for decider, target in DECIDERS.items():
        record = _record(run_id, decider, output)
        assert decisions(record)[target] != DEPENDENCY_HELD, record
        kept = dependency_of(_row(record, target))
        assert kept is not None and kept.state == CLOSED, kept
        assert kept.forced == CLOSED, kept
