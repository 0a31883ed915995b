"""When a shared dependency is down, the fleet's retries are held and come back after it.

On a real scheduler (LocalExecutor), two DAGs run twelve gated tasks in one pool,
``positions_api`` (16 slots), against a loopback stand-in of the API they share; a
third DAG runs six tasks with Airflow's own retries against their own endpoint, in
their own pool. The stand-in answers 503 for 150 s from its first request, then 200,
and counts every request with its task and try. The pool's settings are the
defaults: 60 s rounds, probe ratio 0.2, at least one probe a round, tripped by three
failing task instances.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import pendulum
import pytest

from devstack.loopback import LoopbackServer
from devstack.stack import AirflowStack, sqlite_stack

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

DAGS = Path(__file__).with_name("fleet_dags")
GATED_DAGS = ("rw_fleet_a", "rw_fleet_b")
PLAIN_DAG = "rw_fleet_plain"
OUTAGE = 150.0
POOL_SLOTS = 16
RUN_TIMEOUT = 900
HOUR = 3600


@dataclass(frozen=True)
class Request:
    """One request the stand-in answered."""

    at: float
    endpoint: str
    dag: str
    task: str
    try_number: int
    status: int


class StandIn(BaseHTTPRequestHandler):
    """503 for :data:`OUTAGE` seconds from the first request of each endpoint, then 200."""

    requests: ClassVar[list[Request]] = []
    first: ClassVar[dict[str, float]] = {}
    lock = threading.Lock()

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        endpoint = parts.path.strip("/")
        query = {key: values[0] for key, values in parse_qs(parts.query).items()}
        now = time.monotonic()
        with self.lock:
            started = self.first.setdefault(endpoint, now)
            status = 503 if now - started < OUTAGE else 200
            self.requests.append(
                Request(now, endpoint, query["dag"], query["task"], int(query["try"]), status)
            )
        self.send_response(status)
        self.end_headers()
        self.wfile.write(b"positions")

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture(scope="module")
def standin() -> Iterator[LoopbackServer]:
    server = LoopbackServer(StandIn)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, standin: LoopbackServer
) -> Iterator[AirflowStack]:
    home = tmp_path_factory.mktemp("fleet-outage")
    dags = home / "dags"
    shutil.copytree(DAGS, dags, ignore=shutil.ignore_patterns("__pycache__"))
    settings = {"RW_FLEET_STANDIN": standin.url, "AIRFLOW__CORE__PARALLELISM": "24"}
    with sqlite_stack(
        home,
        ("api-server", "scheduler", "dag-processor"),
        (*GATED_DAGS, PLAIN_DAG),
        dags_folder=dags,
        extra_env=settings,
    ) as running:
        yield running


def test_a_shared_outage_holds_the_gated_retries_and_every_task_succeeds_after_it(
    stack: AirflowStack,
) -> None:
    for pool in ("positions_api", "positions_plain"):
        stack.api("POST", "/api/v2/pools", {"name": pool, "slots": POOL_SLOTS})
    conf = {"deadline_in": HOUR}
    runs = {
        dag_id: stack.trigger(dag_id, conf=conf, logical_date="2026-11-01")
        for dag_id in (*GATED_DAGS, PLAIN_DAG)
    }
    for dag_id, run_id in runs.items():
        stack.wait_for_run(dag_id, run_id, timeout=RUN_TIMEOUT)
    gated = [each for each in StandIn.requests if each.endpoint == "gated"]
    plain = [each for each in StandIn.requests if each.endpoint == "plain"]
    back = StandIn.first["gated"] + OUTAGE
    report = _counterfactual(stack, runs, gated, plain)
    print(report)

    states = {dag_id: stack.task_states(dag_id, runs[dag_id]) for dag_id in GATED_DAGS}
    finals = [state for dag in states.values() for state in dag.values()]
    assert len(finals) == 12
    # every gated task succeeded after the API came back, with nobody clearing anything
    assert all(state == "success" for state, _ in finals), f"{states}\n{report}"
    # none spent its last attempt: retries=3 gives tries 1 to 4
    assert all(try_number <= 4 for _, try_number in finals), states
    retries_while_down = [each for each in gated if each.try_number >= 2 and each.at < back]
    assert len(retries_while_down) <= 4, f"{retries_while_down}\n{report}"
    first_ten = [each for each in gated if back <= each.at < back + 10]
    assert len(first_ten) <= POOL_SLOTS
    held = _dependency_records(stack, runs)
    # every check read the pool: none was held because it could not be read
    assert not [record for record in held if "could not be read" in record["reason"]], held
    assert any(record["action"] == "hold" and record.get("state") == "open" for record in held), (
        held
    )
    # the plain counterfactual burns every retry into the outage
    assert all(
        state == "failed" for state, _ in stack.task_states(PLAIN_DAG, runs[PLAIN_DAG]).values()
    ), report


def test_with_a_near_deadline_the_held_retries_are_refused_at_their_latest_start(
    stack: AirflowStack,
) -> None:
    """The same outage, the deadline 100 s after the run: latest start 90 s after it."""
    deadline_in = 100
    conf = {"deadline_in": deadline_in, "endpoint": "near"}
    runs = {
        dag_id: stack.trigger(dag_id, conf=conf, logical_date="2026-11-02") for dag_id in GATED_DAGS
    }
    for dag_id, run_id in runs.items():
        stack.wait_for_run(dag_id, run_id, timeout=RUN_TIMEOUT)
    records = [
        record
        for record in _dependency_records(stack, runs)
        if record["reason"] and record["readAt"] >= _run_after(stack, runs)
    ]
    refused = [record for record in records if record["action"] == "refuse"]
    assert refused, records
    for record in refused:
        assert record["decision"] == "deadline-infeasible"
        assert "positions_api" in record["reason"] and "deadline" in record["reason"]
    # not before the latest start: the deadline less one attempt and its validation (10 s)
    run_after = pendulum.parse(_run_after(stack, runs))
    latest = run_after.add(seconds=deadline_in - 10)
    for record in refused:
        assert pendulum.parse(record["readAt"]) >= latest.subtract(seconds=2), (record, latest)
    states = [
        state
        for dag_id in GATED_DAGS
        for state, _ in stack.task_states(dag_id, runs[dag_id]).values()
    ]
    assert "success" not in states  # the API never came back in time for any of them


def _run_after(stack: AirflowStack, runs: dict[str, str]) -> str:
    (found,) = stack.rows(
        "select min(run_after) from dag_run where run_id=:r", r=next(iter(runs.values()))
    )
    return str(
        pendulum.instance(found[0]) if not isinstance(found[0], str) else pendulum.parse(found[0])
    )


def _dependency_records(stack: AirflowStack, runs: dict[str, str]) -> list[dict[str, Any]]:
    rows = stack.rows("select value from task_state_store where key='retry_window_dependency'")
    return [json.loads(value) for (value,) in rows]


def _counterfactual(
    stack: AirflowStack, runs: dict[str, str], gated: list[Request], plain: list[Request]
) -> str:
    back = {name: StandIn.first[name] + OUTAGE for name in StandIn.first}

    def line(name: str, dag_ids: tuple[str, ...], requests: list[Request]) -> str:
        states = [
            state
            for dag_id in dag_ids
            for state, _ in stack.task_states(dag_id, runs[dag_id]).values()
        ]
        down = [
            each
            for each in requests
            if each.try_number >= 2 and each.at < back[requests[0].endpoint]
        ]
        return (
            f"| {name} | {states.count('success')} of {len(states)} succeeded | "
            f"{len(down)} retries reached the API while it was down |"
        )

    return "\n".join(
        [
            "| | after the API came back | while it was down |",
            line("gated (RetryWindowPolicy)", GATED_DAGS, gated),
            line("plain Airflow", (PLAIN_DAG,), plain),
        ]
    )
