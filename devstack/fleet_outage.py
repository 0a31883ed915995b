"""A shared outage, for the end-to-end test and the distributed path.

Two DAGs of six gated tasks each share the pool ``positions_api`` and an API; a third
does the same with Airflow's own retries in its own pool
(``tests/policy/fleet_dags/rw_fleet.py``). Each task asks the API once per try, at the
URL in ``RW_FLEET_STANDIN``: a loopback stand-in whose every endpoint (``/gated``,
``/plain``, ...) answers 503 for ``outage`` seconds from its own first request, then
200, and keeps every request with its DAG, task and try.

``benchmarks/fleet_outage.py`` runs a larger fleet in one DAG of its own
(``tests/policy/fleet_dags/rw_fleet_mapped.py``): one gated task mapped over 200 map
indexes in ``positions_api``. What a fleet's tries cost is counted from Airflow's event
log: the worker starts of each task instance (:func:`worker_starts`) and the holds at
a try's start, deferred to the triggerer or rescheduled (:func:`holds`).

``make demo``'s outage day stages a shorter one with the same stand-in: the example DAG
``dags/retry_window_outage.py`` (four gated loads in ``positions_api``) against an API
down until :data:`DEMO_OUTAGE` seconds after the first retry reached it, with 15 s
rounds (:data:`DEMO_ENV`). Counted from the first retry, not the first try: a retry's
worker may take a minute to start on a loaded machine, and the held retries must
meet the outage for the day to show anything.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

from airflow_retrywindow.labels import label
from devstack.loopback import LoopbackServer
from devstack.stack import ROOT, AirflowStack

#: the fleet's DAG file, and its DAGs
DAG_FILE = ROOT / "tests" / "policy" / "fleet_dags" / "rw_fleet.py"
#: one gated task mapped over a fleet of map indexes in ``positions_api``, its DAG file
#: apart (``benchmarks/fleet_outage.py`` runs it), and the setting of its map indexes
MAPPED_DAG_FILE = DAG_FILE.with_name("rw_fleet_mapped.py")
MAPPED_DAG = "rw_fleet_mapped"
MAP_INDEXES_ENV = "RW_FLEET_MAP_INDEXES"
GATED_DAGS = ("rw_fleet_a", "rw_fleet_b")
PLAIN_DAG = "rw_fleet_plain"
#: the gated tasks' pool (their dependency) and the plain tasks' own
POOLS = ("positions_api", "positions_plain")
POOL_SLOTS = 16
#: make demo's outage day: its DAG, its endpoint of the stand-in, how long that is down
#: after the first retry reached it, and the round its pool is given (set for the demo's
#: stack) so the day takes about two minutes
DEMO_DAG = "retry_window_outage"
DEMO_ENDPOINT = "positions"
DEMO_OUTAGE = 40.0
DEMO_ENV = {"AIRFLOW__RETRY_WINDOW__DEPENDENCY_POOLS": json.dumps({POOLS[0]: {"round": 15}})}
#: the demo's loads have retries=3: tries 1 to 4
DEMO_MAX_TRY = 4


@dataclass(frozen=True)
class Request:
    """One request the stand-in answered (``at`` on the monotonic clock)."""

    at: float
    endpoint: str
    dag: str
    task: str
    try_number: int
    status: int


class FleetStandIn:
    """The stand-in, serving until closed.

    :param outage: seconds each endpoint answers 503 from its first request of try
        ``from_try`` or later (503 before that too).
    :param from_try: ``1``: the outage starts with the first request; ``2``: with the
        first retry's, so the retries meet it however long the first tries took to start.
    """

    def __init__(self, outage: float, *, from_try: int = 1) -> None:
        self.outage = outage
        self.from_try = from_try
        self.requests: list[Request] = []
        self.first: dict[str, float] = {}
        self._lock = threading.Lock()
        self._server = LoopbackServer(self._handler())

    @property
    def url(self) -> str:
        """Its base URL."""
        return self._server.url

    def close(self) -> None:
        """Stop serving."""
        self._server.close()

    def back_at(self, endpoint: str) -> float:
        """When ``endpoint`` answers 200 again (monotonic clock)."""
        return self.first[endpoint] + self.outage

    def retries_while_down(self, endpoint: str) -> list[Request]:
        """The retries (try 2 or later) that reached ``endpoint`` while it answered 503."""
        back = self.back_at(endpoint)
        return [
            each
            for each in self.requests
            if each.endpoint == endpoint and each.try_number >= 2 and each.at < back
        ]

    def _answer(self, path: str) -> int:
        parts = urlsplit(path)
        endpoint = parts.path.strip("/")
        query = {key: values[0] for key, values in parse_qs(parts.query).items()}
        try_number = int(query["try"])
        now = time.monotonic()
        with self._lock:
            if try_number >= self.from_try:
                self.first.setdefault(endpoint, now)
            started = self.first.get(endpoint)
            status = 503 if started is None or now - started < self.outage else 200
            self.requests.append(
                Request(now, endpoint, query["dag"], query["task"], try_number, status)
            )
        return status

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


def create_pools(
    stack: AirflowStack, pools: tuple[str, ...] = POOLS, slots: int = POOL_SLOTS
) -> None:
    """The pools (by default both), ``slots`` slots each (:data:`POOL_SLOTS` by default)."""
    for pool in pools:
        stack.api("POST", "/api/v2/pools", {"name": pool, "slots": slots})


def final_states(
    stack: AirflowStack, runs: dict[str, str], dag_ids: tuple[str, ...]
) -> list[tuple[str | None, int]]:
    """(state, try number) of every task instance of ``dag_ids``' runs."""
    return [
        state for dag_id in dag_ids for state in stack.task_states(dag_id, runs[dag_id]).values()
    ]


def dependency_records(stack: AirflowStack) -> list[dict[str, Any]]:
    """The latest dependency decision of every task instance."""
    rows = stack.rows("select value from task_state_store where key='retry_window_dependency'")
    return [json.loads(value) for (value,) in rows]


def report(stack: AirflowStack, runs: dict[str, str], standin: FleetStandIn) -> str:
    """The gated fleet and the plain one side by side, as a table."""

    def line(name: str, dag_ids: tuple[str, ...], endpoint: str) -> str:
        states = [state for state, _ in final_states(stack, runs, dag_ids)]
        down = len(standin.retries_while_down(endpoint)) if endpoint in standin.first else 0
        return (
            f"| {name} | {states.count('success')} of {len(states)} succeeded | "
            f"{down} retries reached the API while it was down |"
        )

    rows = ["| | after the API came back | while it was down |"]
    rows.append(line("gated (RetryWindowPolicy)", GATED_DAGS, "gated"))
    if PLAIN_DAG in runs:
        rows.append(line("plain Airflow", (PLAIN_DAG,), "plain"))
    return "\n".join(rows)


#: Airflow's event log entries of a try held at its start: deferred to the triggerer, or
#: rescheduled where no triggerer woke it
HOLD_EVENTS = ("deferred", "up_for_reschedule")
#: the entry the execution API writes each time a worker starts a try, resumptions included
START_EVENT = "running"


def event_counts(
    stack: AirflowStack,
    dag_id: str,
    run_id: str,
    events: tuple[str, ...],
    *,
    current_try: bool = False,
) -> dict[str, int]:
    """Task instance (``load`` or ``load[3]``) -> its entries of ``events`` in Airflow's
    event log (the execution API writes one at every start and state change of a try).

    :param current_try: only those of the task instance's current try.
    """
    # the events are this module's constants, written into the statement
    named = ", ".join(f"'{event}'" for event in events)
    same_try = " and l.try_number = ti.try_number" if current_try else ""
    rows = stack.rows(
        "select ti.task_id, ti.map_index, count(l.id) from task_instance ti"
        " left join log l on l.dag_id = ti.dag_id and l.run_id = ti.run_id"
        " and l.task_id = ti.task_id and l.map_index = ti.map_index"
        f" and l.event in ({named}){same_try}"
        " where ti.dag_id = :d and ti.run_id = :r group by ti.task_id, ti.map_index",
        d=dag_id,
        r=run_id,
    )
    return {label(task, int(index)): int(count) for task, index, count in rows}


def holds(
    stack: AirflowStack, dag_id: str, run_id: str, *, every_try: bool = False
) -> dict[str, int]:
    """Task instance -> how often its current try (or ``every_try``) was held at its start:
    deferred to the triggerer, or rescheduled."""
    return event_counts(stack, dag_id, run_id, HOLD_EVENTS, current_try=not every_try)


def worker_starts(stack: AirflowStack, dag_id: str, run_id: str) -> dict[str, int]:
    """Task instance -> how often a worker started one of its tries: first starts, and
    every resumption after a hold."""
    return event_counts(stack, dag_id, run_id, (START_EVENT,))


def instance_states(
    stack: AirflowStack, dag_id: str, run_id: str
) -> dict[str, tuple[str | None, int]]:
    """Task instance (``load[3]`` for a map index) -> (state, try number) of a run."""
    rows = stack.rows(
        "select task_id, map_index, state, try_number from task_instance"
        " where dag_id = :d and run_id = :r",
        d=dag_id,
        r=run_id,
    )
    return {label(task, int(index)): (state, int(tries)) for task, index, state, tries in rows}


def demo_problems(stack: AirflowStack, run_id: str) -> list[str]:
    """What the outage day's run did other than what it shows; [] when nothing.

    Every load succeeds within its attempts, and a retry was held at its start.
    """
    found = []
    for task, (state, try_number) in sorted(stack.task_states(DEMO_DAG, run_id).items()):
        if state != "success" or try_number > DEMO_MAX_TRY:
            found.append(
                f"{task}: expected success by try {DEMO_MAX_TRY}, got {state} at try {try_number}"
            )
    if not sum(holds(stack, DEMO_DAG, run_id, every_try=True).values()):
        found.append("no retry was held at its start: the outage ended before the pool opened")
    return found
