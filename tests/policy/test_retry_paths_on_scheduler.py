"""Every way a try of a gated task can end, on a real scheduler with the LocalExecutor.

The retry policy runs in the task process. When that process is killed, or the
scheduler fails the try because its heartbeat stopped, Airflow schedules the
retry without asking the policy; the retry-start check must then refuse the next
try before the task's code runs. An execution timeout, an ordinary retryable
failure and a failure whose message holds a registered secret go through the
policy itself.

One stack (API server, scheduler, DAG processor) serves the whole module, with
a heartbeat timeout of 15 s instead of 300 s. Every run is triggered as soon as
the stack is up, so the runs overlap and each test waits for its own.
"""

from __future__ import annotations

import json
import secrets
import shutil
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pendulum
import psutil
import pytest

from devstack.stack import AirflowStack, sqlite_stack

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

DAGS = Path(__file__).with_name("scheduler_dags")
SERVICES = ("api-server", "scheduler", "dag-processor")
HOUR = 3600
#: the scheduler fails a running try that has not heartbeaten for this long (default 300 s)
HEARTBEAT_TIMEOUT = 15
#: the secret the leaking task registers with Airflow's masker; reaches the task
#: through the services' environment, so only a leak can put it in the metadata DB
SECRET = secrets.token_hex(24)
SECRET_ENV = "RW_SCHEDULER_PATHS_SECRET"
EVIDENCE_KEY = "retry_window.evidence"
#: dag id -> the task id it runs
TASKS = {
    "rw_sched_sigkill": "killed",
    "rw_sched_heartbeat": "lost",
    "rw_sched_exec_timeout": "slow",
    "rw_sched_retry": "flaky",
    "rw_sched_secret": "leaky",
}
RUN_TIMEOUT = 150


@dataclass(frozen=True)
class Run:
    """One triggered DAG run and the files its task writes."""

    dag_id: str
    run_id: str
    counter: Path
    pids: Path

    @property
    def task_id(self) -> str:
        return TASKS[self.dag_id]

    def body_runs(self) -> list[str]:
        """One line per time the task's own code started."""
        return self.counter.read_text().splitlines() if self.counter.exists() else []


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowStack]:
    """A SQLite stack with a short heartbeat timeout and the secret in its environment."""
    home = tmp_path_factory.mktemp("scheduler-paths")
    dags = home / "dags"
    shutil.copytree(DAGS, dags, ignore=shutil.ignore_patterns("__pycache__"))
    settings = {
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT),
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "1",
        # healthy supervisors heartbeat every 2 s (default 5), far inside the timeout
        "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "2",
        SECRET_ENV: SECRET,
    }
    with sqlite_stack(home, SERVICES, list(TASKS), dags_folder=dags, extra_env=settings) as running:
        yield running


@pytest.fixture(scope="module")
def runs(stack: AirflowStack) -> dict[str, Run]:
    """One run of every DAG, all triggered before any test waits for one."""
    files = stack.home / "task-files"
    files.mkdir()
    started = {}
    for dag_id in TASKS:
        counter, pids = files / f"{dag_id}.runs", files / f"{dag_id}.pids"
        conf = {"deadline_in": HOUR, "counter": str(counter), "pids": str(pids)}
        run_id = stack.trigger(dag_id, conf=conf, logical_date="2026-11-01")
        started[dag_id] = Run(dag_id, run_id, counter, pids)
    return started


def finished(stack: AirflowStack, run: Run) -> str:
    """Wait for ``run`` to end; its state."""
    return stack.wait_for_run(run.dag_id, run.run_id, timeout=RUN_TIMEOUT)


def evidence(stack: AirflowStack, run: Run) -> dict[str, Any]:
    """The gate's decisions for the run's task, from the task state store."""
    rows = stack.rows(
        "select value from task_state_store"
        " where dag_id=:d and run_id=:r and task_id=:t and key=:k",
        d=run.dag_id,
        r=run.run_id,
        t=run.task_id,
        k=EVIDENCE_KEY,
    )
    assert rows, f"no {EVIDENCE_KEY} for {run.dag_id}.{run.task_id}\n{stack.log_tails()}"
    return dict(json.loads(rows[0][0]))


def task_instance(stack: AirflowStack, run: Run) -> tuple[str, int]:
    """The task instance's (state, try number)."""
    return stack.task_states(run.dag_id, run.run_id)[run.task_id]


def history(stack: AirflowStack, run: Run) -> list[tuple[Any, ...]]:
    """Earlier tries: (try number, state, start, end, retry_delay_override, retry_reason)."""
    return stack.rows(
        "select try_number, state, start_date, end_date, retry_delay_override, retry_reason"
        " from task_instance_history where dag_id=:d and run_id=:r and task_id=:t"
        " order by try_number",
        d=run.dag_id,
        r=run.run_id,
        t=run.task_id,
    )


def heartbeat_timeouts(stack: AirflowStack, run: Run) -> list[int]:
    """Try numbers the scheduler failed for a missing heartbeat (its audit log)."""
    rows = stack.rows(
        "select try_number from log where event='heartbeat timeout'"
        " and dag_id=:d and run_id=:r and task_id=:t",
        d=run.dag_id,
        r=run.run_id,
        t=run.task_id,
    )
    return [int(row[0]) for row in rows]


def assert_refused_at_retry_start(stack: AirflowStack, run: Run) -> None:
    """The contract for a retry Airflow scheduled without the policy: try 2 refused."""
    lines = run.body_runs()
    assert len(lines) == 1 and lines[0].startswith(f"{run.task_id} try 1 "), lines
    assert task_instance(stack, run) == ("failed", 2)
    stored = evidence(stack, run)
    # try 1 ended without a decision; the only one is the refusal of try 2
    assert [d["tryNumber"] for d in stored["decisions"]] == [2]
    latest = stored["latest"]
    assert latest["tryNumber"] == 2
    assert latest["action"] == "fail"
    assert latest["failure"] == "unknown"
    assert latest["check"] == "retry-start"
    assert latest["result"]["tasks"][0]["decision"] == "reconcile-remote"
    assert latest["reason"].startswith("reconcile-remote: ")
    assert "try 1 ended without a retry decision" in latest["reason"]
    # the window counts the lost attempt: the model saw attempt 1 of 3 end unknown
    assert latest["fixture"]["tasks"][0]["attempts"] == 1
    assert latest["fixture"]["policy"]["maxAttempts"] == 3


def test_sigkilled_task_process_is_refused_at_the_next_try(
    stack: AirflowStack, runs: dict[str, Run]
) -> None:
    run = runs["rw_sched_sigkill"]
    assert finished(stack, run) == "failed"
    assert_refused_at_retry_start(stack, run)
    # the supervisor saw the exit and reported it: no heartbeat timeout was needed
    assert heartbeat_timeouts(stack, run) == []


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_heartbeat_timeout_is_refused_at_the_next_try(
    stack: AirflowStack, runs: dict[str, Run]
) -> None:
    run = runs["rw_sched_heartbeat"]
    assert finished(stack, run) == "failed"
    killed = json.loads(run.pids.read_text())
    # LocalExecutor 3.3: the task process is forked by the executor's worker process,
    # which is its supervisor (it heartbeats and reports the end); both were killed
    assert "airflow worker -- LocalExecutor" in killed["supervisor_cmdline"]
    assert killed["task_pgid"] == killed["task"]
    assert _gone(killed["task"]) and _gone(killed["supervisor"])
    # nobody reported try 1's end: the scheduler failed it for its missing heartbeat
    assert heartbeat_timeouts(stack, run) == [1]
    assert_refused_at_retry_start(stack, run)


def test_execution_timeout_is_an_unknown_outcome(stack: AirflowStack, runs: dict[str, Run]) -> None:
    run = runs["rw_sched_exec_timeout"]
    assert finished(stack, run) == "failed"
    assert len(run.body_runs()) == 1
    assert task_instance(stack, run) == ("failed", 1)
    stored = evidence(stack, run)
    assert [d["tryNumber"] for d in stored["decisions"]] == [1]
    latest = stored["latest"]
    assert (latest["tryNumber"], latest["action"]) == (1, "fail")
    assert latest["failure"] == "unknown"
    assert latest["check"] == "retry-policy"
    assert latest["result"]["tasks"][0]["decision"] == "reconcile-remote"
    assert "AirflowTaskTimeout" in latest["reason"]


def test_retryable_failure_retries_after_the_model_delay(
    stack: AirflowStack, runs: dict[str, Run]
) -> None:
    run = runs["rw_sched_retry"]
    assert finished(stack, run) == "success"
    assert [line.split()[:3] for line in run.body_runs()] == [
        ["flaky", "try", "1"],
        ["flaky", "try", "2"],
        ["flaky", "try", "3"],
    ]
    assert task_instance(stack, run) == ("success", 3)
    stored = evidence(stack, run)
    decisions = stored["decisions"]
    # both retries were the policy's; the retry-start check let them through
    assert [d["tryNumber"] for d in decisions] == [1, 2]
    assert [d["check"] for d in decisions] == ["retry-policy", "retry-policy"]
    assert [d["action"] for d in decisions] == ["retry", "retry"]
    assert [d["result"]["tasks"][0]["decision"] for d in decisions] == [
        "wait-backoff",
        "wait-backoff",
    ]
    model_delays = [float(d["result"]["tasks"][0]["backoff"]) for d in decisions]
    assert model_delays == [1.0, 2.0]  # retry_delay 1 s, then doubled
    earlier = history(stack, run)
    assert [row[0] for row in earlier] == [1, 2]
    assert [row[4] for row in earlier] == model_delays
    current = stack.rows(
        "select start_date from task_instance where dag_id=:d and run_id=:r and task_id=:t",
        d=run.dag_id,
        r=run.run_id,
        t=run.task_id,
    )
    starts = [pendulum.parse(row[2]) for row in earlier] + [pendulum.parse(current[0][0])]
    ends = [pendulum.parse(row[3]) for row in earlier]
    for end, next_start, delay in zip(ends, starts[1:], model_delays, strict=True):
        assert (next_start - end).total_seconds() >= delay  # type: ignore[operator]


def _holds(value: object, needle: str) -> bool:
    if isinstance(value, str):
        return needle in value
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        if needle.encode() in raw:
            return True
        try:
            return needle.encode() in zlib.decompress(raw)
        except zlib.error:
            return False
    return False


def test_a_registered_secret_is_stored_nowhere(stack: AirflowStack, runs: dict[str, Run]) -> None:
    run = runs["rw_sched_secret"]
    assert finished(stack, run) == "failed"
    # nothing may still be writing when the DB is read
    for other in runs.values():
        finished(stack, other)
    assert len(run.body_runs()) == 2
    assert task_instance(stack, run) == ("failed", 2)
    masked = "GET https://api.example.test/v1?api_key=*** failed"

    stored = evidence(stack, run)
    decisions = stored["decisions"]
    assert [d["result"]["tasks"][0]["decision"] for d in decisions] == [
        "wait-backoff",
        "attempts-exhausted",
    ]
    assert all(masked in d["reason"] for d in decisions)
    earlier = history(stack, run)
    assert [row[0] for row in earlier] == [1]
    retry_reason = earlier[0][5]
    assert retry_reason and retry_reason.startswith("wait-backoff: ") and masked in retry_reason

    tables = [row[0] for row in stack.rows("select name from sqlite_master where type='table'")]
    leaks, masked_in = [], set()
    for table in tables:
        for row in stack.rows(f'select * from "{table}"'):
            for column, value in row._mapping.items():
                if _holds(value, SECRET):
                    leaks.append(f"{table}.{column}: {str(value)[:300]}")
                if _holds(value, masked):
                    masked_in.add(table)
    assert leaks == []
    # the scan read the places the failure's text went to, masked
    assert {"task_state_store", "task_instance_history", "xcom"} <= masked_in
