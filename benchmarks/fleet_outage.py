"""A fleet of 200 gated retries through a shared API's outage, on a real scheduler.

Run from the work tree (``make install`` first: it needs the PostgreSQL driver of the
``distributed`` group, and PostgreSQL at 127.0.0.1:5432, user postgres):
``python benchmarks/fleet_outage.py [--map-indexes 200] [--outage 90]``; ``make bench``
runs it with the others. It takes about 12 minutes on a 2-core machine running nothing
else (``--skip-steady``: the outage alone, about 6).

It creates a PostgreSQL database of its own and starts Airflow's API server,
scheduler, DAG processor and triggerer on it (LocalExecutor,
:class:`devstack.stack.AirflowStack`), with the pool ``positions_api`` of 32 slots
read as a dependency in 15 s rounds. The DAG ``rw_fleet_mapped``
(``tests/policy/fleet_dags/rw_fleet_mapped.py``) maps one gated task over 200 map
indexes in that pool (``retries=3``, ``retry_delay=15 s``, a deadline an hour away);
each map index asks a loopback stand-in of their API once per try and fails on
anything but 200 (:class:`devstack.fleet_outage.FleetStandIn`). Two runs of it, one
after the other on the same stack, each against a stand-in of its own:

- **outage**: the API answers 503 for 90 s from its first request, then 200;
- **no outage**: the same load, the API never down.

With ``--from-retry`` the outage starts with the first retry's request instead (the API
answers 503 before it too): where the machine starts the first tries so slowly that 90 s
from the first request end before any retry starts, the held retries still meet it.

For each run it prints: the map indexes that succeeded; the retries (try 2 or later)
that reached the API while it was down; the seconds from the API's return to the end
of the last task instance (for the run without outage: from its first request); worker
starts per task instance, tries and resumptions included (Airflow's event log), mean
and most; the holds at a try's start (deferrals to the triggerer and reschedules);
the API server's CPU (user and system, its process and its children, from ``/proc``)
over the run and over the outage's span; and the task instance listings the API
server answered (its access log), each request of a pool read being one.

Targets (one PASS/FAIL line each; the exit status is 1 if any fails), for the outage:
every map index succeeds with nobody clearing anything; at most 50 retries reach the
API while it is down; the last task instance ends within 240 s of the API's return.
And the run without outage succeeds whole (the benchmark's own check of its load).
Every process it started is stopped and its database dropped, on an error or Ctrl-C
too; the services' logs stay in ``.test-runs/``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pendulum

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # devstack: the project's way of starting Airflow

from devstack.distributed import POSTGRES, own_database  # noqa: E402
from devstack.fleet_outage import (  # noqa: E402
    MAP_INDEXES_ENV,
    MAPPED_DAG,
    MAPPED_DAG_FILE,
    POOLS,
    FleetStandIn,
    create_pools,
    holds,
    instance_states,
    worker_starts,
)
from devstack.process_cpu import cpu_seconds, process_tree  # noqa: E402
from devstack.stack import AirflowStack, log  # noqa: E402

POOL = POOLS[0]
SLOTS = 32
ROUND = 15
DEADLINE_IN = 3600
#: the targets of the outage run
DOWN_RETRIES_TARGET = 50
LAST_END_TARGET = 240.0
#: the stand-in's endpoint of each run
OUTAGE_ENDPOINT, STEADY_ENDPOINT = "outage", "steady"
#: how often the wait samples the run and the API server's CPU, and prints progress
SAMPLE_SECONDS, PROGRESS_SECONDS = 2.0, 30.0
#: what a task instance listing of the REST API looks like in the API server's access log
LISTING_PATH = "/dagRuns/~/taskInstances"


@dataclass
class Measured:
    """One run of the fleet, once it ended (or ran out of time), and what it cost.

    :param name: ``outage`` or ``no outage``.
    :param outage: the seconds the API was down from its first request.
    """

    name: str
    outage: float
    map_indexes: int = 0
    succeeded: int = 0
    states: Counter[str] = field(default_factory=Counter)
    ended: bool = False
    requests: int = 0
    down_retries: int = 0
    #: seconds from the API's return to the last task instance's end
    last_end: float | None = None
    starts: list[int] = field(default_factory=list)
    holds: int = 0
    run_seconds: float = 0.0
    run_cpu: float = 0.0
    #: the API server's CPU over ``span`` seconds from the first request
    span: float = 0.0
    span_cpu: float | None = None
    listings: int = 0


class CpuClock:
    """The API server's CPU seconds sampled against the monotonic clock while a run goes."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.samples: list[tuple[float, float]] = []

    def sample(self) -> None:
        self.samples.append((time.monotonic(), cpu_seconds(self.pids)))

    def at(self, moment: float) -> float:
        """CPU seconds at ``moment``, interpolated between the samples around it."""
        before = [s for s in self.samples if s[0] <= moment] or self.samples[:1]
        after = [s for s in self.samples if s[0] >= moment] or self.samples[-1:]
        (t0, c0), (t1, c1) = before[-1], after[0]
        return c0 if t1 == t0 else c0 + (c1 - c0) * (moment - t0) / (t1 - t0)

    def between(self, start: float, end: float) -> float:
        return self.at(end) - self.at(start)


def wait_for_run(stack: AirflowStack, run_id: str, clock: CpuClock, timeout: float) -> bool:
    """Sample until the run ends; whether it ended within ``timeout`` seconds."""
    deadline, shown = time.monotonic() + timeout, 0.0
    while True:
        clock.sample()
        if stack.run_state(MAPPED_DAG, run_id) in ("success", "failed"):
            return True
        if time.monotonic() > deadline:
            return False
        if time.monotonic() - shown >= PROGRESS_SECONDS:
            states = Counter(
                s or "none" for s, _ in instance_states(stack, MAPPED_DAG, run_id).values()
            )
            log("  " + ", ".join(f"{count} {state}" for state, count in states.most_common()))
            shown = time.monotonic()
        time.sleep(SAMPLE_SECONDS)


def listings(stack: AirflowStack, since: int) -> int:
    """Task instance listings the API server logged from byte ``since`` of its log."""
    with (stack.logs / "api-server.log").open("rb") as text:
        text.seek(since)
        lines = text.read().decode(errors="replace").splitlines()
    return sum(1 for line in lines if "request finished" in line and LISTING_PATH in line)


def wall_of(moment: float) -> pendulum.DateTime:
    """A moment of the monotonic clock (the stand-in's) on the wall clock, in UTC."""
    return pendulum.from_timestamp(moment + time.time() - time.monotonic(), tz="UTC")


def last_end(stack: AirflowStack, run_id: str) -> pendulum.DateTime | None:
    """When the run's last task instance ended (the API server's clock, in the DB)."""
    (found,) = stack.rows(
        "select max(end_date) from task_instance where dag_id = :d and run_id = :r",
        d=MAPPED_DAG,
        r=run_id,
    )
    return None if found[0] is None else pendulum.instance(found[0], tz="UTC")


def run_fleet(
    stack: AirflowStack,
    name: str,
    *,
    outage: float,
    span: float,
    logical_date: str,
    timeout: float,
    from_try: int = 1,
) -> Measured:
    """One run of the fleet against a stand-in of its own, down ``outage`` seconds.

    :param span: the seconds from the first request the API server's CPU is also
        measured over: the outage's, for the run without one too.
    :param from_try: the try whose first request starts the outage (503 before it too).
    """
    endpoint = OUTAGE_ENDPOINT if outage else STEADY_ENDPOINT
    standin = FleetStandIn(outage, from_try=from_try)
    clock = CpuClock(process_tree(stack.processes["api-server"].pid))
    found = Measured(name, outage)
    try:
        access_log = (stack.logs / "api-server.log").stat().st_size
        clock.sample()
        began = time.monotonic()
        start = "its first request" if from_try == 1 else "the first retry's request"
        log(f"{name}: triggering {MAPPED_DAG} (the API down {outage:g} s from {start})")
        conf = {"api": f"{standin.url}/{endpoint}", "deadline_in": DEADLINE_IN}
        run_id = stack.trigger(MAPPED_DAG, conf=conf, logical_date=logical_date)
        found.ended = wait_for_run(stack, run_id, clock, timeout)
        found.run_seconds = time.monotonic() - began
        found.run_cpu = clock.between(began, time.monotonic())
        found.listings = listings(stack, access_log)
    finally:
        standin.close()
    measure_run(stack, run_id, standin, endpoint, found)
    if endpoint in standin.first:
        first = standin.first[endpoint]
        found.span, found.span_cpu = span, clock.between(first, first + span)
    return found


def measure_run(
    stack: AirflowStack, run_id: str, standin: FleetStandIn, endpoint: str, found: Measured
) -> None:
    """What the run's task instances, the event log and the stand-in show of it."""
    states = instance_states(stack, MAPPED_DAG, run_id)
    found.map_indexes = len(states)
    found.states = Counter(state or "none" for state, _ in states.values())
    found.succeeded = found.states["success"]
    found.requests = sum(1 for each in standin.requests if each.endpoint == endpoint)
    found.starts = list(worker_starts(stack, MAPPED_DAG, run_id).values())
    found.holds = sum(holds(stack, MAPPED_DAG, run_id, every_try=True).values())
    ended = last_end(stack, run_id)
    if endpoint in standin.first:
        found.down_retries = len(standin.retries_while_down(endpoint))
        # a run cut short has no last end: what ended so far would read as one
        if ended is not None and found.ended:
            found.last_end = (ended - wall_of(standin.back_at(endpoint))).total_seconds()


def table(runs: list[Measured]) -> str:
    """The runs side by side."""

    def row(what: str, values: list[str]) -> str:
        return f"{what:<56}" + "".join(f"{value:>26}" for value in values)

    def seconds(value: float | None) -> str:
        return "-" if value is None else f"{value:.0f} s"

    lines = [row("", [f"{r.name} ({r.outage:g} s)" if r.outage else r.name for r in runs])]
    lines += [
        row("succeeded", [f"{r.succeeded} of {r.map_indexes}" for r in runs]),
        row("ended within the time allowed", ["yes" if r.ended else "NO" for r in runs]),
        row("requests to the API", [str(r.requests) for r in runs]),
        row("retries that reached it while it was down", [str(r.down_retries) for r in runs]),
        row(
            "last task's end after the API's return (or first ask)",
            [seconds(r.last_end) for r in runs],
        ),
        row(
            "worker starts per task instance, mean / most",
            [f"{statistics.fmean(r.starts or [0]):.2f} / {max(r.starts or [0])}" for r in runs],
        ),
        row("holds at a try's start (all tries)", [str(r.holds) for r in runs]),
        row("task instance listings the API server answered", [str(r.listings) for r in runs]),
        row("API server CPU over the run", [f"{r.run_cpu:.1f} s" for r in runs]),
        row("  the run's wall time", [seconds(r.run_seconds) for r in runs]),
        row(
            "API server CPU in the outage's span from the first ask",
            ["-" if r.span_cpu is None else f"{r.span_cpu:.1f} s in {r.span:g} s" for r in runs],
        ),
    ]
    others = [
        ", ".join(f"{n} {s}" for s, n in r.states.items() if s != "success") or "-" for r in runs
    ]
    lines.append(row("task instances not succeeded", others))
    return "\n".join(lines)


def targets(outage: Measured, steady: Measured | None) -> list[tuple[bool, str]]:
    """The PASS/FAIL lines."""
    checks = [
        (
            outage.ended and outage.succeeded == outage.map_indexes > 0,
            f"outage: {outage.succeeded} of {outage.map_indexes} succeeded, nobody clearing "
            "anything (target: all)",
        ),
        (
            outage.down_retries <= DOWN_RETRIES_TARGET,
            f"outage: {outage.down_retries} retries reached the API while it was down "
            f"(target: at most {DOWN_RETRIES_TARGET})",
        ),
        (
            outage.last_end is not None and outage.last_end <= LAST_END_TARGET,
            (
                "outage: the run did not end in the time allowed"
                if outage.last_end is None
                else f"outage: the last task ended {outage.last_end:.0f} s after the API's return"
            )
            + f" (target: within {LAST_END_TARGET:.0f} s)",
        ),
    ]
    if steady is not None:
        checks.append(
            (
                steady.ended and steady.succeeded == steady.map_indexes > 0,
                f"no outage: {steady.succeeded} of {steady.map_indexes} succeeded (target: all)",
            )
        )
    return checks


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, check=False)
    return done.stdout.decode(errors="replace").strip()


def provider_files() -> str:
    """The provider's files as git sees them: the tree the commit holds, and a digest of
    their uncommitted changes, if any. Every try imports them afresh, so a run measures
    what they were as it went."""
    tree = _git("rev-parse", "--short", "HEAD:airflow_retrywindow") or "unknown"
    changes = _git("diff", "HEAD", "--", "airflow_retrywindow")
    if not changes:
        return f"tree {tree}"
    digest = hashlib.sha1(changes.encode(), usedforsecurity=False).hexdigest()[:10]
    return f"tree {tree} with uncommitted changes (diff {digest})"


def new_stack(home: Path, database: str, map_indexes: int) -> AirflowStack:
    """The stack: its DAG folder holds the fleet's DAG alone."""
    dags = home / "dags"
    dags.mkdir(parents=True)
    shutil.copy(MAPPED_DAG_FILE, dags)
    return AirflowStack(
        home=home,
        database_url=f"postgresql+psycopg2://{POSTGRES}/{database}",
        dags_folder=dags,
        extra_env={
            MAP_INDEXES_ENV: str(map_indexes),
            "AIRFLOW__RETRY_WINDOW__DEPENDENCY_POOLS": json.dumps({POOL: {"round": ROUND}}),
            # every slot of the pool can be given: the executor's bound is above it
            "AIRFLOW__CORE__PARALLELISM": str(SLOTS + 8),
        },
    )


def run_both(stack: AirflowStack, options: argparse.Namespace) -> list[Measured]:
    """Start the stack, then the run with the outage and, unless skipped, the one without."""
    stack.prepare()
    stack.start("api-server", "scheduler", "dag-processor", "triggerer")
    stack.wait_for_dag(MAPPED_DAG)
    create_pools(stack, (POOL,), SLOTS)
    span, timeout = options.outage, options.timeout
    from_try = 2 if options.from_retry else 1
    runs = [
        run_fleet(
            stack,
            "outage from retry" if options.from_retry else "outage",
            outage=span,
            span=span,
            logical_date="2026-11-01",
            timeout=timeout,
            from_try=from_try,
        )
    ]
    # a run still going would share the pool and the machine with the next
    if runs[0].ended and not options.skip_steady:
        runs.append(
            run_fleet(
                stack,
                "no outage",
                outage=0.0,
                span=span,
                logical_date="2026-11-02",
                timeout=timeout,
            )
        )
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--map-indexes", type=int, default=200, help="map indexes of the task")
    parser.add_argument(
        "--outage", type=float, default=90.0, help="seconds the API is down from its first ask"
    )
    parser.add_argument(
        "--timeout", type=float, default=1500.0, help="seconds each run may take at most"
    )
    parser.add_argument(
        "--from-retry",
        action="store_true",
        help="start the outage with the first retry's request, not the first request (the "
        "API answers 503 before it too): on a machine that starts the first tries slowly, "
        "the retries still meet the outage",
    )
    parser.add_argument(
        "--skip-steady", action="store_true", help="run the outage only, not the load without"
    )
    options = parser.parse_args()
    # a SIGTERM ends the run as Ctrl-C does: through the clean-up
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    tag = f"{os.getpid()}_{int(time.time())}"
    database = f"rw_bench_fleet_{tag}"
    home = ROOT / ".test-runs" / f"fleet-bench-{tag}"
    stack = new_stack(home, database, options.map_indexes)
    files = provider_files()
    log(f"the provider at commit {_git('rev-parse', '--short', 'HEAD')}: {files}")
    try:
        with own_database(stack, database):
            runs = run_both(stack, options)
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    print()
    print(f"the provider: {files}")
    if provider_files() != files:
        print(f"  and its files changed while the runs went: now {provider_files()}")
    print()
    print(table(runs))
    print()
    checks = targets(runs[0], runs[1] if len(runs) > 1 else None)
    for passed, text in checks:
        print(f"{'PASS' if passed else 'FAIL'}  {text}")
    return 0 if all(passed for passed, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
