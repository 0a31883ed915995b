"""Metrics from a real DAG run arrive at a real StatsD listener.

A native Airflow (API server, scheduler with the LocalExecutor, DAG processor)
on SQLite is configured with ``[metrics] statsd_on`` pointing at a UDP socket on
a free loopback port. Task processes set up Airflow's ``Stats`` from those
settings themselves; the provider only calls it. One run of ``rw_metrics``
(see its docstring) decides in the policy, the retry-start check, a gate and a
sensor, and fails one gate. The test compares every ``retry_window`` line the
listener received with the lines those decisions must give: plain StatsD, so
no tags, and the slack gauges equal to the slack in the stored evidence and in
the decision records. Before Airflow 3.3 (no retry policy) the gate's, the sensor's
and the failed gate's arrive: every minor's session runs it (noxfile.py).
"""

from __future__ import annotations

import collections
import json
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devstack.stack import AirflowStack, free_port, sqlite_stack

pytestmark = [pytest.mark.airflow, pytest.mark.slow(minutes=1.1)]

DAGS = Path(__file__).with_name("dags")
DAG_ID = "rw_metrics"
PREFIX = "rwmetrics"
OURS = f"{PREFIX}.retry_window."
SERVICES = ("api-server", "scheduler", "dag-processor")


class StatsdListener:
    """A UDP socket that keeps every line it receives, read by a background thread.

    Airflow's own services send their metrics here too, all the time: reading
    as they arrive keeps the socket's buffer from overflowing.
    """

    def __init__(self, port: int) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind(("127.0.0.1", port))
        self.socket.settimeout(0.2)
        self.received: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.socket.recv(65535)
            except TimeoutError:
                continue
            with self._lock:
                self.received.extend(data.decode(errors="replace").splitlines())

    def lines(self, prefix: str) -> list[str]:
        """The lines received so far that start with ``prefix``."""
        with self._lock:
            return [line for line in self.received if line.startswith(prefix)]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.socket.close()


@pytest.fixture(scope="module")
def listener() -> Iterator[StatsdListener]:
    # StatsD is UDP; free_port probes TCP, and a port free for one is almost always free for both
    found = StatsdListener(free_port())
    try:
        yield found
    finally:
        found.close()


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, listener: StatsdListener
) -> Iterator[AirflowStack]:
    home = tmp_path_factory.mktemp("metrics")
    dags = home / "dags"
    shutil.copytree(DAGS, dags, ignore=shutil.ignore_patterns("__pycache__"))
    settings = {
        "AIRFLOW__METRICS__STATSD_ON": "True",
        "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
        "AIRFLOW__METRICS__STATSD_PORT": str(listener.socket.getsockname()[1]),
        "AIRFLOW__METRICS__STATSD_PREFIX": PREFIX,
        # The killed try's retry-start check reads the API server's clock within
        # clock_read_limit, (max_failed_heartbeats - 1) x min_heartbeat_interval: with
        # Airflow's three, 10 s. In CI's first minutes, with every stack booting, the server
        # answered neither of two reads in 7.7 s and the check refused the retry as
        # undecidable (fail closed). Six make it 25 s, as on the shared stack of the chains.
        "AIRFLOW__WORKERS__MAX_FAILED_HEARTBEATS": "6",
    }
    with sqlite_stack(home, SERVICES, [DAG_ID], dags_folder=dags, extra_env=settings) as running:
        yield running


def _json(value: Any) -> Any:
    """A JSON column's value, decoded however many times it was encoded."""
    while isinstance(value, (str, bytes)):
        value = json.loads(value)
    return value


def _policy_slack(stack: AirflowStack, run_id: str, task_id: str) -> int:
    """deadline - estimated finish of the policy's latest decision, from its evidence."""
    rows = stack.rows(
        "select value from task_state_store where dag_id=:d and run_id=:r and task_id=:t"
        " and key='retry_window.evidence'",
        d=DAG_ID,
        r=run_id,
        t=task_id,
    )
    assert rows, f"no evidence for {task_id}\n{stack.log_tails()}"
    latest = _json(rows[0][0])["latest"]
    assert latest["result"]["tasks"][0]["decision"] == "deadline-infeasible"
    return int(latest["fixture"]["deadline"]) - int(latest["result"]["tasks"][0]["estimatedFinish"])


def _record(stack: AirflowStack, run_id: str, task_id: str) -> dict[str, Any]:
    rows = stack.rows(
        "select value from xcom where dag_id=:d and run_id=:r and task_id=:t"
        " and key='return_value'",
        d=DAG_ID,
        r=run_id,
        t=task_id,
    )
    assert rows, f"no decision record from {task_id}\n{stack.log_tails()}"
    return dict(_json(rows[0][0]))


def _gauge(slack: int | None) -> list[str]:
    """The lines a StatsD client sends to set a gauge to ``slack``; none without a slack."""
    if slack is None:
        return []
    name = f"{OURS}slack_seconds"
    # a signed value is a change in StatsD: a negative one is sent as 0, then the change
    return [f"{name}:0|g", f"{name}:{slack}|g"] if slack < 0 else [f"{name}:{slack}|g"]


def _expected(
    decision: str, gate_slack: int | None, sensor_slack: int | None, policy_slack: int | None
) -> collections.Counter[str]:
    """The lines of one run: the gate's and the sensor's ``decision`` about ``load``, and
    from Airflow 3.3 the retry policy's and the retry-start check's (``policy_slack``)."""
    word = decision.replace("-", "_")
    lines = [
        # gate: the decision about load, its pool and the budget
        f"{OURS}decision.{word}:1|c",
        f"{OURS}refused:1|c",
        *_gauge(gate_slack),
        f"{OURS}capacity.fits_now:1|c",
        f"{OURS}budget.within_budget:1|c",
        # hold: the sensor's decision about load and its pool
        f"{OURS}decision.{word}:1|c",
        f"{OURS}refused:1|c",
        *_gauge(sensor_slack),
        f"{OURS}capacity.fits_now:1|c",
        # broken_gate: could not read the run
        f"{OURS}gate_error:1|c",
    ]
    if policy_slack is not None:
        lines += [
            # load: the retry policy's refusal
            f"{OURS}failed_attempt.retryable:1|c",
            f"{OURS}decision.deadline_infeasible:1|c",
            f"{OURS}refused:1|c",
            *_gauge(policy_slack),
            # killed: try 2 refused by the retry-start check
            f"{OURS}failed_attempt.unknown:1|c",
            f"{OURS}decision.reconcile_remote:1|c",
            f"{OURS}refused:1|c",
            f"{OURS}retry_start.refused:1|c",
        ]
    return collections.Counter(lines)


def test_decisions_of_a_dag_run_arrive_at_statsd(
    stack: AirflowStack, listener: StatsdListener, retry_policies: bool
) -> None:
    run_id = stack.trigger(DAG_ID, conf={"deadline_in": 60}, logical_date="2026-11-01")
    assert stack.wait_for_run(DAG_ID, run_id, timeout=180) == "failed"
    states = {task: state for task, (state, _) in stack.task_states(DAG_ID, run_id).items()}
    ran = {
        "load": "failed",
        "gate": "success",
        "hold": "success",
        "reload": "skipped",
        "broken_gate": "failed",
    }
    assert states == ({**ran, "killed": "failed"} if retry_policies else ran), stack.log_tails()

    gate, hold = _record(stack, run_id, "gate"), _record(stack, run_id, "hold")
    # with a policy load failed once, refused; without one it had no retry left
    decision = "deadline-infeasible" if retry_policies else "attempts-exhausted"
    assert [row["decision"] for row in gate["decisions"] + hold["decisions"]] == [decision] * 2
    expected = _expected(
        decision,
        gate["decisions"][0].get("slackSeconds"),
        hold["decisions"][0].get("slackSeconds"),
        _policy_slack(stack, run_id, "load") if retry_policies else None,
    )
    # UDP on loopback is quick, but the reading thread may be a moment behind
    deadline = time.monotonic() + 10
    while collections.Counter(listener.lines(OURS)) != expected and time.monotonic() < deadline:
        time.sleep(0.2)
    assert collections.Counter(listener.lines(OURS)) == expected
    # the same listener hears Airflow's own metrics: ours travel the deployment's path
    assert listener.lines(f"{PREFIX}.scheduler_heartbeat:")
