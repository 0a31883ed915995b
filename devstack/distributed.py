"""``make test-distributed``: the example on CeleryExecutor, PostgreSQL and Redis, for real.

Run from the repository root as ``python -m devstack.distributed``.

The same services docker-compose.yaml starts (api-server, scheduler,
dag-processor, triggerer, a Celery worker) run natively on a fresh PostgreSQL
database and a Redis key prefix of their own. A run of the example DAG, then a fleet's:

1. an on-time day: every task ends as the gate decided; the Celery worker's
   task process running ``load`` is SIGKILLed while its job runs, and try 2 is
   decided on the job's status before it runs; the load's retry path waits out
   its backoff deferred in the triggerer, which is restarted while the sensor is
   deferred, and the sensor still resumes at the end of the backoff; the worker time
   the sensor held during that wait is measured, and a sensor that did not defer
   fails the day. The load's backoff is 90 s here, not the example's 30 s
   (:data:`LOAD_RETRY_DELAY`), so that the sensor has time to defer;
2. a shared outage on two Celery workers: two DAGs of twelve gated map indexes share the
   breaker pool ``positions_api`` (8 slots, 20 s rounds here) and a stand-in API that
   goes down for 70 s while their first tries run; the breaker holds the pool, first
   tries too, whichever worker would have run them: at most the pool's size and one
   probe a round reach the API while it is down, and every task succeeds after it is
   back (:mod:`devstack.breaker_fleet`).

A late day's refusals and impact branch are decided by the gate's task, whichever
executor ran it: ``make test`` runs every day of the example (``tests/example``).

Every process started is stopped by pid, the database is dropped and the Redis
keys deleted. Logs stay in ``.test-runs/`` and are named on failure.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import pendulum
import psycopg2
import redis

from airflow_retrywindow.configuration import DEFAULT_SENSOR_SHORT_WAIT
from devstack import breaker_fleet
from devstack.example import DAG_ID, ON_TIME, Day, problems, xcom
from devstack.stack import ROOT, AirflowStack, log

POSTGRES = "postgres@127.0.0.1:5432"
REDIS_URL = "redis://127.0.0.1:6379/0"
#: load's retry delay here (the example's is 10 s): its repeat's backoff, three times that,
#: is 90 s. The sensor first evaluates after load's try 2, reconcile_load and dry_run_load,
#: each a Celery task: 11 s into the backoff on 2 cores at a load average of 38, and more
#: than 20 s in the CI runs where it had under 10 s of a 30 s backoff left and slept it in
#: the worker ([retry_window] sensor_short_wait). 90 s leaves 80 s beyond the short wait:
#: four times those 20 s, and still twice them on a machine twice as slow
LOAD_RETRY_DELAY = 30
#: the on-time day: 120 s more than the example's deadline for the longer backoff, so the
#: repeat still fits it
DEFERRAL_DAY = replace(ON_TIME, deadline=ON_TIME.deadline + 120)
#: how long a run may take before the path gives up on it
RUN_LIMIT = 600
#: the shared outage here: shorter than the end-to-end test's, in shorter rounds
FLEET_OUTAGE = 70.0
FLEET_ROUND = 20
FLEET_SLOTS = 8
FLEET_MAP_INDEXES = 12


class Failure(Exception):
    """A check of the distributed path failed."""


@dataclass
class SensorClock:
    """The sensor's state over time, sampled while the run goes on (wall-clock seconds)."""

    spans: list[tuple[str, float, float]] = field(default_factory=list)
    last: tuple[str, float] | None = None

    def sample(self, state: str | None) -> None:
        now = time.time()
        if self.last is not None:
            self.spans.append((self.last[0], self.last[1], now))
        self.last = (state or "none", now)

    def seconds(self, state: str, start: float = 0.0, end: float = float("inf")) -> float:
        """Time spent in ``state`` within ``start..end``."""
        return sum(max(0.0, min(b, end) - max(a, start)) for s, a, b in self.spans if s == state)


def admin_sql(statement: str) -> None:
    connection = psycopg2.connect(f"postgresql://{POSTGRES}/postgres")
    connection.autocommit = True  # CREATE and DROP DATABASE refuse transactions
    try:
        with connection.cursor() as cursor:
            cursor.execute(statement)
    finally:
        connection.close()


@contextmanager
def own_database(stack: AirflowStack, database: str) -> Iterator[None]:
    """The PostgreSQL database ``database`` (which ``stack``'s URL names) for the block;
    after it every service of ``stack`` is stopped and the database dropped, on an error
    or Ctrl-C too. An error prints the tails of the services' logs first."""
    admin_sql(f'CREATE DATABASE "{database}"')
    log(f"created PostgreSQL database {database}; Airflow home {stack.home}")
    try:
        yield
    except Exception:
        print(stack.log_tails(), file=sys.stderr)
        raise
    finally:
        stack.stop()
        admin_sql(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        log(f"dropped {database}; the services' logs were in {stack.logs}")


def run_day(
    stack: AirflowStack,
    day: Day,
    *,
    restart_triggerer: bool = False,
) -> tuple[str, SensorClock, bool]:
    """Trigger one day's run and wait for it, sampling the sensor's state: its run id,
    the sensor's clock, and whether the triggerer was restarted."""
    log(f"triggering {DAG_ID}: {day.kind} day {day.business_date}, deadline {day.deadline} s")
    run_id = stack.trigger(DAG_ID, conf=day.conf, logical_date=day.business_date)
    clock, restarted, seen = SensorClock(), False, {}
    limit = time.monotonic() + RUN_LIMIT
    while stack.run_state(DAG_ID, run_id) not in ("success", "failed"):
        if time.monotonic() > limit:
            raise Failure(f"run {run_id} did not finish in {RUN_LIMIT} s")
        states = stack.task_states(DAG_ID, run_id)
        for task, task_state in sorted(states.items()):
            if seen.get(task) != task_state:
                log(f"  {task:<22} {task_state[0] or 'none':<16} try {task_state[1]}")
        seen = states
        sensor = states.get("load_retry_window", (None, 0))[0]
        clock.sample(sensor)
        if restart_triggerer and not restarted and sensor == "deferred":
            log("the sensor is deferred: restarting the triggerer")
            stack.restart("triggerer")
            restarted = True
        time.sleep(0.25)
    clock.sample(None)
    state = stack.run_state(DAG_ID, run_id)
    found = problems(stack, run_id, day)
    if state != "success" or found:
        raise Failure(f"run {run_id} ended {state}:\n  " + "\n  ".join(found))
    log(f"run {run_id}: every task ended as the gate decided")
    return run_id, clock, restarted


def deferral_day(stack: AirflowStack) -> tuple[str, SensorClock]:
    """The on-time day, its triggerer restarted while the sensor is deferred: its run id
    and the sensor's clock. A sensor never seen deferred fails it."""
    run_id, clock, restarted = run_day(stack, DEFERRAL_DAY, restart_triggerer=True)
    if not restarted:
        began, until = first_wait(stack, run_id)
        left = (until - began).total_seconds()
        raise Failure(
            f"the sensor was never seen deferred (it started with {left:.1f} s of its"
            " backoff left), so the triggerer was not restarted"
        )
    return run_id, clock


def first_wait(stack: AirflowStack, run_id: str) -> tuple[pendulum.DateTime, pendulum.DateTime]:
    """When the sensor's first backoff wait began and when it was to end."""
    record = xcom(stack, run_id, "load_retry_window")
    waits = record.get("waits") or []
    if not waits:
        raise Failure(f"the sensor did not wait out a backoff: {record}")
    began, until = pendulum.parse(waits[0]["at"]), pendulum.parse(waits[0]["until"])
    assert isinstance(began, pendulum.DateTime) and isinstance(until, pendulum.DateTime)
    return began, until


@dataclass(frozen=True)
class Deferral:
    """What the sensor did during its first backoff wait (seconds; times in UTC).

    :param wait: how much of the backoff was left when the sensor first evaluated.
    :param deferred: how long it was seen deferred within the wait.
    :param held: how long it was seen running (holding a worker slot) within the wait.
    :param until: when the backoff ended.
    :param resumed_at: when the sensor ended, after the trigger fired.
    """

    wait: float
    deferred: float
    held: float
    until: pendulum.DateTime
    resumed_at: pendulum.DateTime

    def problems(self, short_wait: float = DEFAULT_SENSOR_SHORT_WAIT) -> list[str]:
        """Everything that says the wait was not deferred to the triggerer; [] when none.

        :param short_wait: ``[retry_window] sensor_short_wait``: a wait no longer than
            this is slept in the worker, so the day's backoff must leave more.
        """
        found = []
        if self.wait <= short_wait:
            found.append(
                f"the sensor started with {self.wait:.1f} s of its backoff left, not more than"
                f" the {short_wait:g} s it sleeps in the worker: it could not defer (the"
                " backoff is too short for how late this machine starts it)"
            )
        if self.deferred <= 0:
            found.append(f"the sensor was never deferred during its {self.wait:.1f} s wait")
        # the evaluation that decides to defer may overlap the wait's first second
        if self.held > 1.5:
            found.append(
                f"the sensor held a worker slot for {self.held:.1f} s of a {self.wait:.1f} s wait"
            )
        if self.deferred < self.wait - 3:
            found.append(
                f"the sensor was deferred only {self.deferred:.1f} s of a {self.wait:.1f} s wait"
            )
        # the trigger fires at the end; then the scheduler queues the sensor and a worker runs
        # it: seconds when idle, 34 s once on two busy cores after the triggerer's restart
        if not self.until <= self.resumed_at <= self.until.add(seconds=60):
            found.append(f"the sensor ended at {self.resumed_at}, not just after {self.until}")
        return found


def check_deferral(stack: AirflowStack, run_id: str, clock: SensorClock) -> None:
    """The sensor waited in the triggerer, not on a worker, and resumed on time."""
    began, until = first_wait(stack, run_id)
    window = (began.timestamp(), until.timestamp())
    resumed = stack.rows(
        "select end_date from task_instance where dag_id=:d and run_id=:r and task_id=:t",
        d=DAG_ID,
        r=run_id,
        t="load_retry_window",
    )[0][0]
    seen = Deferral(
        wait=(until - began).total_seconds(),
        deferred=clock.seconds("deferred", *window),
        held=clock.seconds("running", *window),
        until=until,
        resumed_at=pendulum.instance(resumed, tz="UTC"),
    )
    print(
        f"    backoff wait {seen.wait:.1f} s: the sensor was deferred in the triggerer for "
        f"{seen.deferred:.1f} s of it and held a worker slot for {seen.held:.1f} s of it "
        f"(all its evaluations: {clock.seconds('running'):.1f} s); it ended "
        f"{(seen.resumed_at - until).total_seconds():+.1f} s after the backoff"
    )
    found = seen.problems()
    if found:
        raise Failure("; ".join(found))


def check_fleet_outage(stack: AirflowStack, standin: breaker_fleet.DependencyStandIn) -> None:
    """Two gated fleets on two workers through a shared outage: the breaker holds the pool."""
    stack.start("worker-2")
    stack.wait_for(
        lambda: breaker_fleet.breaker_line(stack) is not None, "the breaker", timeout=180
    )
    runs = {
        dag_id: stack.trigger(dag_id, conf={"deadline_in": 3600}, logical_date="2026-11-01")
        for dag_id in breaker_fleet.GATED_DAGS
    }
    stack.wait_for(
        lambda: any(call.status == 200 for call in standin.calls), "the first calls", timeout=300
    )
    down = standin.down()
    time.sleep(FLEET_OUTAGE)  # the outage itself: what the fleet is tried against
    up = standin.up()
    for dag_id, run_id in runs.items():
        stack.wait_for_run(dag_id, run_id, timeout=600)
    finals = breaker_fleet.final_states(stack, runs, breaker_fleet.GATED_DAGS)
    if len(finals) != 2 * FLEET_MAP_INDEXES or any(state != "success" for state, _ in finals):
        raise Failure(f"the fleet did not all succeed after the outage: {finals}")
    # the pool's size, then one probe a round; one more for a round's edge
    budget = FLEET_SLOTS + int(FLEET_OUTAGE // FLEET_ROUND) + 1
    into = standin.between(down, up, "gated")
    if len(into) > budget:
        raise Failure(f"{len(into)} calls reached the API while it was down (budget {budget})")
    # both workers took tasks of the fleet
    for worker in ("worker", "worker-2"):
        taken = (stack.logs / f"{worker}.log").read_text(errors="replace").count("received")
        if taken == 0:
            raise Failure(f"the Celery {worker} received no task")
    log(f"{len(into)} calls reached the API while it was down, within the budget {budget}")


def main() -> int:
    tag = f"{os.getpid()}_{int(time.time())}"
    database = f"retrywindow_{tag}"
    prefix = f"retrywindow-{tag}:"
    home = ROOT / ".test-runs" / f"distributed-{tag}"
    # the example's DAG and the fleet's, in one folder
    dags = home / "dags"
    dags.mkdir(parents=True)
    for dag_file in (
        ROOT / "dags" / "retry_window_example.py",
        breaker_fleet.FLEET_FILE,
        breaker_fleet.CONTROLLER_FILE,
    ):
        shutil.copy(dag_file, dags)
    standin = breaker_fleet.DependencyStandIn()
    admin_sql(f'CREATE DATABASE "{database}"')
    log(f"created PostgreSQL database {database}; Redis key prefix {prefix!r}")
    stack = AirflowStack(
        home=home,
        database_url=f"postgresql+psycopg2://{POSTGRES}/{database}",
        executor="CeleryExecutor",
        dags_folder=dags,
        extra_env={
            "RW_FLEET_STANDIN": standin.url,
            "RW_EXAMPLE_LOAD_RETRY_DELAY": str(LOAD_RETRY_DELAY),
            **breaker_fleet.breaker_env(FLEET_ROUND),
            breaker_fleet.MAP_INDEXES_ENV: str(FLEET_MAP_INDEXES),
            "AIRFLOW__CELERY__BROKER_URL": REDIS_URL,
            "AIRFLOW__CELERY__RESULT_BACKEND": f"db+postgresql://{POSTGRES}/{database}",
            "AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__GLOBAL_KEYPREFIX": prefix,
        },
    )
    try:
        stack.prepare()
        stack.start("api-server", "scheduler", "dag-processor", "triggerer", "worker")
        breaker_fleet.create_pools(stack, FLEET_SLOTS)
        stack.wait_for_dag(DAG_ID)
        run_id, clock = deferral_day(stack)
        check_deferral(stack, run_id, clock)
        check_fleet_outage(stack, standin)
    except Exception as error:
        print(f"\nFAILED: {error!r}\n\n{stack.log_tails()}", file=sys.stderr)
        print(f"\nService logs: {stack.logs}", file=sys.stderr)
        return 1
    finally:
        stack.stop()
        standin.close()
        admin_sql(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        keys = redis.Redis.from_url(REDIS_URL)
        for key in keys.scan_iter(match=f"{prefix}*"):
            keys.delete(key)
        log(f"dropped {database}, deleted the {prefix!r} keys; logs in {home}")
    print("\n2 passed, 0 failed: distributed path (CeleryExecutor, PostgreSQL, Redis)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
