"""What one retry-start read of a pool costs a real Airflow API server on PostgreSQL.

Run from the work tree (``make install`` first: the benchmark needs the PostgreSQL
driver of the ``distributed`` group, and PostgreSQL at 127.0.0.1:5432, user postgres):
``python benchmarks/dependency_read.py [--sizes 1000 10000]``; ``make bench`` runs it
with the others. Both sizes take about two minutes on a busy 2-core machine.

It creates a PostgreSQL database of its own, migrates it (``airflow db migrate``),
and starts one ``airflow api-server`` on it (one worker process, ``[api] workers = 1``, as
:class:`devstack.stack.AirflowStack` starts it) with the stack's admin user. The
pool ``positions_api`` is then filled through Airflow's ORM tables, no scheduler
running, with N task instances (``--sizes``): one task of the DAG
``positions_sync`` mapped over 95 % of them in today's run, and the tasks of a
second DAG, ``positions_report``, over five runs. Three scenarios, seeded afresh
just before each is measured so that their times are in the dependency's window:

- ``open``: an outage; most task instances wait for a retry (``up_for_retry``) or
  are held or deferred at try 2, some first tries run, some ran out of attempts
  (``failed``, with the retry policy's retryable failure key in XCom), and the
  successes ended before the first failure;
- ``recovering``: the same, and some retries ended ``success`` after the latest
  failure;
- ``closed``: mostly ``success`` and first tries running; two task instances wait
  for a retry and one failed for its own bug (a terminal failure key).

Each check is :func:`one_check`, the read the retry-start check makes (
:func:`airflow_retrywindow.dependency.pool_read.read_pool` and the state it gives),
with a new reader of the ``airflow_api_default`` connection, as each try's start builds
one (login and password: every check fetches its token first).

What is measured per check, after warm-up checks:

- requests and rows: counted by a small HTTP proxy of this script's own between the
  reader and the API server, whatever the reader counts itself; rows are those of
  every listing in the answers' JSON;
- wall time: the median of :func:`one_check`, the proxy's hop on loopback included;
- the API server's CPU: user and system time of its process and its children, from
  ``/proc/<pid>/stat`` before and after the checks, divided by their number (its
  idle use is printed; PostgreSQL's own CPU is not counted).

Targets (one PASS/FAIL line each; the exit status is 1 if any fails):

- at most 3 requests per check reading the pool (the login's token is one more,
  printed apart, and at most one);
- at most 100 rows in any answer;
- the API server's CPU per check at the largest size within 1.5x of the smallest,
  per scenario;

and each scenario reads as its name says (the benchmark's own check of its data).
Every process it started is stopped and its database dropped, on an error or
Ctrl-C too.
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import os
import random
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

import pendulum

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # devstack: the project's way of starting Airflow

from airflow_retrywindow.dependency import pool_read  # noqa: E402
from airflow_retrywindow.dependency.fleet import DependencyState  # noqa: E402
from airflow_retrywindow.dependency.settings import DependencySettings  # noqa: E402
from airflow_retrywindow.records import evidence  # noqa: E402
from devstack.distributed import POSTGRES, own_database  # noqa: E402
from devstack.process_cpu import cpu_seconds, process_tree  # noqa: E402
from devstack.stack import ADMIN, API_CONNECTION, AirflowStack, log  # noqa: E402


def one_check(api: Any, pool: str, settings: DependencySettings) -> DependencyState:
    """The one call measured: what a held retry's start reads of its pool.

    :param api: a new reader of the API server, as each try's start builds one.
    """
    return pool_read.read_pool(api, pool, settings).state(settings)


POOL = "positions_api"
MAPPED_DAG, MAPPED_TASK = "positions_sync", "load"
REPORT_DAG, REPORT_RUNS = "positions_report", 5
#: the share of the pool's task instances that are the mapped task's, per thousand
MAPPED_SHARE = 950
#: Airflow's ``max_tries`` of every task here (``retries=2``)
MAX_TRIES = 2
REQUEST_TARGET = 3
ROWS_TARGET = 100
CPU_RATIO_TARGET = 1.5
#: checks before the measured ones: the server's first answers load its code and caches
WARM_UP = 1
#: the measured checks: at least this many, more while the time allows
MIN_CHECKS, MAX_CHECKS, CHECK_SECONDS = 3, 30, 3.0


# -- the pool's task instances ---------------------------------------------------------


@dataclass(frozen=True)
class Slice:
    """Task instances of a scenario in one state.

    :param state: Airflow's state.
    :param try_number: their try number.
    :param started: seconds before the seeding their try started, or was queued for one
        not started (and 0 to 29 s more, spread over the slice).
    :param ran: seconds the try ran; ``None`` for one that has not ended.
    :param per_thousand: their share of the pool.
    :param fixed: or their number, whatever the pool's size.
    :param failure: the failure class the retry policy pushed to XCom, if any.
    """

    state: str
    try_number: int
    started: int
    ran: int | None
    per_thousand: int = 0
    fixed: int = 0
    failure: str | None = None


#: an outage of the pool's dependency; the first slice takes what the shares leave. Its
#: failures end 118 to 230 s before the seeding, its successes 235 to 265 s before: before
#: the first failure, in the dependency's window (300 s)
OUTAGE = (
    Slice("up_for_retry", 1, 200, 3, per_thousand=300),  # first tries failed
    Slice("up_for_reschedule", 2, 90, 1, per_thousand=350),  # retries held at their start
    Slice("deferred", 2, 60, None, per_thousand=100),
    Slice("running", 1, 20, None, per_thousand=80),  # first tries of other map indexes
    Slice("queued", 1, 5, None, per_thousand=50),
    Slice("failed", 3, 150, 3, per_thousand=40, failure=evidence.RETRYABLE),
    Slice("success", 1, 240, 5, per_thousand=80),  # before the outage
)
#: the states of a try not started yet
WAITING = ("scheduled", "queued")
#: retries that got through, ended 10 to 40 s before the seeding: after the latest failure
RECOVERED = Slice("success", 2, 30, 20, per_thousand=50)
SCENARIOS: dict[str, tuple[Slice, ...]] = {
    "open": OUTAGE,
    "recovering": (*OUTAGE, RECOVERED),  # taken from the first slice
    "closed": (
        Slice("success", 1, 240, 5, per_thousand=880),
        Slice("running", 1, 20, None, per_thousand=100),
        Slice("queued", 1, 5, None, per_thousand=20),
        Slice("up_for_retry", 1, 120, 3, fixed=2),
        Slice("failed", 1, 150, 3, fixed=1, failure=evidence.TERMINAL),
    ),
}


def states_of(scenario: str, count: int) -> list[Slice]:
    """The slice of each of ``count`` task instances, shuffled alike on every run so that
    both DAGs and every run hold every state."""
    slices = SCENARIOS[scenario]
    many = [item.fixed or item.per_thousand * count // 1000 for item in slices]
    many[0] += count - sum(many)
    found = [item for item, times in zip(slices, many, strict=True) for _ in range(times)]
    random.Random(7).shuffle(found)
    return found


@dataclass(frozen=True)
class Run:
    """A DAG run the pool's task instances belong to."""

    dag_id: str
    run_id: str
    id: int


def task_keys(runs: list[Run], count: int) -> Iterator[tuple[Run, str, int, int]]:
    """(run, task, map index, pool slots) of ``count`` task instances: the mapped task's
    today, then the report tasks over their runs."""
    mapped = count * MAPPED_SHARE // 1000
    for index in range(mapped):
        yield runs[0], MAPPED_TASK, index, 1
    reports = runs[1:]
    for index in range(count - mapped):
        yield reports[index % len(reports)], f"report_{index // len(reports):03d}", -1, 2


def try_times(
    item: Slice, spread: int, now: pendulum.DateTime
) -> tuple[pendulum.DateTime, pendulum.DateTime | None]:
    """When a try of ``item`` was queued (or started) and ended, ``spread`` seconds earlier."""
    began = now - timedelta(seconds=item.started + spread)
    return began, None if item.ran is None else began + timedelta(seconds=item.ran)


def task_rows(
    runs: list[Run],
    scenario: str,
    count: int,
    now: pendulum.DateTime,
    *,
    new_id: Callable[[], str],
    config: bytes,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The task instance rows and the failure XCom rows of a scenario.

    :param new_id: a new task instance id, as Airflow makes one.
    :param config: the executor config every row holds, as Airflow stores it.
    """
    rows, keys = [], []
    times: dict[tuple[Slice, int], tuple[pendulum.DateTime, pendulum.DateTime | None]] = {}
    for number, ((run, task_id, map_index, slots), item) in enumerate(
        zip(task_keys(runs, count), states_of(scenario, count), strict=True)
    ):
        # 30 spreads of each slice: pendulum's arithmetic, once a row, took seconds
        spread = (item, number % 30)
        began, ended = times.setdefault(spread, try_times(item, spread[1], now))
        # a try waiting for a worker has not started
        started = None if item.state in WAITING else began
        rows.append(
            {
                "id": new_id(),
                "dag_id": run.dag_id,
                "run_id": run.run_id,
                "task_id": task_id,
                "map_index": map_index,
                "state": item.state,
                "try_number": item.try_number,
                "max_tries": MAX_TRIES,
                "start_date": started,
                "end_date": ended,
                "duration": item.ran,
                "updated_at": ended or began,
                "queued_dttm": began - timedelta(seconds=2),
                "scheduled_dttm": began - timedelta(seconds=3),
                "pool": POOL,
                "pool_slots": slots,
                "queue": "default",
                "priority_weight": 1,
                "operator": "_PythonDecoratedOperator",
                "custom_operator_name": "@task",
                "hostname": None if started is None else "worker-1",
                "unixname": "airflow",
                "executor_config": config,
            }
        )
        if item.failure is not None:
            keys.append(
                {
                    "dag_run_id": run.id,
                    "dag_id": run.dag_id,
                    "run_id": run.run_id,
                    "task_id": task_id,
                    "map_index": map_index,
                    "key": evidence.failure_key(item.failure),
                    "value": {"failure": item.failure},
                    "timestamp": ended,
                }
            )
    return rows, keys


# -- the metadata DB -------------------------------------------------------------------


def create_dags(stack: AirflowStack, now: pendulum.DateTime) -> list[Run]:
    """The pool, both DAGs and their runs: today's of the mapped DAG first.

    No serialized DAG is written: the task instance listing joins the DAG's row and the
    run's, and only outer-joins the DAG version.
    """
    from airflow.models.dag import DagModel
    from airflow.models.dagbundle import DagBundleModel
    from airflow.models.dagrun import DagRun
    from airflow.models.pool import Pool
    from airflow.utils.state import DagRunState
    from airflow.utils.types import DagRunType
    from sqlalchemy.orm import Session

    with Session(stack.engine) as session, session.begin():
        session.add(Pool(pool=POOL, slots=64, description="Positions API", include_deferred=True))
        session.add(DagBundleModel(name="dags-folder"))
        session.flush()  # the DAGs' foreign key (no relationship orders the two)
        for dag_id in (MAPPED_DAG, REPORT_DAG):
            session.add(
                DagModel(
                    dag_id=dag_id,
                    bundle_name="dags-folder",
                    fileloc=str(ROOT / "dags" / f"{dag_id}.py"),
                    is_paused=False,
                    is_stale=False,
                    max_active_tasks=64,
                    max_consecutive_failed_dag_runs=0,
                    has_task_concurrency_limits=False,
                    timetable_summary="@hourly",
                )
            )
        session.flush()  # the runs' foreign key
        hour = now.start_of("hour")
        runs = [
            DagRun(
                dag_id=dag_id,
                run_id=f"scheduled__{(hour - timedelta(hours=ago + 1)).isoformat()}",
                logical_date=hour - timedelta(hours=ago + 1),
                data_interval=(hour - timedelta(hours=ago + 1), hour - timedelta(hours=ago)),
                run_after=hour - timedelta(hours=ago),
                queued_at=hour - timedelta(hours=ago),
                start_date=hour - timedelta(hours=ago, seconds=-5),
                state=DagRunState.RUNNING,
                run_type=DagRunType.SCHEDULED,
            )
            for dag_id, ago in [
                (MAPPED_DAG, 0),
                *((REPORT_DAG, ago) for ago in range(REPORT_RUNS)),
            ]
        ]
        session.add_all(runs)
        session.flush()
        return [Run(run.dag_id, run.run_id, run.id) for run in runs]


def seed(stack: AirflowStack, runs: list[Run], scenario: str, count: int) -> float:
    """The pool's task instances and failure keys of a scenario, in place of the last
    ones, in one bulk insert each; the seconds it took."""
    from airflow.models.taskinstance import TaskInstance, uuid7
    from airflow.models.xcom import XComModel
    from sqlalchemy import column, delete, insert, table, text

    began = time.perf_counter()
    tis = TaskInstance.__table__
    # the executor config as Airflow pickles it, once: pickled row by row it took seconds
    config = tis.c.executor_config.type.bind_processor(stack.engine.dialect)({})
    rows, keys = task_rows(
        runs, scenario, count, pendulum.now("UTC"), new_id=lambda: str(uuid7()), config=config
    )
    with stack.engine.begin() as db:
        db.execute(delete(XComModel.__table__))
        db.execute(delete(tis))
        # untyped columns: the values go to the driver as they are
        db.execute(insert(table(tis.name, *(column(name) for name in rows[0]))), rows)
        if keys:
            db.execute(insert(XComModel.__table__), keys)
        # the planner's statistics, as a deployment's autovacuum keeps them
        db.execute(text("ANALYZE task_instance, xcom"))
    return time.perf_counter() - began


# -- what the reader asks, counted on the wire -----------------------------------------


@dataclass(frozen=True)
class Exchange:
    """One request that went through the proxy, and its answer."""

    method: str
    path: str
    status: int
    body: bytes

    @property
    def token(self) -> bool:
        return self.path.startswith("/auth/token")

    def rows(self) -> int:
        """The rows of every listing in the answer (none for an answer that is no listing)."""
        try:
            found = json.loads(self.body or b"null")
        except ValueError:
            return 0
        if not isinstance(found, dict):
            return 0
        return sum(len(value) for value in found.values() if isinstance(value, list))


#: headers of one connection, not of the request or answer
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "te", "upgrade"}


class _Forward(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as urllib3 expects
    disable_nagle_algorithm = True  # as uvicorn: no wait on the reader's delayed ACK
    server: CountingProxy

    def setup(self) -> None:
        super().setup()
        # one connection to the API server per reader connection, kept alive alike
        host, port = self.server.upstream
        self.api_server = http.client.HTTPConnection(host, port, timeout=120)

    def finish(self) -> None:
        self.api_server.close()
        super().finish()

    def do_GET(self) -> None:
        self._forward()

    def do_POST(self) -> None:
        self._forward()

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        sent = self.rfile.read(length) if length else None
        # the Host header is the API server's, as http.client writes it
        headers = {k: v for k, v in self.headers.items() if k.lower() not in {*_HOP, "host"}}
        self.api_server.request(self.command, self.path, body=sent, headers=headers)
        answer = self.api_server.getresponse()
        data = answer.read()
        plain = gzip.decompress(data) if answer.getheader("Content-Encoding") == "gzip" else data
        # noted before it is answered: once the reader has its answer, the count holds it
        self.server.note(Exchange(self.command, urlsplit(self.path).path, answer.status, plain))
        # the API server's own headers, its Date with them (the reader's clock reads it)
        self.send_response_only(answer.status, answer.reason)
        for name, value in answer.getheaders():
            if name.lower() not in _HOP:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class CountingProxy(ThreadingHTTPServer):
    """An HTTP proxy on a free loopback port that keeps every exchange it forwards."""

    daemon_threads = True

    def __init__(self, upstream: str) -> None:
        super().__init__(("127.0.0.1", 0), _Forward)
        parts = urlsplit(upstream)
        self.upstream = (str(parts.hostname), int(parts.port or 80))
        self.seen: list[Exchange] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def note(self, exchange: Exchange) -> None:
        with self.lock:
            self.seen.append(exchange)

    def mark(self) -> int:
        """Where the exchanges from now on start."""
        with self.lock:
            return len(self.seen)

    def since(self, mark: int) -> list[Exchange]:
        with self.lock:
            return self.seen[mark:]


@contextmanager
def proxying(upstream: str) -> Iterator[CountingProxy]:
    """A :class:`CountingProxy` in front of ``upstream``, served until the block ends."""
    proxy = CountingProxy(upstream)
    thread = threading.Thread(target=proxy.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield proxy
    finally:
        proxy.shutdown()
        proxy.server_close()
        thread.join(timeout=5)


# -- the checks ------------------------------------------------------------------------


def new_reader() -> Any:
    """A reader of the check's connection, new as at each try's start
    (:func:`airflow_retrywindow.dependency.check._read`).

    Without the check's time limit: a read slower than it is measured, not cut short.
    """
    from airflow_retrywindow import configuration
    from airflow_retrywindow.hooks.airflow_api import AirflowApiHook

    hook = AirflowApiHook(configuration.default_conn_id(), timeout=configuration.api_timeout())
    return hook.get_conn()


@dataclass
class Measured:
    """The checks of one scenario at one size."""

    size: int
    scenario: str
    states: set[str] = field(default_factory=set)
    #: per check: its requests, those for the login's token, the rows, the largest
    #: answer's rows and the wall seconds
    requests: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    page: list[int] = field(default_factory=list)
    walls: list[float] = field(default_factory=list)
    server_cpu: float = 0.0

    def add(self, state: DependencyState, exchanges: list[Exchange], wall: float) -> None:
        self.states.add(state.state)
        self.requests.append(len(exchanges))
        self.tokens.append(sum(1 for item in exchanges if item.token))
        counted = [item.rows() for item in exchanges]
        self.rows.append(sum(counted))
        self.page.append(max(counted, default=0))
        self.walls.append(wall)

    @property
    def cpu_ms(self) -> float:
        return self.server_cpu / len(self.walls) * 1000

    def line(self) -> str:
        state = "/".join(sorted(self.states))
        return (
            f"{self.size:>6} {self.scenario:<11} {state:<11} {max(self.requests):>8} "
            f"{max(self.tokens):>5} {max(self.rows):>6} {max(self.page):>5} "
            f"{statistics.median(self.walls) * 1000:>8.0f} {self.cpu_ms:>8.0f} "
            f"{len(self.walls):>6}"
        )


HEADER = (
    f"{'size':>6} {'scenario':<11} {'read as':<11} {'requests':>8} {'token':>5} {'rows':>6} "
    f"{'page':>5} {'wall ms':>8} {'cpu ms':>8} {'checks':>6}"
)


def measure(
    size: int, scenario: str, proxy: CountingProxy, server: list[int], warm_up: int
) -> Measured:
    """Checks of the pool as seeded: ``warm_up`` first, then as many as the time allows."""
    from airflow_retrywindow import configuration

    settings = configuration.pool_settings().of(POOL)
    assert settings is not None, f"{POOL} is switched off"
    for _ in range(warm_up):
        one_check(new_reader(), POOL, settings)
    found = Measured(size, scenario)
    began, cpu = time.monotonic(), cpu_seconds(server)
    while len(found.walls) < MIN_CHECKS or (
        len(found.walls) < MAX_CHECKS and time.monotonic() - began < CHECK_SECONDS
    ):
        api = new_reader()
        mark = proxy.mark()
        started = time.perf_counter()
        state = one_check(api, POOL, settings)
        found.add(state, proxy.since(mark), time.perf_counter() - started)
    found.server_cpu = cpu_seconds(server) - cpu
    return found


def targets(results: list[Measured]) -> list[tuple[bool, str]]:
    """The PASS/FAIL lines."""
    checks = []
    for item in results:
        name = f"{item.size} task instances, {item.scenario}"
        checks.append(
            (item.states == {item.scenario}, f"{name}: the pool reads as {sorted(item.states)}")
        )
        # the login's token is a request of its own, as the docs count it
        tokens = max(item.tokens)
        reads = max(made - token for made, token in zip(item.requests, item.tokens, strict=True))
        checks.append(
            (
                reads <= REQUEST_TARGET and tokens <= 1,
                f"{name}: {reads} requests reading the pool, and {tokens} for the login's token "
                f"(target: at most {REQUEST_TARGET}, and one token)",
            )
        )
        checks.append(
            (
                max(item.page) <= ROWS_TARGET,
                f"{name}: at most {max(item.page)} rows in one answer, {max(item.rows)} in all "
                f"(target: at most {ROWS_TARGET} an answer)",
            )
        )
    smallest, largest = min(r.size for r in results), max(r.size for r in results)
    if smallest == largest:
        return checks
    for scenario in SCENARIOS:
        low, high = (
            next(r for r in results if r.size == size and r.scenario == scenario)
            for size in (smallest, largest)
        )
        ratio = high.cpu_ms / max(low.cpu_ms, 0.001)
        checks.append(
            (
                ratio <= CPU_RATIO_TARGET,
                f"{scenario}: the API server's CPU per check is {high.cpu_ms:.0f} ms at {largest}, "
                f"{ratio:.2f}x the {low.cpu_ms:.0f} ms at {smallest} "
                f"(target: at most {CPU_RATIO_TARGET}x)",
            )
        )
    return checks


# -- the run ---------------------------------------------------------------------------


def interrupted(signum: int, frame: FrameType | None) -> None:
    """A SIGTERM ends the run as Ctrl-C does: through the clean-up."""
    raise KeyboardInterrupt


def new_stack(home: Path, database: str) -> AirflowStack:
    """A stack on ``database`` whose one service is the API server, with one worker
    process; nothing parses DAGs, the DAG folder stays empty."""
    (home / "dags").mkdir(exist_ok=True)
    return AirflowStack(
        home=home,
        database_url=f"postgresql+psycopg2://{POSTGRES}/{database}",
        dags_folder=home / "dags",
        extra_env={"AIRFLOW__API__WORKERS": "1"},
    )


def run(stack: AirflowStack, sizes: list[int]) -> list[Measured]:
    """Every scenario at every size, through a counting proxy in front of the API server."""
    pids = process_tree(stack.processes["api-server"].pid)
    with proxying(stack.url) as proxy:
        # this process reads the same configuration, before it imports Airflow, and the
        # connection from the environment, not the database; it logs only what goes wrong
        os.environ.update(stack.env)
        os.environ["AIRFLOW__LOGGING__LOGGING_LEVEL"] = "WARNING"
        os.environ[f"AIRFLOW_CONN_{API_CONNECTION.upper()}"] = json.dumps(
            {"conn_type": "http", "host": proxy.url, "login": ADMIN[0], "password": ADMIN[1]}
        )
        # the server's use while nobody asks it anything: this process imports Airflow
        idle, began = cpu_seconds(pids), time.monotonic()
        runs = create_dags(stack, pendulum.now("UTC"))
        idle = (cpu_seconds(pids) - idle) / (time.monotonic() - began)
        log(f"API server: pids {pids}, {idle * 1000:.0f} ms of CPU a second while idle")
        results, warm_up = [], WARM_UP + 2  # the server's very first reads warm it most
        for size in sizes:
            for scenario in SCENARIOS:
                took = seed(stack, runs, scenario, size)
                log(f"seeded {size} task instances, {scenario}, in {took:.1f} s")
                results.append(measure(size, scenario, proxy, pids, warm_up))
                warm_up = WARM_UP
    return results


def report(results: list[Measured]) -> bool:
    """Print the table and the targets; whether every target holds."""
    print()
    print("per check: requests, token = those of them for the login's token; rows = rows")
    print("listed in all answers; page = the most in one answer; wall = median, through the")
    print("counting proxy; cpu = the API server's CPU (user + system), the token's included")
    print()
    print(HEADER)
    for item in results:
        print(item.line())
    print()
    checks = targets(results)
    for passed, text in checks:
        print(f"{'PASS' if passed else 'FAIL'}  {text}")
    return all(passed for passed, _ in checks)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[1000, 10000], help="task instances in the pool"
    )
    options = parser.parse_args()
    signal.signal(signal.SIGTERM, interrupted)
    database = f"rw_bench_dependency_{os.getpid()}_{int(time.time())}"
    home = Path(tempfile.mkdtemp(prefix="rw-dependency-bench-"))
    stack = new_stack(home, database)
    try:
        with own_database(stack, database):
            stack.prepare()
            stack.start("api-server")
            passed = report(run(stack, sorted(options.sizes)))
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
