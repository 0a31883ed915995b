"""The retry-start check holds a retry in the triggerer, or where none runs, in the worker.

The check runs as the cluster policy installs it, before the task's code, against a
stand-in of Airflow's REST API (the pool's listings and the health check) reached
through the provider's connection, as a deployment configures it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pendulum
import pytest
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowRescheduleException, TaskDeferred

from airflow_retrywindow import Deadline, RetryWindowPolicy
from airflow_retrywindow.dependency.check import PROTECTED_PROBE, Hold
from airflow_retrywindow.dependency.held_try import RESUME_METHOD
from airflow_retrywindow.hooks.connection_type import CONN_TYPE
from airflow_retrywindow.policies import lost_try
from airflow_retrywindow.policies.cluster_policy import task_policy
from airflow_retrywindow.records.dependency_state import KEY, DependencyRecord
from airflow_retrywindow.triggers.dependency_hold import DependencyHoldTrigger
from tests.hooks.fake_api import FakeAirflowApi, Served, serve, task_instance
from tests.policy.resumable_jobs import Store
from tests.policy.test_lost_try import EventLog, _recent_mismatch, handed_over

POOL = "positions_api"
DAG_ID, RUN_ID = "rw_hold", "manual__2026-03-01"
START = pendulum.datetime(2026, 3, 1, tz="UTC")


class TaskInstance:
    """What the check reads of Airflow's runtime task instance."""

    def __init__(self, try_number: int, max_tries: int) -> None:
        self.dag_id, self.run_id, self.task_id, self.map_index = DAG_ID, RUN_ID, "load", -1
        self.try_number, self.max_tries = try_number, max_tries
        self.xcom: dict[str, Any] = {}
        self.stats_tags: dict[str, str] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value


class ProbeFails(ConnectionError):
    """The dependency is still down when the probe asks it."""


def _load() -> None:
    raise ProbeFails("positions API answered 503")


@pytest.fixture
def lost(monkeypatch: pytest.MonkeyPatch) -> EventLog:
    """Airflow's event log as the check reads it: what the scheduler's race left."""
    log = EventLog()
    monkeypatch.setattr(lost_try, "read_mismatches", log.read)
    return log


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    yield from serve(FakeAirflowApi())


@pytest.fixture
def api(server: Served, monkeypatch: pytest.MonkeyPatch) -> FakeAirflowApi:
    """The REST API stand-in, reached through the provider's default connection."""
    conn = {"conn_type": CONN_TYPE, "host": server.url, "login": "reader", "password": "reader-pw"}
    monkeypatch.setenv("AIRFLOW_CONN_AIRFLOW_API_DEFAULT", json.dumps(conn))
    return server.api


def in_retry(count: int, *, ours: bool = False) -> list[dict[str, Any]]:
    """``count`` task instances of the pool whose retries are held in the triggerer."""
    rows = [task_instance(f"feed_{n}", try_number=2) for n in range(count)]
    if ours:
        rows.insert(0, task_instance("load", dag_id=DAG_ID, run_id=RUN_ID, try_number=2))
    for row in rows:
        row.update(pool=POOL, state="deferred", end_date=None)
    return rows


def operator(*, retries: int = 3) -> PythonOperator:
    with DAG(DAG_ID, schedule=None, start_date=START):
        task = PythonOperator(
            task_id="load",
            python_callable=_load,
            pool=POOL,
            retries=retries,
            retry_delay=timedelta(seconds=15),
            retry_policy=RetryWindowPolicy(
                deadline=Deadline.after_data_interval_start(hours=6),
                duration=timedelta(minutes=2),
                validation=timedelta(minutes=1),
                safe_repeat=True,
                retryable=[ProbeFails],
            ),
        )
    task_policy(task)
    return task


def start(task: PythonOperator, store: Store, *, try_number: int = 2) -> dict[str, Any]:
    """The try's context; its start check runs on it (raising what it hands Airflow)."""
    now = pendulum.now("UTC")
    context = {
        "task": task,
        "ti": TaskInstance(try_number, task.retries),
        "task_state_store": store,
        "data_interval_start": now.subtract(minutes=5),
        "data_interval_end": now,
    }
    task._pre_execute_hook(context)
    return context


def decided_store() -> Store:
    """The store of a task instance whose policy handed try 1 back to Airflow."""
    store = Store()
    store.set("retry_window.evidence", handed_over(1))
    return store


def deferred_in_an_outage(api: FakeAirflowApi) -> tuple[PythonOperator, Store]:
    """A gated task whose try 2 was held in the triggerer: twelve of its pool failing."""
    api.task_instances = in_retry(12)
    task, store = operator(), decided_store()
    with pytest.raises(TaskDeferred):
        start(task, store)
    return task, store


def kept(store: Store) -> DependencyRecord:
    found = DependencyRecord.of(store.get(KEY))
    assert found is not None
    return found


def test_a_held_retry_is_deferred_to_the_triggerer_with_its_resume_method(
    api: FakeAirflowApi,
) -> None:
    api.task_instances = in_retry(12)
    task, store = operator(), decided_store()
    with pytest.raises(TaskDeferred) as deferred:
        start(task, store)
    trigger = deferred.value.trigger
    assert isinstance(trigger, DependencyHoldTrigger)
    assert deferred.value.method_name == RESUME_METHOD
    assert callable(getattr(task, RESUME_METHOD))
    record = kept(store)
    assert (record.action, record.state, record.waits_in) == ("hold", "open", "triggerer")
    # woken at its latest start at the latest, an hour after the hold at most, and
    # Airflow gives the trigger its grace beyond that before it resumes the try itself
    assert record.hold_until is not None
    assert record.hold_until <= pendulum.now("UTC").add(hours=1, seconds=1)
    assert deferred.value.timeout is not None
    assert deferred.value.timeout > record.hold_until - pendulum.now("UTC")
    # Airflow hands the deferral to its supervisor as msgpack: plain types only
    assert type(deferred.value.timeout) is timedelta
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_retrywindow.triggers.dependency_hold.DependencyHoldTrigger"
    assert kwargs["pool"] == POOL and kwargs["retry"]["protected"] is True
    # three counts, each a page of at most 100 rows, then the health check
    listings = [r for r in api.received if r.path.endswith("/taskInstances")]
    assert len(listings) == 3
    assert all(int(r.query["limit"][0]) <= 100 for r in listings)
    assert api.paths()[-1] == "/api/v2/monitor/health"


def test_where_no_triggerer_runs_the_held_retry_is_rescheduled_and_says_so(
    api: FakeAirflowApi,
) -> None:
    api.task_instances = in_retry(12)
    api.triggerer_status = "unhealthy"
    store = decided_store()
    with pytest.raises(AirflowRescheduleException):
        start(operator(), store)
    record = kept(store)
    assert (record.action, record.waits_in) == ("hold", "worker")
    assert ("Waits", "rescheduled, a worker at each check: no triggerer runs, or none woke "
            "it in time") in record.facts(str)  # fmt: skip


def test_a_held_try_woken_by_the_triggerer_is_decided_again_and_runs_the_task(
    api: FakeAirflowApi,
) -> None:
    task, store = deferred_in_an_outage(api)
    api.task_instances = in_retry(2)  # the pool closed while it waited
    context = start(task, store)  # resumed: decided again, and let run
    assert kept(store).action == "run"
    with pytest.raises(ProbeFails):  # the resume runs the task's own code
        getattr(task, RESUME_METHOD)(context, event={"action": "run"})


def test_a_deferral_no_triggerer_woke_starts_the_try_anew_rather_than_failing_it(
    api: FakeAirflowApi,
) -> None:
    task, store = deferred_in_an_outage(api)
    # Airflow resumed the try only past the hold's end and its grace: its own timeout
    lapsed = kept(store).as_dict()
    lapsed["holdUntil"] = pendulum.now("UTC").subtract(minutes=10).isoformat()
    store.set(KEY, lapsed)
    api.task_instances = in_retry(2)
    with pytest.raises(AirflowRescheduleException):
        start(task, store)


def test_a_probe_on_its_last_attempt_that_fails_is_held_again_not_spent(
    api: FakeAirflowApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "AIRFLOW__RETRY_WINDOW__DEPENDENCY_POOLS", json.dumps({POOL: {"min_probes": 100}})
    )
    api.task_instances = in_retry(12, ours=True)
    task = operator(retries=1)  # try 2 is the last
    store = decided_store()
    with pytest.raises(TaskDeferred):
        start(task, store)
    context = start(task, store)  # woken for its probe
    assert kept(store).action == "probe"
    assert isinstance(context[PROTECTED_PROBE], Hold)
    with pytest.raises(TaskDeferred) as again:
        getattr(task, RESUME_METHOD)(context, event={"action": "probe"})
    assert isinstance(again.value.trigger, DependencyHoldTrigger)
    record = kept(store)
    assert (record.action, record.waits_in, record.try_number) == ("hold", "triggerer", 2)
    assert "its last attempt not spent" in record.reason and "503" in record.reason


def test_a_retry_nobody_decided_that_the_model_lets_run_meets_its_pool_too(
    api: FakeAirflowApi, lost: EventLog
) -> None:
    """Try 1 deferred and Airflow's scheduler failed it by its race: try 2 starts with no
    decision of ours, the model lets it run, and its pool holds it like any retry."""
    api.task_instances = in_retry(12)
    lost.entries.append(_recent_mismatch(1))
    store = Store()
    with pytest.raises(TaskDeferred):
        start(operator(), store)
    latest = store.get("retry_window.evidence")["latest"]
    assert (latest["tryNumber"], latest["action"]) == (2, "run")  # the model let it run
    record = kept(store)
    assert (record.action, record.decision, record.try_number) == ("hold", "dependency-held", 2)
    # resumed from its hold (its decision already says it started): the pool decides again
    api.task_instances = in_retry(2)
    start(operator(), store)
    assert kept(store).action == "run"


_IMPORTS_OF_A_START = """
import json, os, sys
os.environ["AIRFLOW_CONN_AIRFLOW_API_DEFAULT"] = json.dumps(
    {"conn_type": "retrywindow_airflow_api", "host": "http://127.0.0.1:9", "login": "r"}
)
from tests.dependency.test_start_hold import Store, decided_store, operator, start
store = decided_store() if int(sys.argv[1]) > 1 else Store()
try:
    start(operator(), store, try_number=int(sys.argv[1]))
except Exception as error:  # a retry whose pool cannot be read is held: it raises
    print(type(error).__name__, file=sys.stderr)
print("airflow_client" in sys.modules)
"""


@pytest.mark.parametrize("try_number", [1, 2])
def test_no_start_imports_a_generated_rest_client(try_number: int) -> None:
    """A generated REST client imports every API and model of Airflow's: about a second of
    a core in every task process, which a fleet's retries each paid to read their pool.
    A retry reads its pool (here refused: nothing listens) with urllib3 alone."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", _IMPORTS_OF_A_START, str(try_number)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "False", done.stderr
    # the retry did read its pool (and was held when the read failed); a first try did not
    assert ("TaskDeferred" in done.stderr or "AirflowRescheduleException" in done.stderr) == (
        try_number > 1
    ), done.stderr
