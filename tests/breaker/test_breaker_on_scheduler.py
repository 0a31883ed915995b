"""A breaker pool through an outage and a brownout, on a real scheduler and triggerer.

On PostgreSQL with LocalExecutor: two DAGs map one gated task each over
:data:`MAP_INDEXES` map indexes in the breaker pool ``positions_api`` (:data:`SLOTS`
slots, :data:`ROUND` s rounds), and a third maps the same task with Airflow's own
retries in ``positions_plain`` (as many slots), which is no breaker: plain Airflow
beside it. All call one loopback stand-in of their dependency, which the test takes down,
brings back, or lets serve only so many calls at once (:mod:`devstack.breaker_fleet`).
The breakers' controller is the one DAG file a deployment adds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from devstack.breaker_fleet import (
    BREAKER_POOL,
    GATED_DAGS,
    PLAIN_DAG,
    DependencyStandIn,
    breaker_line,
    final_states,
    fleet_stack,
    last_end,
    report,
    worker_starts,
)
from devstack.stack import AirflowStack

pytestmark = [pytest.mark.airflow, pytest.mark.slow(minutes=9), pytest.mark.alone]

ROUND = 15
SLOTS = 8
MAP_INDEXES = 30
OUTAGE = 120.0
RUN_TIMEOUT = 900
#: a call the stand-in serves takes this long: the fleet's tries overlap
SERVE = 2.0


@pytest.fixture(scope="module")
def standin() -> Iterator[DependencyStandIn]:
    server = DependencyStandIn(serve=SERVE)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, standin: DependencyStandIn
) -> Iterator[AirflowStack]:
    home = tmp_path_factory.mktemp("breaker")
    with fleet_stack(home, standin, ROUND, MAP_INDEXES, SLOTS) as running:
        yield running


@dataclass(frozen=True)
class Outage:
    """The outage's runs once they all ended, and when the dependency went down and came back.

    :param runs: DAG id -> run id.
    :param down: when it went down (Unix seconds).
    :param up: when it came back.
    :param triggers: the most triggers the triggerer held at once while it was down.
    :param deferred: the most task instances of the fleet deferred at once while it was down.
    """

    runs: dict[str, str]
    down: float
    up: float
    triggers: int
    deferred: int


@pytest.fixture(scope="module")
def outage(stack: AirflowStack, standin: DependencyStandIn) -> Outage:
    conf = {"deadline_in": 3600}
    runs = {
        dag_id: stack.trigger(
            dag_id,
            conf={**conf, "endpoint": "gated" if dag_id != PLAIN_DAG else "plain"},
            logical_date="2026-11-01",
        )
        for dag_id in (*GATED_DAGS, PLAIN_DAG)
    }
    # down while first tries are still running: once the pool served its first calls
    stack.wait_for(
        lambda: (
            len([c for c in standin.calls if c.endpoint == "gated" and c.status == 200]) >= SLOTS
        ),
        "the fleet's first calls",
        timeout=300,
    )
    down = standin.down()
    triggers = deferred = 0
    while time.time() < down + OUTAGE:
        (count,) = stack.rows("select count(*) from trigger")[0]
        (held,) = stack.rows(
            "select count(*) from task_instance where state = 'deferred' and dag_id in :d",
            d=tuple(GATED_DAGS),
        )[0]
        triggers, deferred = max(triggers, count), max(deferred, held)
        time.sleep(2)
    up = standin.up()
    for dag_id, run_id in runs.items():
        stack.wait_for_run(dag_id, run_id, timeout=RUN_TIMEOUT)
    print(report(stack, standin, runs, down, up))
    return Outage(runs, down, up, triggers, deferred)


def test_every_gated_task_succeeds_with_nobody_clearing_anything(
    stack: AirflowStack, outage: Outage
) -> None:
    finals = final_states(stack, outage.runs, GATED_DAGS)
    assert len(finals) == len(GATED_DAGS) * MAP_INDEXES
    assert [each for each in finals if each[0] != "success"] == []
    assert all(try_number <= 4 for _, try_number in finals), finals


def test_calls_into_the_outage_are_at_most_the_pools_size_and_one_a_round(
    standin: DependencyStandIn, outage: Outage
) -> None:
    into = standin.between(outage.down, outage.up, "gated")
    rounds = math.ceil(OUTAGE / ROUND)
    assert len(into) <= SLOTS + rounds, [(c.task, c.try_number) for c in into]
    # first tries too: the breaker held them, as the plain pool does not
    plain = standin.between(outage.down, outage.up, "plain")
    assert len(plain) > len(into), (len(plain), len(into))


def test_the_hold_costs_no_trigger_and_no_worker_per_held_task(
    stack: AirflowStack, outage: Outage
) -> None:
    # one trigger in all: the controller's; no held task was deferred
    assert outage.triggers == 1
    assert outage.deferred == 0
    starts = [
        count
        for dag_id in GATED_DAGS
        for count in worker_starts(stack, dag_id, outage.runs[dag_id]).values()
    ]
    assert len(starts) == len(GATED_DAGS) * MAP_INDEXES
    assert sum(starts) / len(starts) <= 1.3, starts


def test_the_last_task_ends_within_two_minutes_of_the_dependencys_return(
    stack: AirflowStack, outage: Outage
) -> None:
    assert last_end(stack, outage.runs, GATED_DAGS) - outage.up <= 120


def test_plain_airflow_beside_it_burns_its_retries_into_the_outage(
    stack: AirflowStack, outage: Outage
) -> None:
    finals = final_states(stack, outage.runs, (PLAIN_DAG,))
    assert any(state == "failed" for state, _ in finals), finals


def test_after_the_outage_the_pool_is_back_at_its_size_and_says_so(
    stack: AirflowStack, outage: Outage
) -> None:
    line = breaker_line(stack, BREAKER_POOL)
    assert line is not None and line["phase"] == "closed" and line["slots"] == SLOTS
    assert stack.api("GET", f"/api/v2/pools/{BREAKER_POOL}")["slots"] == SLOTS
