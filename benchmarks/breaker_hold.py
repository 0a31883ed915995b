"""What the pool breaker's hold costs a real Airflow, at 1,000 and 10,000 held task
instances, beside the same task instances waiting with no hold.

Run from the work tree (``make install`` first: the benchmark needs the PostgreSQL driver
of the ``distributed`` group, and PostgreSQL at 127.0.0.1:5432, user postgres, trusted),
one real Airflow at a time, under the lock the project's real Airflow runs share::

    flock /tmp/airflow-stack.lock .venv/bin/python benchmarks/breaker_hold.py \\
        [--sizes 1000 10000] [--rounds 4] [--round 15]

``make bench`` runs it with the others. On a busy 2-core machine the default sizes took
11 to 19 minutes, 2 to 3.5 a scenario, most of it the database's migration and the
services' start: the 10,000 task instances waited 19 to 38 s after the run's trigger.

Each size N runs two scenarios, each on a PostgreSQL database of its own, created for it
and dropped after it, with a whole Airflow on it as :class:`devstack.stack.AirflowStack`
starts one: a REST API server and an execution API server apart, the scheduler with
LocalExecutor, the DAG processor and the triggerer. The DAG ``rw_breaker_a``
(:mod:`devstack.breaker_fleet`) maps one gated task over N map indexes in the pool
``positions_api``, whose owner gave it 8 slots; one run of it is triggered and measured
once all N task instances wait ``scheduled``:

- ``hold``: the pool is a breaker (``[retry_window] breaker_pools``, rounds of ``--round``
  seconds) and the controller's DAG file is deployed. On-call's Variable
  ``retry_window_breaker_positions_api`` forces its breaker ``open``, and the run is
  triggered once the controller has set the pool to 0 slots: first tries are held too;
- ``no hold``: no breaker and no controller; the pool is set to 0 slots by hand (a PATCH
  of the REST API): the same task instances wait with nothing of the project running.

Every other setting is the same in both, the scheduler's check of deferral timeouts every
2 s that the breaker's settings ask for among them. The window measured is ``--rounds``
rounds long; in ``hold`` it starts half a round after one of the controller's rounds, so
that each of its rounds falls inside whole. What is measured in it:

- triggers: the most rows of Airflow's trigger table seen at once (read every second),
  and the most of them that a task instance of the pool was deferred on;
- worker starts: the event log's ``running`` entries of ``rw_breaker_a`` (the execution
  API writes one each time a worker starts a try); those since the run began are printed
  beside them;
- CPU per round, user and system time from ``/proc``, of each service's process tree: the
  REST API server, the execution API server, the scheduler with its LocalExecutor workers
  (a worker runs the controller's task when its lease is renewed with no pool held) and
  the triggerer (it runs the controller's rounds), and the scheduler's own process alone
  (its loop). A child's CPU counts once its parent has reaped it, so the short-lived task
  processes are counted too. And PostgreSQL's: its backends connected to the scenario's
  database, read at both ends of the window (:func:`backends_cpu`);
- the scheduler's loop: the mean of ``scheduler.scheduler_loop_duration``, which the
  scheduler alone sends through StatsD (``[metrics] statsd_on``) to a UDP listener of this
  script, and how many loops a round. Also the time a round of its loops spent in
  Airflow's own check of the fleet's run (``dagrun.dependency-check.rw_breaker_a``, once a
  loop, which reads every task instance of the run: what grows with them), and the loops'
  time outside it, where the controller's own run and task are scheduled;
- the controller's REST requests per round: the connection it reads and writes through
  (``airflow_api_default``) points at a small HTTP proxy of this script in front of the
  REST API server, which counts every request. A round's requests come in one burst, the
  login's token among them; nothing else uses that connection while the fleet is held.

Printed: one table, per size and scenario; what the hold adds per round (hold - no hold);
then the targets of issue 46, one PASS/FAIL line each (exit status 1 if any fails):

- at most 1 trigger for the pool while held (the controller's), none of a held task
  instance, and none with no hold;
- no worker start of the fleet's task instances in the window, in either scenario;
- at most 5 REST requests per pool and round, the token included (and at least one round);
- what the hold adds to the API servers' CPU per round (REST and execution together) at
  the largest size is at most 1.2x what it adds at the smallest, and the same of what it
  adds to the scheduler: its CPU with its workers and alone, and its loops' time outside
  its check of the fleet's run (wall time: it moves with what else the cores run). The
  scheduler's lines held only once the controller's renewals stopped going through a
  worker: a resumed task is queued and ends with an executor's event, and the scheduler
  skips its idle sleep after a loop that had either, so each renewal brought its check of
  the held run up to two sleeps sooner, a cost that grew with the run (6.2x from 1,000 to
  10,000). On Airflow 3.3 a renewal is a new run whose task the scheduler defers to the
  trigger itself.

Every process it started is stopped and each database dropped, on an error or Ctrl-C too.
A scenario's Airflow home (its services' logs) is deleted after it, and kept and named
when it failed.
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

import pendulum
import sqlalchemy

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # devstack: the project's way of starting Airflow

from airflow_retrywindow.breaker.control import FORCE_PREFIX  # noqa: E402
from devstack.breaker_fleet import (  # noqa: E402
    BREAKER_POOL,
    CONTROLLER_FILE,
    FLEET_FILE,
    MAP_INDEXES_ENV,
    START_EVENT,
    breaker_env,
    breaker_line,
    create_pools,
)
from devstack.distributed import POSTGRES, own_database  # noqa: E402
from devstack.process_cpu import process_tree  # noqa: E402
from devstack.stack import API_CONNECTION, PARSE_LIMIT, AirflowStack, log  # noqa: E402

FLEET_DAG = "rw_breaker_a"
#: the pool's size as its owner set it, which the hold takes to 0
POOL_SIZE = 8
HOLD, NO_HOLD = "hold", "no hold"
#: the run's deadline, far beyond the benchmark: no held try is late
DEADLINE_IN = 86400
#: the settings of the breaker itself; the rest of breaker_env is Airflow's, kept in both
BREAKER_SETTINGS = "AIRFLOW__RETRY_WINDOW__"
#: the scheduler's loop time as it sends it through StatsD, under the prefix set here
STATSD_PREFIX = "airflow"
LOOP_METRIC = f"{STATSD_PREFIX}.scheduler.scheduler_loop_duration"
#: Airflow's own check of the fleet's run, once a loop: what grows with its task instances
FLEET_CHECK_METRIC = f"{STATSD_PREFIX}.dagrun.dependency-check.{FLEET_DAG}"
#: the process trees measured: name in the table -> the stack's service
MEASURED = {
    "REST": "api-server",
    "exec": "execution-api",
    "sched": "scheduler",
    "trig": "triggerer",
}
#: the scheduler's own process, measured apart from its tree
SCHEDULER_ALONE = "main"
#: the PostgreSQL backends of the scenario's database
DATABASE = "db"
#: requests further apart than this are of two rounds of the controller
BURST_GAP = 3.0
#: how often the trigger table is read in the window
TRIGGER_SAMPLE = 1.0
#: how long the scheduler may take to have the run's task instances wait: a base, and
#: more per 1,000 map indexes (its expansion of the mapped task grows with them)
FLEET_WAIT, FLEET_WAIT_PER_THOUSAND = 300, 150
#: the targets
TRIGGERS_HELD = 1
REQUESTS_PER_ROUND = 5
GROWTH = 1.2


# -- the scheduler's loop time, through StatsD -----------------------------------------


@dataclass(frozen=True)
class Sample:
    """One value a service sent through StatsD (``at`` in Unix seconds)."""

    at: float
    name: str
    value: float


def parsed_sample(line: str, at: float) -> Sample | None:
    """A StatsD line (``name:value|type``, sample rate and tags after), ``None`` if not one."""
    name, _, rest = line.partition(":")
    value = rest.split("|", 1)[0]
    try:
        return Sample(at, name, float(value))
    except ValueError:
        return None


class StatsdListener:
    """A UDP listener on a free loopback port that keeps the samples of ``names`` it gets.

    :param names: the metric names to keep, prefix included.
    """

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names
        self.samples: list[Sample] = []
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.settimeout(0.5)  # how soon close() is noticed
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def settings(self) -> dict[str, str]:
        """The settings that make a service send its metrics here."""
        return {
            "AIRFLOW__METRICS__STATSD_ON": "True",
            "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
            "AIRFLOW__METRICS__STATSD_PORT": str(self._socket.getsockname()[1]),
            "AIRFLOW__METRICS__STATSD_PREFIX": STATSD_PREFIX,
        }

    def between(self, name: str, start: float, end: float) -> list[float]:
        """The values of ``name`` that arrived from ``start`` to ``end``."""
        with self._lock:
            return [s.value for s in self.samples if s.name == name and start <= s.at < end]

    def close(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)
        self._socket.close()

    def _serve(self) -> None:
        while not self._stopped.is_set():
            try:
                data = self._socket.recv(65535)
            except TimeoutError:
                continue
            at = time.time()
            for line in data.decode(errors="replace").splitlines():
                sample = parsed_sample(line, at)
                if sample is not None and sample.name in self.names:
                    with self._lock:
                        self.samples.append(sample)


@contextmanager
def listening(names: frozenset[str]) -> Iterator[StatsdListener]:
    """A :class:`StatsdListener` for the block."""
    listener = StatsdListener(names)
    try:
        yield listener
    finally:
        listener.close()


# -- the controller's requests, counted on the wire ------------------------------------


@dataclass(frozen=True)
class Exchange:
    """One request the proxy forwarded (``at``: when it was answered, in Unix seconds)."""

    at: float
    method: str
    path: str
    status: int

    @property
    def token(self) -> bool:
        return self.path.startswith("/auth/token")


#: headers of one connection, not of the request or the answer
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "te", "upgrade"}


class _Forward(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the controller's client expects
    disable_nagle_algorithm = True
    server: CountingProxy

    def setup(self) -> None:
        super().setup()
        # one connection to the API server per client connection, kept alive alike
        host, port = self.server.upstream
        self.api_server = http.client.HTTPConnection(host, port, timeout=120)

    def finish(self) -> None:
        self.api_server.close()
        super().finish()

    def do_GET(self) -> None:
        self._forward()

    def do_POST(self) -> None:
        self._forward()

    def do_PATCH(self) -> None:
        self._forward()

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        sent = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in {*_HOP, "host"}}
        self.api_server.request(self.command, self.path, body=sent, headers=headers)
        answer = self.api_server.getresponse()
        data = answer.read()
        self.server.note(
            Exchange(time.time(), self.command, urlsplit(self.path).path, answer.status)
        )
        # the API server's own headers, its Date among them: the controller reads its clock
        self.send_response_only(answer.status, answer.reason)
        for name, value in answer.getheaders():
            if name.lower() not in _HOP:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class CountingProxy(ThreadingHTTPServer):
    """An HTTP proxy on a free loopback port that keeps every exchange it forwards.

    :param upstream: the base URL of the server it forwards to.
    """

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

    def between(self, start: float, end: float) -> list[Exchange]:
        """The exchanges answered from ``start`` to ``end``."""
        with self.lock:
            return [item for item in self.seen if start <= item.at < end]


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


def rounds_of(exchanges: list[Exchange]) -> list[list[Exchange]]:
    """The exchanges in bursts, one per round of the controller."""
    bursts: list[list[Exchange]] = []
    for item in sorted(exchanges, key=lambda each: each.at):
        if bursts and item.at - bursts[-1][-1].at <= BURST_GAP:
            bursts[-1].append(item)
        else:
            bursts.append([item])
    return bursts


# -- CPU, from /proc -------------------------------------------------------------------


def cpu_ticks(pid: int, *, reaped: bool) -> int:
    """User and system time of ``pid`` so far, in clock ticks, with that of the children it
    reaped when ``reaped``; 0 once it is gone (its parent holds its time then).

    Read at both ends of a window over a process tree with ``reaped``, the difference
    counts the processes that started and ended inside it too, once their parent reaped
    them.
    """
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    fields = text.rsplit(")", 1)[1].split()
    # utime stime, then cutime cstime
    return sum(int(value) for value in fields[11 : 15 if reaped else 13])


def cpu_now(stack: AirflowStack) -> dict[str, float]:
    """CPU seconds so far of each measured service's process tree, of the scheduler's own
    process alone (``main``: its loop, without its workers), and of the database's
    backends (``db``), summed as :func:`backends_cpu` reads them."""
    found = {
        name: sum(cpu_ticks(pid, reaped=True) for pid in process_tree(stack.processes[service].pid))
        for name, service in MEASURED.items()
    }
    found[SCHEDULER_ALONE] = cpu_ticks(stack.processes["scheduler"].pid, reaped=False)
    return {name: ticks / os.sysconf("SC_CLK_TCK") for name, ticks in found.items()}


def backends_cpu(stack: AirflowStack) -> dict[int, int]:
    """CPU ticks so far of each PostgreSQL backend connected to the stack's database.

    The services keep their connections in pools, so a window's difference per backend
    seen at both ends is nearly all of it; a backend seen only at the end counts whole, one
    that ended inside the window is lost (the postmaster reaps it, for every database).
    """
    pids = [pid for (pid,) in stack.rows(
        "select pid from pg_stat_activity where datname = current_database()"
    )]  # fmt: skip
    return {pid: cpu_ticks(pid, reaped=False) for pid in pids}


def backends_spent(before: dict[int, int], after: dict[int, int]) -> float:
    """CPU seconds the backends spent between two reads of :func:`backends_cpu`."""
    ticks = sum(spent - before.get(pid, 0) for pid, spent in after.items())
    return ticks / os.sysconf("SC_CLK_TCK")


# -- a scenario ------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    """One size and whether the breaker holds the pool.

    :param size: the map indexes of ``rw_breaker_a``.
    :param hold: whether the pool is a breaker, held open by on-call.
    :param round: the breaker's round, in seconds: the unit of every figure per round.
    :param rounds: the rounds measured.
    """

    size: int
    hold: bool
    round: int
    rounds: int

    @property
    def name(self) -> str:
        return HOLD if self.hold else NO_HOLD

    @property
    def database(self) -> str:
        kind = "hold" if self.hold else "nohold"
        return f"rw_bench_breaker_{os.getpid()}_{self.size}_{kind}"


@dataclass(frozen=True)
class Measured:
    """What one scenario measured.

    :param waiting: the fleet's task instances waiting ``scheduled`` at the window's end.
    :param fleet_seconds: from the run's trigger until all of them waited.
    :param triggers: the most rows of the trigger table seen at once in the window.
    :param held_triggers: the most of them a task instance of the pool was deferred on.
    :param starts: worker starts of the fleet in the window.
    :param starts_since_run: worker starts of the fleet since its run began.
    :param requests: the controller's requests of each round in the window.
    :param tokens: the most requests for a token in one round.
    :param cpu: CPU seconds per round of each measured service.
    :param loop_ms: the scheduler's mean loop time in the window.
    :param loops: the scheduler's loops per round.
    :param loop_spent: milliseconds per round the scheduler's loops took.
    :param fleet_check: milliseconds per round of them in its check of the fleet's run.
    :param took: the scenario's wall time, its stack's start and stop included.
    """

    scenario: Scenario
    waiting: int
    fleet_seconds: float
    triggers: int
    held_triggers: int
    starts: int
    starts_since_run: int
    requests: list[int]
    tokens: int
    cpu: dict[str, float]
    loop_ms: float
    loops: float
    loop_spent: float
    fleet_check: float
    took: float = 0.0

    @property
    def api_cpu(self) -> float:
        """Both API servers' CPU seconds per round."""
        return self.cpu["REST"] + self.cpu["exec"]

    @property
    def loop_outside(self) -> float:
        """Milliseconds per round the scheduler's loops took outside the fleet's run."""
        return self.loop_spent - self.fleet_check


def new_stack(scenario: Scenario, home: Path, statsd: StatsdListener) -> AirflowStack:
    """The scenario's stack: its DAG files, the breaker's settings where it holds, the
    fleet's size, and StatsD for the scheduler."""
    dags = home / "dags"
    dags.mkdir(parents=True)
    shutil.copy(FLEET_FILE, dags)
    settings = breaker_env(scenario.round)
    if scenario.hold:
        shutil.copy(CONTROLLER_FILE, dags)
    else:
        settings = {k: v for k, v in settings.items() if not k.startswith(BREAKER_SETTINGS)}
    return AirflowStack(
        home=home,
        database_url=f"postgresql+psycopg2://{POSTGRES}/{scenario.database}",
        dags_folder=dags,
        extra_env={**settings, MAP_INDEXES_ENV: str(scenario.size)},
        service_env={"scheduler": statsd.settings()},
    )


def boot(stack: AirflowStack, scenario: Scenario, proxy: CountingProxy) -> None:
    """Start the stack with the pool at 0 slots: held by the breaker, or set by hand."""
    stack.prepare()
    # the controller's connection goes through the counting proxy
    with stack.engine.begin() as db:
        db.execute(
            sqlalchemy.text("update connection set host=:h where conn_id=:c"),
            {"h": proxy.url, "c": API_CONNECTION},
        )
    stack.start("api-server", "scheduler", "dag-processor", "triggerer")
    create_pools(stack, POOL_SIZE)
    if scenario.hold:
        forced = {"key": FORCE_PREFIX + BREAKER_POOL, "value": "open"}
        stack.api("POST", "/api/v2/variables", forced)
    else:
        pool = {"name": BREAKER_POOL, "slots": 0, "include_deferred": False}
        stack.api("PATCH", f"/api/v2/pools/{BREAKER_POOL}?update_mask=slots", pool)
    stack.wait_for_dag(FLEET_DAG)
    if scenario.hold:
        # its first round watches the pool, the next reads on-call's force
        limit = PARSE_LIMIT + 6 * scenario.round
        stack.wait_for(lambda: held(stack), "the controller to hold the pool", timeout=limit)
        log(f"the breaker holds {BREAKER_POOL}: {breaker_line(stack)}")


def held(stack: AirflowStack) -> bool:
    """Whether the pool's breaker is open and the pool at 0 slots."""
    line = breaker_line(stack)
    slots = stack.api("GET", f"/api/v2/pools/{BREAKER_POOL}")["slots"]
    return line is not None and line["phase"] == "open" and slots == 0


def waiting(stack: AirflowStack, run_id: str) -> int:
    """The run's task instances waiting ``scheduled``."""
    (row,) = stack.rows(
        "select count(*) from task_instance where dag_id=:d and run_id=:r and state='scheduled'",
        d=FLEET_DAG,
        r=run_id,
    )
    return int(row[0])


def trigger_rows(stack: AirflowStack) -> tuple[int, int]:
    """Rows of the trigger table, and those a task instance of the pool is deferred on."""
    (row,) = stack.rows(
        "select (select count(*) from trigger),"
        " (select count(distinct trigger_id) from task_instance where pool=:p"
        " and trigger_id is not null)",
        p=BREAKER_POOL,
    )
    return int(row[0]), int(row[1])


def fleet_starts(stack: AirflowStack, run_id: str, start: float, end: float) -> tuple[int, int]:
    """Worker starts of the fleet from ``start`` to ``end``, and since its run began."""
    (row,) = stack.rows(
        "select count(*) filter (where dttm >= :s and dttm < :t), count(*) from log"
        " where dag_id=:d and run_id=:r and event=:e",
        s=pendulum.from_timestamp(start, tz="UTC"),
        t=pendulum.from_timestamp(end, tz="UTC"),
        d=FLEET_DAG,
        r=run_id,
        e=START_EVENT,
    )
    return int(row[0]), int(row[1])


def next_round(proxy: CountingProxy, after: float, scenario: Scenario) -> float:
    """When the controller's next round after ``after`` set the pool (its PATCH)."""
    limit = time.time() + 4 * scenario.round
    while time.time() < limit:
        found = [e.at for e in proxy.between(after, time.time() + 1) if e.method == "PATCH"]
        if found:
            return found[0]
        time.sleep(0.2)
    raise RuntimeError(f"the controller set {BREAKER_POOL} in no round for {4 * scenario.round} s")


def hold_fleet(stack: AirflowStack, scenario: Scenario) -> tuple[str, float]:
    """Trigger the fleet's run and wait until all its task instances wait ``scheduled``;
    the run's id and how long that took."""
    began = time.monotonic()
    run_id = stack.trigger(FLEET_DAG, conf={"deadline_in": DEADLINE_IN}, logical_date="2026-11-01")
    limit = FLEET_WAIT + FLEET_WAIT_PER_THOUSAND * scenario.size / 1000
    what = f"{scenario.size} task instances of {FLEET_DAG} to wait"
    stack.wait_for(lambda: waiting(stack, run_id) >= scenario.size, what, timeout=limit)
    took = time.monotonic() - began
    log(f"{scenario.size} task instances wait scheduled, {took:.0f} s after the trigger")
    return run_id, took


def measure(
    stack: AirflowStack,
    scenario: Scenario,
    proxy: CountingProxy,
    statsd: StatsdListener,
) -> Measured:
    """Hold the fleet and measure the window."""
    run_id, fleet_seconds = hold_fleet(stack, scenario)
    time.sleep(scenario.round)  # the scheduler's first loops over the new run
    start = time.time()
    if scenario.hold:
        start = next_round(proxy, start, scenario) + scenario.round / 2
        time.sleep(max(0.0, start - time.time()))
    log(f"measuring {scenario.rounds} rounds of {scenario.round} s")
    before, start, db_before = cpu_now(stack), time.time(), backends_cpu(stack)
    end, triggers, held_triggers = start + scenario.rounds * scenario.round, 0, 0
    while (now := time.time()) < end:
        rows, of_pool = trigger_rows(stack)
        triggers, held_triggers = max(triggers, rows), max(held_triggers, of_pool)
        time.sleep(min(TRIGGER_SAMPLE, max(0.0, end - now)))
    after, end = cpu_now(stack), time.time()
    before[DATABASE], after[DATABASE] = 0.0, backends_spent(db_before, backends_cpu(stack))
    spans = (end - start) / scenario.round
    starts, since_run = fleet_starts(stack, run_id, start, end)
    rounds = rounds_of(proxy.between(start, end))
    loops = statsd.between(LOOP_METRIC, start, end)
    fleet_check = sum(statsd.between(FLEET_CHECK_METRIC, start, end))
    return Measured(
        scenario=scenario,
        waiting=waiting(stack, run_id),
        fleet_seconds=fleet_seconds,
        triggers=triggers,
        held_triggers=held_triggers,
        starts=starts,
        starts_since_run=since_run,
        requests=[len(burst) for burst in rounds],
        tokens=max((sum(e.token for e in burst) for burst in rounds), default=0),
        cpu={name: (after[name] - seconds) / spans for name, seconds in before.items()},
        loop_ms=statistics.fmean(loops) if loops else float("nan"),
        loops=len(loops) / spans,
        loop_spent=sum(loops) / spans,
        fleet_check=fleet_check / spans,
    )


def run_scenario(scenario: Scenario, statsd: StatsdListener) -> Measured:
    """One scenario on a database of its own, created and dropped here."""
    log(f"== {scenario.size} task instances, {scenario.name}")
    began = time.monotonic()
    home = Path(tempfile.mkdtemp(prefix=f"rw-breaker-bench-{scenario.size}-"))
    stack = new_stack(scenario, home, statsd)
    with proxying(stack.url) as proxy, own_database(stack, scenario.database):
        boot(stack, scenario, proxy)
        found = measure(stack, scenario, proxy, statsd)
    shutil.rmtree(home, ignore_errors=True)
    took = time.monotonic() - began
    log(f"{scenario.size} task instances, {scenario.name}: {took:.0f} s")
    return replace(found, took=took)


# -- the report ------------------------------------------------------------------------


HEADER = (
    f"{'size':>6} {'scenario':<8} {'waiting':>7} {'trig':>4} {'starts':>6} {'rounds':>6} "
    f"{'req/rd':>6} {'REST':>5} {'exec':>5} {'sched':>6} {'main':>6} {'trigr':>5} {'db':>5} "
    f"{'loop':>5} {'loops':>5} {'check':>6} {'outside':>7} {'fleet s':>7} {'took s':>6}"
)
LEGEND = """\
per window: waiting = the fleet's task instances scheduled at its end; trig = the most
trigger rows at once; starts = the fleet's worker starts; rounds = the controller's rounds,
req/rd = the most REST requests in one (token included). Per round, CPU ms of: REST = the
REST API server, exec = the execution API server, sched = the scheduler with its
LocalExecutor workers, main = the scheduler's own process alone, trigr = the triggerer,
db = PostgreSQL's backends of the scenario's database. loop = the scheduler's mean loop,
ms; loops = its loops per round; check = ms per round of them in its check of the fleet's
run, outside = the rest of their time. fleet s = from the trigger until all waited;
took s = the scenario, its stack's start and stop included."""


def line(found: Measured) -> str:
    """One row of the table."""
    cpu = {name: seconds * 1000 for name, seconds in found.cpu.items()}
    most = max(found.requests, default=0)
    return (
        f"{found.scenario.size:>6} {found.scenario.name:<8} {found.waiting:>7} "
        f"{found.triggers:>4} {found.starts:>6} {len(found.requests):>6} {most:>6} "
        f"{cpu['REST']:>5.0f} {cpu['exec']:>5.0f} {cpu['sched']:>6.0f} {cpu['main']:>6.0f} "
        f"{cpu['trig']:>5.0f} {cpu[DATABASE]:>5.0f} {found.loop_ms:>5.0f} {found.loops:>5.1f} "
        f"{found.fleet_check:>6.0f} {found.loop_outside:>7.0f} {found.fleet_seconds:>7.0f} "
        f"{found.took:>6.0f}"
    )


def added(results: list[Measured]) -> dict[int, dict[str, float]]:
    """Per size, the milliseconds per round the hold adds (hold - no hold): each service's
    CPU, both API servers' (``API``), and the scheduler's loops outside the fleet's run
    (``outside``)."""
    by = {(r.scenario.size, r.scenario.hold): r for r in results}
    found = {}
    for size in sorted({size for size, hold in by if hold and (size, False) in by}):
        hold, plain = by[(size, True)], by[(size, False)]
        found[size] = {name: (hold.cpu[name] - plain.cpu[name]) * 1000 for name in hold.cpu}
        found[size]["API"] = (hold.api_cpu - plain.api_cpu) * 1000
        found[size]["outside"] = hold.loop_outside - plain.loop_outside
    return found


def scenario_targets(found: Measured) -> list[tuple[bool, str]]:
    """The PASS/FAIL lines of one scenario."""
    name = f"{found.scenario.size} {found.scenario.name}"
    allowed = TRIGGERS_HELD if found.scenario.hold else 0
    checks = [
        (
            found.waiting == found.scenario.size,
            f"{name}: {found.waiting} of {found.scenario.size} task instances still waiting at "
            "the window's end (the benchmark's own check)",
        ),
        (
            found.triggers <= allowed and found.held_triggers == 0,
            f"{name}: at most {found.triggers} trigger rows at once, {found.held_triggers} of "
            f"them a held task instance's (target: at most {allowed}, none a task instance's)",
        ),
        (
            found.starts == 0,
            f"{name}: {found.starts} worker starts of the fleet in the window, "
            f"{found.starts_since_run} since its run began (target: 0)",
        ),
    ]
    if found.scenario.hold:
        most = max(found.requests, default=0)
        checks.append(
            (
                bool(found.requests) and most <= REQUESTS_PER_ROUND,
                f"{name}: at most {most} REST requests in one round of {len(found.requests)}, "
                f"{found.tokens} of them for a token (target: at most {REQUESTS_PER_ROUND}, "
                "the token included)",
            )
        )
    return checks


def growth(adds: dict[int, dict[str, float]], key: str, what: str) -> tuple[bool, str]:
    """Whether what the hold adds to ``key`` at the largest size is within GROWTH times
    what it adds at the smallest, and the line that says so."""
    low, high = min(adds), max(adds)
    small, large = adds[low][key], adds[high][key]
    ratio = f"{large / small:.2f}x" if small > 0 else "no ratio: nothing added"
    return (
        large <= GROWTH * small,
        f"the hold adds {large:.0f} ms a round to {what} at {high}, {small:.0f} ms at {low} "
        f"({ratio}; the bound: at most {GROWTH}x)",
    )


#: what the hold adds to the scheduler, each a target as the API servers' CPU is
SCHEDULER_ADDS = {
    "sched": "the scheduler's CPU, its workers' included",
    "main": "the scheduler's own process's CPU",
    "outside": "the scheduler's loops outside its check of the fleet's run",
}


def print_added(adds: dict[int, dict[str, float]]) -> None:
    """The table of what the hold adds per round, per size."""
    print()
    print("added by the hold, ms per round (hold - no hold): CPU, and the scheduler's loops")
    print("outside its check of the fleet's run (outside)")
    print(
        f"{'size':>6} {'API':>6} {'REST':>6} {'exec':>6} {'sched':>7} {'main':>7} {'trigr':>6} "
        f"{'db':>6} {'outside':>7}"
    )
    for size, ms in adds.items():
        print(
            f"{size:>6} {ms['API']:>6.0f} {ms['REST']:>6.0f} {ms['exec']:>6.0f} "
            f"{ms['sched']:>7.0f} {ms['main']:>7.0f} {ms['trig']:>6.0f} {ms[DATABASE]:>6.0f} "
            f"{ms['outside']:>7.0f}"
        )


def report(results: list[Measured]) -> bool:
    """Print the tables and the targets; whether every target holds."""
    print()
    print(LEGEND)
    print()
    print(HEADER)
    for found in results:
        print(line(found))
    adds = added(results)
    if adds:
        print_added(adds)
    print()
    for size in sorted({r.scenario.size for r in results}):
        took = sum(r.took for r in results if r.scenario.size == size)
        print(f"{size} task instances: {took:.0f} s, its scenarios together")
    print()
    checks = [check for found in results for check in scenario_targets(found)]
    if len(adds) > 1:
        checks.append(growth(adds, "API", "the API servers' CPU (REST and execution)"))
        checks.extend(growth(adds, key, what) for key, what in SCHEDULER_ADDS.items())
    for passed, text in checks:
        print(f"{'PASS' if passed else 'FAIL'}  {text}")
    return all(passed for passed, _ in checks)


# -- the run ---------------------------------------------------------------------------


def interrupted(signum: int, frame: FrameType | None) -> None:
    """A SIGTERM ends the run as Ctrl-C does: through the clean-up."""
    raise KeyboardInterrupt


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[1000, 10000], help="map indexes of the fleet"
    )
    parser.add_argument("--rounds", type=int, default=4, help="rounds measured")
    parser.add_argument("--round", type=int, default=15, help="the breaker's round, in seconds")
    options = parser.parse_args()
    signal.signal(signal.SIGTERM, interrupted)
    results = []
    try:
        with listening(frozenset({LOOP_METRIC, FLEET_CHECK_METRIC})) as statsd:
            for size in sorted(options.sizes):
                for hold in (False, True):
                    scenario = Scenario(size, hold, options.round, options.rounds)
                    results.append(run_scenario(scenario, statsd))
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    except Exception:
        if results:  # what was measured before the error
            report(results)
        raise
    return 0 if report(results) else 1


if __name__ == "__main__":
    sys.exit(main())
