"""When a shared dependency is down, the fleet's retries are held and come back after it.

On a real scheduler (LocalExecutor), two DAGs run twelve gated tasks in one pool,
``positions_api`` (16 slots), against a loopback stand-in of the API they share; a
third DAG runs three tasks with Airflow's own retries against their own endpoint, in
their own pool. The stand-in answers 503 for 150 s from its first request, then 200,
and counts every request with its task and try. The pool's settings are the
defaults: 60 s rounds, one probe a round, tripped by three failing task instances. A
triggerer runs, so the held retries wait in it, holding no worker.
"""

from __future__ import annotations

import math
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pendulum
import pytest

from devstack.distributed import POSTGRES, admin_sql
from devstack.fleet_outage import (
    DAG_FILE,
    GATED_DAGS,
    PLAIN_DAG,
    POOL_SLOTS,
    FleetStandIn,
    create_pools,
    dependency_records,
    final_states,
    holds,
    report,
    worker_starts,
)
from devstack.stack import AirflowStack

pytestmark = [pytest.mark.airflow, pytest.mark.slow(minutes=10)]

OUTAGE = 150.0
#: the pool's defaults: 60 s rounds, one probe a round; the gated tasks' retry_delay
ROUND = 60
MIN_PROBES = 1
RETRY_DELAY = 15
RUN_TIMEOUT = 900
HOUR = 3600


@pytest.fixture(scope="module")
def standin() -> Iterator[FleetStandIn]:
    server = FleetStandIn(OUTAGE)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, standin: FleetStandIn
) -> Iterator[AirflowStack]:
    """A stack on a PostgreSQL database of its own: eighteen tasks failing, holding and
    retrying at once wait on SQLite's one writer until the API server times out."""
    home = tmp_path_factory.mktemp("fleet-outage")
    dags = home / "dags"
    dags.mkdir()
    shutil.copy(DAG_FILE, dags)
    database = f"retrywindow_fleet_{os.getpid()}_{int(time.time())}"
    admin_sql(f'CREATE DATABASE "{database}"')
    running = AirflowStack(
        home=home,
        database_url=f"postgresql+psycopg2://{POSTGRES}/{database}",
        dags_folder=dags,
        extra_env={"RW_FLEET_STANDIN": standin.url, "AIRFLOW__CORE__PARALLELISM": "24"},
    )
    try:
        running.prepare()
        running.start("api-server", "scheduler", "dag-processor", "triggerer")
        for dag_id in (*GATED_DAGS, PLAIN_DAG):
            running.wait_for_dag(dag_id)
        create_pools(running)
        yield running
    finally:
        running.stop()
        admin_sql(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


@dataclass(frozen=True)
class Outage:
    """The shared outage's runs, once all of them ended, and what the stand-in saw.

    :param runs: DAG id -> run id, the gated DAGs' and the plain one's.
    :param table: the report, gated beside plain, shown on a failure.
    """

    runs: dict[str, str]
    table: str


@pytest.fixture(scope="module")
def outage(stack: AirflowStack, standin: FleetStandIn) -> Outage:
    conf = {"deadline_in": HOUR}
    runs = {
        dag_id: stack.trigger(dag_id, conf=conf, logical_date="2026-11-01")
        for dag_id in (*GATED_DAGS, PLAIN_DAG)
    }
    for dag_id, run_id in runs.items():
        stack.wait_for_run(dag_id, run_id, timeout=RUN_TIMEOUT)
    table = report(stack, runs, standin)
    print(table)
    return Outage(runs, table)


def test_every_gated_task_succeeds_after_the_outage_with_an_attempt_to_spare(
    stack: AirflowStack, outage: Outage
) -> None:
    finals = final_states(stack, outage.runs, GATED_DAGS)
    assert len(finals) == 12
    # every gated task succeeded after the API came back, with nobody clearing anything
    assert all(state == "success" for state, _ in finals), f"{finals}\n{outage.table}"
    # none spent its last attempt: retries=3 gives tries 1 to 4
    assert all(try_number <= 4 for _, try_number in finals), finals


def test_while_the_api_is_down_no_more_retries_reach_it_than_the_probe_budget(
    standin: FleetStandIn, outage: Outage
) -> None:
    down = standin.retries_while_down("gated")
    # the retries reach the API from a retry_delay after the first request to the end of
    # the outage: that span touches at most this many rounds, each choosing MIN_PROBES (a
    # probe the triggerer woke late in a round, its worker starting in the next, is still
    # the probe of the round that chose it): 4, however slow the machine
    rounds = math.ceil((OUTAGE - RETRY_DELAY) / ROUND) + 1
    # a round's probes are drawn from the failing task instances: a first try that fails
    # after the retries began joins them and may move that round's probe once, and a
    # retry started before three had failed ran on a closed pool while nine or more
    # first tries had yet to fail (twelve first tries failing within a retry_delay of
    # each other, neither happens)
    joined = [
        each
        for each in standin.requests
        if each.endpoint == "gated" and each.try_number == 1 and down and each.at > down[0].at
    ]
    assert len(down) <= rounds * MIN_PROBES + len(joined), outage.table


def test_in_the_first_ten_seconds_back_no_more_requests_than_the_pools_slots(
    standin: FleetStandIn, outage: Outage
) -> None:
    back = standin.back_at("gated")
    first_ten = [
        each
        for each in standin.requests
        if each.endpoint == "gated" and back <= each.at < back + 10
    ]
    assert len(first_ten) <= POOL_SLOTS, outage.table


def test_each_held_retry_waited_in_the_triggerer_and_started_a_worker_only_to_run(
    stack: AirflowStack, outage: Outage
) -> None:
    held = dependency_records(stack)
    # every check read the pool: none was held because it could not be read
    assert not [record for record in held if "could not be read" in record["reason"]], held
    for dag_id in GATED_DAGS:
        run_id = outage.runs[dag_id]
        # the retries were held (deferred), and never rescheduled: a triggerer ran
        assert sum(holds(stack, dag_id, run_id, every_try=True).values()) >= 5, outage.table
        reschedules = stack.rows(
            "select count(*) from log where run_id = :r and event = 'up_for_reschedule'",
            r=run_id,
        )
        assert reschedules[0][0] == 0, reschedules
        # a worker starts for each try (at most 4) and each wake-up from a hold (to probe,
        # at most once a round for the fleet, or when released), never to be held again:
        # a task chosen to probe in two rounds starts 7 times, the others 3 to 5
        starts = worker_starts(stack, dag_id, run_id)
        assert len(starts) == 6 and max(starts.values()) <= 8, (starts, outage.table)
        assert sum(starts.values()) <= 6 * 4, (starts, outage.table)


def test_plain_airflow_burns_every_retry_into_the_same_outage(
    stack: AirflowStack, outage: Outage
) -> None:
    finals = final_states(stack, outage.runs, (PLAIN_DAG,))
    assert finals and all(state == "failed" for state, _ in finals), outage.table


def test_with_a_near_deadline_the_held_retries_are_refused_at_their_latest_start(
    stack: AirflowStack, standin: FleetStandIn
) -> None:
    """The same outage, the deadline 100 s after the run: latest start 90 s after it. One
    DAG's six tasks trip the pool (three failing are enough)."""
    deadline_in = 100
    conf = {"deadline_in": deadline_in, "endpoint": "near"}
    (dag_id,) = near_dags = GATED_DAGS[:1]
    runs = {dag_id: stack.trigger(dag_id, conf=conf, logical_date="2026-11-02")}
    stack.wait_for_run(dag_id, runs[dag_id], timeout=RUN_TIMEOUT)
    (found,) = stack.rows("select min(run_after) from dag_run where run_id=:r", r=runs[dag_id])
    run_after = (
        pendulum.instance(found[0]) if not isinstance(found[0], str) else pendulum.parse(found[0])
    )
    refused = [
        record
        for record in dependency_records(stack)
        if record["action"] == "refuse" and pendulum.parse(record["readAt"]) >= run_after
    ]
    assert refused, dependency_records(stack)
    # not before the latest start: the deadline less one attempt and its validation (10 s)
    latest = run_after.add(seconds=deadline_in - 10)
    for record in refused:
        assert record["decision"] == "deadline-infeasible"
        assert "positions_api" in record["reason"] and "deadline" in record["reason"]
        assert pendulum.parse(record["readAt"]) >= latest.subtract(seconds=2), (record, latest)
    # the API never came back in time for any of them
    assert all(state != "success" for state, _ in final_states(stack, runs, near_dags))
