"""The Retry window view of a run with 1,000 mapped task instances, each refused by the policy.

Run from the work tree: ``python benchmarks/run_view.py [--map-indexes 1000] [--rounds 7]``.

It builds a throwaway metadata DB (SQLite, ``airflow db migrate`` once), writes
one DAG run of a task mapped over 1,000 map indexes, and for each map index the
evidence ``RetryWindowPolicy.evaluate`` stores when it refuses a retry
(``deadline-infeasible``): the policy itself is called, with a task state store
and a task instance that keep what it writes, and its values are written to the
``task_state_store`` and ``xcom`` tables the way Airflow's task SDK does. No
scheduler runs. The view's routes are then called in-process, with a session of
that DB, through the view's real store (Airflow's authentication is left out:
it is Airflow's, and the same for every page).

Targets (one PASS/FAIL line each; the exit status is 1 if any fails):

- the run's view answers in under 0.5 s (median of the warm rounds);
- the run's page stays under 1 MiB;
- one map index's view answers in under 0.3 s (median of the warm rounds).

Also printed: the first (cold) render, and how many fixtures it replayed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DAG_ID = "rw_view_bench"
RUN_ID = "manual__2026-12-03"
TASK_ID = "load"
RUN_VIEW_SECONDS = 0.5
RUN_PAGE_BYTES = 1024 * 1024
TASK_VIEW_SECONDS = 0.3


def environment(home: Path) -> dict[str, str]:
    return {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
    }


def migrate(home: Path) -> None:
    """A metadata DB at Airflow's current schema, once."""
    (home / "dags").mkdir(parents=True, exist_ok=True)
    airflow = Path(sys.executable).with_name("airflow")
    env = {**os.environ, **environment(home)}
    subprocess.run([str(airflow), "db", "migrate"], env=env, check=True, capture_output=True)


class _Store:
    """The task state store's get and set, as the policy calls them, kept in memory."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def set(self, key: str, value: Any) -> None:
        self.values[key] = value


class _TaskInstance:
    """What the policy reads of Airflow's runtime task instance, and the XComs it pushes."""

    def __init__(self, map_index: int, try_number: int, max_tries: int) -> None:
        self.dag_id, self.run_id, self.task_id = DAG_ID, RUN_ID, TASK_ID
        self.map_index = map_index
        self.try_number = try_number
        self.max_tries = max_tries
        self.xcom: dict[str, Any] = {}
        self.stats_tags: dict[str, str] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value


def refusals(count: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Per map index, what the policy stores when it refuses: (state store, XComs)."""
    import pendulum
    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.sdk import DAG

    from airflow_retrywindow import Deadline, RetryWindowPolicy
    from airflow_retrywindow.records.evidence import EVIDENCE_KEY

    # an hour's work cannot end before a deadline ten minutes after the interval
    policy = RetryWindowPolicy(
        deadline=Deadline.after_data_interval_end(minutes=10),
        duration=timedelta(hours=1),
        validation=timedelta(minutes=5),
        safe_repeat=True,
    )
    start = pendulum.datetime(2026, 12, 3, tz="UTC")
    with DAG(DAG_ID, schedule=None, start_date=start):
        task = EmptyOperator(task_id=TASK_ID, retries=3, retry_policy=policy)
    found = []
    for map_index in range(count):
        store, ti = _Store(), _TaskInstance(map_index, try_number=1, max_tries=3)
        now = pendulum.now("UTC")
        context = {
            "task": task,
            "ti": ti,
            "map_index": map_index,
            "task_state_store": store,
            "data_interval_start": now.subtract(minutes=5),
            "data_interval_end": now,
        }
        policy.evaluate(TimeoutError(f"map index {map_index} timed out"), 1, 3, context)
        latest = store.values[EVIDENCE_KEY]["latest"]
        if latest.get("action") != "fail":
            raise SystemExit(f"the policy did not refuse map index {map_index}: {latest}")
        found.append((store.values, ti.xcom))
    return found


def write_run(count: int) -> None:
    """One DAG run, its mapped task instances, and what the policy stored for each."""
    import pendulum
    from airflow.models.dagrun import DagRun
    from airflow.models.task_state_store import TaskStateStoreModel
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import insert

    now = pendulum.now("UTC")
    stored = refusals(count)
    with create_session() as session:
        session.execute(
            insert(DagRun.__table__).values(
                dag_id=DAG_ID, run_id=RUN_ID, run_type="manual", run_after=now, state="running"
            )
        )
        run_pk = session.scalar(DagRun.__table__.select().with_only_columns(DagRun.id))
        session.execute(
            insert(TaskInstance.__table__),
            [
                {
                    "id": uuid.uuid4(),
                    "task_id": TASK_ID,
                    "dag_id": DAG_ID,
                    "run_id": RUN_ID,
                    "map_index": map_index,
                    "state": "failed",
                    "try_number": 1,
                    "max_tries": 3,
                    "pool": "default_pool",
                    "pool_slots": 1,
                }
                for map_index in range(count)
            ],
        )
        rows = [(map_index, values, xcoms) for map_index, (values, xcoms) in enumerate(stored)]
        keys = {"dag_run_id": run_pk, "dag_id": DAG_ID, "run_id": RUN_ID, "task_id": TASK_ID}
        session.execute(
            insert(TaskStateStoreModel.__table__),
            [
                {**keys, "map_index": index, "key": key, "value": json.dumps(value)}
                for index, values, _ in rows
                for key, value in values.items()
            ],
        )
        session.execute(
            insert(XComModel.__table__),
            [
                {**keys, "map_index": index, "key": key, "value": value, "timestamp": now}
                for index, _, xcoms in rows
                for key, value in xcoms.items()
            ],
        )


def timed(render: Callable[[], Any], rounds: int) -> tuple[float, list[float], Any]:
    """The first (cold) time, the warm times, and the last response."""
    started = time.perf_counter()
    answer = render()
    cold = time.perf_counter() - started
    warm = []
    for _ in range(rounds):
        started = time.perf_counter()
        answer = render()
        warm.append(time.perf_counter() - started)
    return cold, warm, answer


def replay_count() -> int:
    """Fixtures replayed so far (-1 for a release that kept no count)."""
    try:
        from airflow_retrywindow.records.stored_fixture import replay_count as count
    except ImportError:
        return -1
    return count()


def verdict(ok: bool, text: str) -> bool:
    print(f"{'PASS' if ok else 'FAIL'}  {text}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--map-indexes", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="rw-view-bench-") as folder:
        return measure(Path(folder), args.map_indexes, args.rounds)


def measure(home: Path, map_indexes: int, rounds: int) -> int:
    """Build the run in ``home``, measure both views, and print the verdicts."""
    migrate(home)
    os.environ.update(environment(home))
    sys.path.insert(0, str(ROOT))
    started = time.perf_counter()
    write_run(map_indexes)
    print(f"wrote {map_indexes:,} refused map indexes in {time.perf_counter() - started:.1f} s")

    from airflow.utils.session import create_session
    from starlette.requests import Request

    from airflow_retrywindow.plugins import app

    request = Request({"type": "http", "root_path": "/retry-window", "headers": []})

    def run_view() -> Any:
        with create_session() as session:
            return app.run_view(dag_id=DAG_ID, run_id=RUN_ID, request=request, session=session)

    def task_view() -> Any:
        with create_session() as session:
            return app.task_view(
                dag_id=DAG_ID,
                run_id=RUN_ID,
                task_id=TASK_ID,
                request=request,
                session=session,
                map_index=str(map_indexes // 2),
            )

    replays = replay_count()
    cold, warm, page = timed(run_view, rounds)
    replayed = replay_count() - replays
    size = len(page.body)
    median = statistics.median(warm)
    print(f"run view of {map_indexes:,} refused map indexes")
    print(f"  cold {cold * 1000:7.1f} ms ({replayed:,} distinct fixtures replayed)")
    print(f"  warm {median * 1000:7.1f} ms median of {rounds}")
    print(f"  page {size / 1024:7.1f} KiB")
    if os.environ.get("RUN_VIEW_PAGE"):  # to look at what was measured
        Path(os.environ["RUN_VIEW_PAGE"]).write_bytes(page.body)
    task_cold, task_warm, task_page = timed(task_view, rounds)
    task_median = statistics.median(task_warm)
    print(f"one map index's view: cold {task_cold * 1000:.1f} ms, warm {task_median * 1000:.1f} ms")
    print(f"  page {len(task_page.body) / 1024:.1f} KiB")

    results = [
        verdict(page.status_code == 200 and task_page.status_code == 200, "both views answer 200"),
        verdict(
            median < RUN_VIEW_SECONDS,
            f"run view {median:.3f} s median warm (target < {RUN_VIEW_SECONDS} s)",
        ),
        verdict(
            size < RUN_PAGE_BYTES,
            f"run page {size / 2**20:.3f} MiB (target < {RUN_PAGE_BYTES / 2**20:g} MiB)",
        ),
        verdict(
            task_median < TASK_VIEW_SECONDS,
            f"map index view {task_median:.3f} s median warm (target < {TASK_VIEW_SECONDS} s)",
        ),
    ]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
