"""A fleet of tasks sharing one dependency, for the breaker's end-to-end tests, the
distributed path, the demo and the benchmark.

The DAGs (``tests/breaker/dags/rw_breaker_fleet.py``): ``rw_breaker_a`` and
``rw_breaker_b`` each map one gated task over ``RW_FLEET_MAP_INDEXES`` map indexes in the
breaker pool ``positions_api``; ``rw_breaker_plain`` maps the same task with Airflow's
own retries in the pool ``positions_plain``, which is no breaker. Each try asks the
dependency once, at ``RW_FLEET_STANDIN``: :class:`DependencyStandIn`, a loopback
stand-in the test drives (up, down, or serving only so many calls at once), which keeps
every call with its DAG, task, try and answer. ``rw_breaker_controller.py`` beside them
is the one line that runs the breakers' controller.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

from airflow_retrywindow.labels import label
from devstack.loopback import LoopbackServer
from devstack.stack import ROOT, AirflowStack

#: the DAG files: the fleet's, and the controller's
DAGS = ROOT / "tests" / "breaker" / "dags"
FLEET_FILE = DAGS / "rw_breaker_fleet.py"
CONTROLLER_FILE = DAGS / "rw_breaker_controller.py"
GATED_DAGS = ("rw_breaker_a", "rw_breaker_b")
PLAIN_DAG = "rw_breaker_plain"
MAP_INDEXES_ENV = "RW_FLEET_MAP_INDEXES"
#: the breaker pool, and the plain fleet's own
BREAKER_POOL = "positions_api"
PLAIN_POOL = "positions_plain"


def breaker_env(round_seconds: int, **pools: dict[str, Any]) -> dict[str, str]:
    """The settings that make :data:`BREAKER_POOL` a breaker with ``round_seconds`` rounds
    (and any other ``pools``), and let Airflow's scheduler notice a lapsed lease quickly."""
    named = {BREAKER_POOL: {"round": round_seconds}, **pools}
    return {
        "AIRFLOW__RETRY_WINDOW__BREAKER_POOLS": json.dumps(named),
        "AIRFLOW__SCHEDULER__TRIGGER_TIMEOUT_CHECK_INTERVAL": "2",
    }


@dataclass(frozen=True)
class Call:
    """One call the stand-in answered (``at`` and ``ended`` in Unix seconds)."""

    at: float
    ended: float
    endpoint: str
    dag: str
    task: str
    try_number: int
    status: int


class DependencyStandIn:
    """The dependency, serving until closed: up (200 after ``serve`` seconds), down (503
    at once), or serving ``capacity`` calls at once and refusing the rest at once.

    Each endpoint is a dependency of its own, with its own calls at once: the gated
    fleet's (``/gated``) and plain Airflow's beside it (``/plain``) go through the same
    outage or brownout without taking each other's capacity.

    :param serve: seconds a served call takes.
    """

    def __init__(self, serve: float = 1.0) -> None:
        self.serve = serve
        self.calls: list[Call] = []
        self._capacity: int | None = None  # None: up, 0: down
        self._busy: dict[str, int] = {}
        self._lock = threading.Lock()
        self._server = LoopbackServer(self._handler())

    @property
    def url(self) -> str:
        """Its base URL."""
        return self._server.url

    def close(self) -> None:
        """Stop serving."""
        self._server.close()

    def up(self) -> float:
        """Serve every call from now; when, in Unix seconds."""
        return self._set(None)

    def down(self) -> float:
        """Refuse every call from now; when."""
        return self._set(0)

    def serving(self, capacity: int) -> float:
        """Serve ``capacity`` calls at once and refuse the rest, from now; when."""
        return self._set(capacity)

    def between(self, start: float, end: float, endpoint: str) -> list[Call]:
        """The calls to ``endpoint`` that arrived from ``start`` to ``end``."""
        return [c for c in self.calls if c.endpoint == endpoint and start <= c.at < end]

    def _set(self, capacity: int | None) -> float:
        with self._lock:
            self._capacity = capacity
            return time.time()

    def _answer(self, path: str) -> int:
        parts = urlsplit(path)
        endpoint = parts.path.strip("/")
        query = {key: values[0] for key, values in parse_qs(parts.query).items()}
        at = time.time()
        with self._lock:
            busy = self._busy.get(endpoint, 0)
            served = self._capacity is None or busy < self._capacity
            if served:
                self._busy[endpoint] = busy + 1
        if served:
            time.sleep(self.serve)
            with self._lock:
                self._busy[endpoint] -= 1
        call = Call(
            at, time.time(), endpoint, query["dag"], query["task"], int(query["try"]),
            200 if served else 503,
        )  # fmt: skip
        with self._lock:
            self.calls.append(call)
        return call.status

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        answer = self._answer

        class Handler(BaseHTTPRequestHandler):
            handlers: ClassVar[int] = 0

            def do_GET(self) -> None:
                self.send_response(answer(self.path))
                self.end_headers()
                self.wfile.write(b"positions")

            def log_message(self, *args: Any) -> None:
                return

        return Handler


def create_pools(stack: AirflowStack, slots: int, plain_slots: int | None = None) -> None:
    """The breaker pool and the plain fleet's own, ``slots`` slots each (or ``plain_slots``)."""
    stack.api("POST", "/api/v2/pools", {"name": BREAKER_POOL, "slots": slots})
    size = slots if plain_slots is None else plain_slots
    stack.api("POST", "/api/v2/pools", {"name": PLAIN_POOL, "slots": size})


@contextmanager
def fleet_stack(
    home: Path, standin: DependencyStandIn, round_seconds: int, map_indexes: int, slots: int
) -> Iterator[AirflowStack]:
    """A whole Airflow on a PostgreSQL database of its own, running the fleet against
    ``standin``: the breaker pool and the plain fleet's of ``slots`` slots each, every DAG
    parsed and the controller's first round done; stopped and its database dropped after.
    """
    from devstack.distributed import POSTGRES, admin_sql  # it imports this module

    dags = home / "dags"
    dags.mkdir()
    for dag_file in (FLEET_FILE, CONTROLLER_FILE):
        shutil.copy(dag_file, dags)
    database = f"retrywindow_{home.name}_{os.getpid()}_{int(time.time())}"
    admin_sql(f'CREATE DATABASE "{database}"')
    running = AirflowStack(
        home=home,
        database_url=f"postgresql+psycopg2://{POSTGRES}/{database}",
        dags_folder=dags,
        extra_env={
            **breaker_env(round_seconds),
            "RW_FLEET_STANDIN": standin.url,
            MAP_INDEXES_ENV: str(map_indexes),
            # every slot of both pools may run at once, and the controller beside them
            "AIRFLOW__CORE__PARALLELISM": str(2 * slots + 2),
        },
    )
    try:
        running.prepare()
        running.start("api-server", "scheduler", "dag-processor", "triggerer")
        create_pools(running, slots)
        for dag_id in (*GATED_DAGS, PLAIN_DAG):
            running.wait_for_dag(dag_id)
        # the controller writes its line on the pool at its first round
        running.wait_for(lambda: breaker_line(running) is not None, "the breaker", timeout=180)
        yield running
    finally:
        running.stop()
        admin_sql(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def breaker_line(stack: AirflowStack, pool: str = BREAKER_POOL) -> dict[str, Any] | None:
    """The breaker's state the pool's description holds now, ``None`` without one."""
    from airflow_retrywindow.records.breaker_state import BreakerState

    found = BreakerState.in_description(stack.api("GET", f"/api/v2/pools/{pool}")["description"])
    return None if found is None else found.as_dict()


def final_states(
    stack: AirflowStack, runs: dict[str, str], dag_ids: tuple[str, ...]
) -> list[tuple[str | None, int]]:
    """(state, try number) of every task instance of ``dag_ids``' runs, each map index apart."""
    found = []
    for dag_id in dag_ids:
        rows = stack.rows(
            "select state, try_number from task_instance where dag_id = :d and run_id = :r",
            d=dag_id,
            r=runs[dag_id],
        )
        found += [(state, int(tries)) for state, tries in rows]
    return found


#: the entry the execution API writes each time a worker starts a try (resumptions too)
START_EVENT = "running"


def worker_starts(stack: AirflowStack, dag_id: str, run_id: str) -> dict[str, int]:
    """Task instance (``call[3]``) -> how often a worker started one of its tries."""
    rows = stack.rows(
        "select ti.task_id, ti.map_index, count(l.id) from task_instance ti"
        " left join log l on l.dag_id = ti.dag_id and l.run_id = ti.run_id"
        " and l.task_id = ti.task_id and l.map_index = ti.map_index and l.event = :e"
        " where ti.dag_id = :d and ti.run_id = :r group by ti.task_id, ti.map_index",
        e=START_EVENT,
        d=dag_id,
        r=run_id,
    )
    return {label(task, int(index)): int(count) for task, index, count in rows}


def last_end(stack: AirflowStack, runs: dict[str, str], dag_ids: tuple[str, ...]) -> float:
    """When the last task instance of ``dag_ids``' runs ended, in Unix seconds."""
    latest = 0.0
    for dag_id in dag_ids:
        (row,) = stack.rows(
            "select max(end_date) from task_instance where dag_id = :d and run_id = :r",
            d=dag_id,
            r=runs[dag_id],
        )
        if row[0] is not None:
            latest = max(latest, row[0].timestamp())
    return latest


def report(
    stack: AirflowStack, standin: DependencyStandIn, runs: dict[str, str], down: float, up: float
) -> str:
    """The gated fleet and the plain one through an outage from ``down`` to ``up``, as a table."""

    def line(name: str, dag_ids: tuple[str, ...], endpoint: str) -> str:
        states = [state for state, _ in final_states(stack, runs, dag_ids)]
        starts = [n for d in dag_ids for n in worker_starts(stack, d, runs[d]).values()]
        into = standin.between(down, up, endpoint)
        first = sum(call.try_number == 1 for call in into)
        mean = sum(starts) / max(len(starts), 1)
        return (
            f"| {name} | {states.count('success')} of {len(states)} | {len(into)} ({first} first "
            f"tries) | {mean:.2f} / {max(starts, default=0)} | "
            f"{last_end(stack, runs, dag_ids) - up:.0f} s |"
        )

    return "\n".join(
        [
            "| | succeeded | calls while down | worker starts per task, mean / most "
            "| last end after the return |",
            "|---|---|---|---|---|",
            line("breaker pool (RetryWindowPolicy)", GATED_DAGS, "gated"),
            line("plain Airflow", (PLAIN_DAG,), "plain"),
        ]
    )
