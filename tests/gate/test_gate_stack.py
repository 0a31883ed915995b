"""The gate and the sensor on a full Airflow: API server, scheduler, DAG processor, triggerer.

A person clears the guarded work; the gate decides the repeat from the real
task instances and the evidence the retry policy left, map index by map index
for a mapped load and a load in a mapped task group. A deferrable sensor waits
out a backoff in the triggerer, holding no worker slot, then lets the retry run. On the
stack it shares with the modules configured alike (:mod:`tests.shared_stack`), beside the
mapped load its DAG shares with the ``dags test`` DAG ``rw_gate_mapped``.

One clock: the gate and the retry policy run in a process whose clock Debian's
``faketime`` sets ahead of or behind this API server's, and measure the skew
against it: beyond the tolerance they refuse, naming the clock and the amount;
within it they keep the stricter decision of the two clocks. Where that decision
depends on the instant it is taken at (inside a backoff on one clock, past it on the
other), both clocks are stopped at that instant: the worker's by ``faketime``, the
server's ``Date`` by a proxy (:mod:`tests.gate.frozen_server_clock`), so how long the
reads take on a loaded machine does not move it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from typing import Any

import pendulum
import pytest

from devstack.stack import AirflowStack
from tests.gate.frozen_server_clock import server_clock_stopped_at
from tests.shared_stack import SharedStacks, for_module

pytestmark = [pytest.mark.airflow, pytest.mark.slow(minutes=5)]


@pytest.fixture(scope="module")
def stack(shared_stacks: SharedStacks) -> AirflowStack:
    return for_module(
        shared_stacks, __file__, ["rw_gate_clear", "rw_gate_defer", "rw_gate_mapped_clear"]
    )


def _record(stack: AirflowStack, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
    rows = stack.rows(
        "select value from xcom where dag_id=:d and run_id=:r and task_id=:t "
        "and key='return_value'",
        d=dag_id,
        r=run_id,
        t=task_id,
    )
    assert rows, f"{task_id} pushed no decision record"
    value = rows[0][0]
    decoded = json.loads(value) if isinstance(value, (str, bytes)) else value
    return json.loads(decoded) if isinstance(decoded, str) else decoded  # type: ignore[no-any-return]


def _when(value: object) -> pendulum.DateTime:
    parsed = pendulum.parse(str(value), tz="UTC")
    assert isinstance(parsed, pendulum.DateTime)
    return parsed


def _answer_type(url: str) -> tuple[int, str]:
    """The status and the media type of a GET of ``url``."""
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return int(answer.status), answer.headers.get_content_type()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get_content_type()


def test_the_execution_api_is_served_apart_from_the_rest_api(stack: AirflowStack) -> None:
    """On SQLite one API server serving both stood still for the lock timeout
    (:meth:`AirflowStack.start` says why); the tasks reach the execution API's own."""
    health = (200, "application/json")
    assert _answer_type(f"{stack.url}/api/v2/monitor/health") == health
    assert _answer_type(f"{stack.execution_url}/execution/health") == health
    # the UI answers every path it does not know with its page
    assert _answer_type(f"{stack.url}/execution/health")[1] == "text/html"
    assert _answer_type(f"{stack.execution_url}/api/v2/monitor/health")[0] == 404
    told = stack.env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"]
    assert told == f"{stack.execution_url}/execution/"


def test_a_cleared_repeat_waits_for_reconciliation(stack: AirflowStack) -> None:
    run_id = stack.trigger("rw_gate_clear", conf={}, logical_date="2026-12-01")
    assert stack.wait_for_run("rw_gate_clear", run_id, timeout=120) == "failed"
    first = _record(stack, "rw_gate_clear", run_id, "gate")
    assert first["decisions"][0]["decision"] == "not-attempted"
    assert stack.task_states("rw_gate_clear", run_id)["load"] == ("failed", 1)

    # "just re-run the load": the outcome of try 1 is unknown, so the gate holds it
    stack.clear("rw_gate_clear", run_id, ["load"], upstream=True)
    stack.wait_for_clear("rw_gate_clear", run_id, cleared=1, timeout=120)
    states = stack.task_states("rw_gate_clear", run_id)
    assert states["gate"] == ("success", 2)
    assert states["load"] == ("skipped", 1)  # never started again
    held = _record(stack, "rw_gate_clear", run_id, "gate")
    row = held["decisions"][0]
    assert row["decision"] == "reconcile-remote"
    assert row["state"] == "unknown"
    assert "retry_window.failure.unknown" in row["classification"]
    assert (row["attempts"], row["maxAttempts"], row["tryNumber"]) == (1, 3, 1)
    assert held["skipped"] == ["load"]
    assert held["workUnit"] == {"business_date": "2026-12-01", "remote_job_id": "load-20261201"}

    # the reconciliation found the remote job failed without writing: repeat it
    ended = stack.rows(
        "select end_date from task_instance_history where dag_id='rw_gate_clear' "
        "and run_id=:r and task_id='load' and try_number=1",
        r=run_id,
    )[0][0]
    finished = _when(ended).isoformat()
    remote = {"state": "retryable", "finished_at": finished, "source": "job load-1: FAILED"}
    stack.airflow("variables", "set", "rw_gate_remote_load", json.dumps(remote))
    stack.clear("rw_gate_clear", run_id, ["load"], upstream=True)
    assert stack.wait_for_clear("rw_gate_clear", run_id, cleared=2, timeout=120) == "success"
    assert stack.task_states("rw_gate_clear", run_id)["load"] == ("success", 2)
    allowed = _record(stack, "rw_gate_clear", run_id, "gate")
    row = allowed["decisions"][0]
    assert (row["decision"], row["source"], row["attempts"]) == (
        "retry-eligible",
        "observations",
        1,
    )
    assert "job load-1: FAILED" in row["classification"]
    assert allowed["guard"] == [
        {"taskId": "load", "targets": ["load"], "action": "run", "blockers": []}
    ]


def test_a_deferred_sensor_holds_no_worker_slot_and_resumes_after_the_backoff(
    stack: AirflowStack,
) -> None:
    run_id = stack.trigger("rw_gate_defer", conf={}, logical_date="2026-12-02")
    seen_deferred = False
    deadline = time.monotonic() + 120
    while stack.run_state("rw_gate_defer", run_id) not in ("success", "failed"):
        rows = stack.rows(
            "select state, trigger_id from task_instance where dag_id='rw_gate_defer' "
            "and run_id=:r and task_id='wait'",
            r=run_id,
        )
        if rows and rows[0][0] == "deferred":
            assert rows[0][1] is not None  # waiting in the triggerer, not in a worker
            seen_deferred = True
        assert time.monotonic() < deadline, stack.log_tails()
        time.sleep(0.5)
    assert seen_deferred
    assert stack.run_state("rw_gate_defer", run_id) == "success"
    times = {
        task: (_when(start), _when(end))
        for task, start, end in stack.rows(
            "select task_id, start_date, end_date from task_instance "
            "where dag_id='rw_gate_defer' and run_id=:r",
            r=run_id,
        )
    }
    backoff_over = times["append"][1].add(seconds=25)
    assert times["retry"][0] >= backoff_over
    record = _record(stack, "rw_gate_defer", run_id, "wait")
    assert record["decisions"][0]["decision"] == "retry-eligible"
    assert record["action"] == "run"
    assert len(record["waits"]) >= 1
    assert record["waits"][0]["reason"].startswith("wait-backoff: attempt 2 of 2")


def _mapped(stack: AirflowStack, dag_id: str, run_id: str, task_id: str) -> list[tuple[Any, ...]]:
    """(map index, state, try number) of every task instance of ``task_id``."""
    rows = stack.rows(
        "select map_index, state, try_number from task_instance "
        "where dag_id=:d and run_id=:r and task_id=:t order by map_index",
        d=dag_id,
        r=run_id,
        t=task_id,
    )
    return [tuple(row) for row in rows]


def test_a_cleared_mapped_repeat_is_decided_per_map_index_and_skipped(
    stack: AirflowStack,
) -> None:
    dag_id, targets = "rw_gate_mapped_clear", ("load", "per_partition.load_part")
    run_id = stack.trigger(dag_id, conf={}, logical_date="2026-11-03")
    assert stack.wait_for_run(dag_id, run_id, timeout=180) == "failed"
    first = _record(stack, dag_id, run_id, "gate")
    assert {row["decision"] for row in first["decisions"]} == {"not-attempted"}
    for task_id in targets:
        assert _mapped(stack, dag_id, run_id, task_id) == [
            (0, "success", 1), (1, "failed", 1), (2, "success", 1),
        ]  # fmt: skip

    # "just re-run the loads": every map index is decided on its last try
    stack.clear(dag_id, run_id, list(targets), upstream=True)
    stack.wait_for_clear(dag_id, run_id, cleared=1, timeout=120)
    held = _record(stack, dag_id, run_id, "gate")
    assert [(row["taskId"], row["mapIndex"], row["decision"]) for row in held["decisions"]] == [
        (task_id, index, decision)
        for task_id in targets
        for index, decision in enumerate(
            ["validate-output", "reconcile-effects", "validate-output"]
        )
    ]
    assert held["skipped"] == sorted(targets)
    # expanded before the clear, every map index of both repeats is skipped, none ran again
    for task_id in targets:
        assert _mapped(stack, dag_id, run_id, task_id) == [
            (0, "skipped", 1), (1, "skipped", 1), (2, "skipped", 1),
        ]  # fmt: skip
    # the token, the listing, the earlier tries of each cleared map index, XCom keys, pools,
    # and each try again of a read the loaded API server answered 5xx (counted, not forbidden)
    retried = held.get("retriedReads", {"retries": 0})["retries"]
    assert held["requests"] == 1 + 1 + 6 + 1 + 1 + retried


# -- one clock: a worker whose clock runs ahead of or behind the API server's ------------------

#: the gate and the policy as a worker runs them, in a process of its own (its clock faked);
#: argv[1]: the cases, each {"what": "gate" | "policy", ...}; prints one JSON line per case
SKEWED_WORKER = textwrap.dedent(
    """
    import json, sys
    from datetime import timedelta
    from types import SimpleNamespace

    import pendulum
    from airflow.providers.standard.operators.python import PythonOperator
    from airflow.sdk import DAG, BaseOperator

    from airflow_retrywindow import Deadline, RetryWindowPolicy, Work
    from airflow_retrywindow.exceptions import RetryWindowGateError
    from airflow_retrywindow.gate import run as gate_run

    START = pendulum.datetime(2026, 1, 1, tz="UTC")


    def gate(case):
        delay = timedelta(seconds=case.get("retry_delay", 30))
        with DAG(case["dag_id"], schedule=None, start_date=START) as dag:
            BaseOperator(task_id="append", retries=1, retry_delay=delay)
        work = Work(duration=timedelta(minutes=2), validation=timedelta(seconds=30),
                    safe_repeat=True)
        settings = gate_run.GateSettings(
            targets={"append": work},
            deadline=Deadline.at(pendulum.now("UTC").add(seconds=case["deadline_in"])),
            max_observation_age=3600, conn_id="rw_skewed", page_size=100, timeout=10,
        )
        context = {"dag": dag, "dag_run": SimpleNamespace(run_id=case["run_id"])}
        local = pendulum.now("UTC").isoformat()
        try:
            decided = gate_run.decide_run(settings, context)
        except RetryWindowGateError as error:
            return {"refused": str(error), "local": local}
        row = decided.table.decision("append")
        start = row.earliest_start.isoformat() if row.earliest_start else None
        measured = getattr(decided.reader, "clock_offset", None)
        return {"decision": row.decision, "earliestStart": start, "local": local,
                "clock": measured.as_dict() if measured else None}


    def policy(case):
        deadline = pendulum.now("UTC").add(seconds=case["deadline_in"])
        gated = RetryWindowPolicy(deadline=deadline, duration=120, validation=30,
                                  safe_repeat=True)
        with DAG("rw_skewed_policy", schedule=None, start_date=START):
            task = PythonOperator(task_id="load", python_callable=print, retries=2,
                                  retry_delay=timedelta(seconds=2), retry_policy=gated)
        now = pendulum.now("UTC")
        context = {"task": task, "data_interval_start": now, "data_interval_end": now}
        decision = gated.evaluate(ConnectionError("reset"), 1, 2, context)
        return {"action": decision.action.value, "reason": decision.reason}


    for case in json.loads(sys.argv[1]):
        print(json.dumps({"gate": gate, "policy": policy}[case["what"]](case)), flush=True)
    """
)


def _skewed_worker(
    stack: AirflowStack,
    clock: str | pendulum.DateTime,
    cases: list[dict[str, Any]],
    *,
    api: str | None = None,
    **settings: str,
) -> list[dict[str, Any]]:
    """Run ``cases`` in a worker whose clock runs ``clock`` (``-60s``) off the API server's,
    or stands still at ``clock`` (a whole second), asking the API server at ``api`` (by
    default the stack's own address)."""
    faketime = shutil.which("faketime")
    if faketime is None:
        pytest.skip("needs Debian's faketime (devstack/install_system_packages.sh installs it)")
    url = api or stack.url
    connection = {"conn_type": "retrywindow_airflow_api", "host": url,
                  "login": "admin", "password": "admin"}  # fmt: skip
    # an absolute time, in seconds since the epoch, stops the clock there; a shift runs it
    stopped = isinstance(clock, pendulum.DateTime)
    spec = str(int(clock.timestamp())) if isinstance(clock, pendulum.DateTime) else clock
    env = {
        **os.environ,
        # timeouts keep running on the real monotonic clock
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        **({"FAKETIME_FMT": "%s"} if stopped else {}),
        "AIRFLOW_CONN_RW_SKEWED": json.dumps(connection),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{api or stack.execution_url}/execution/",
        **{f"AIRFLOW__RETRY_WINDOW__{name.upper()}": value for name, value in settings.items()},
    }
    done = subprocess.run(
        [faketime, "-f", spec, sys.executable, "-c", SKEWED_WORKER, json.dumps(cases)],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0 and len(lines) == len(cases), done.stdout + done.stderr
    return [json.loads(line) for line in lines]


def _failed_append(stack: AirflowStack, logical_date: str) -> tuple[str, pendulum.DateTime]:
    """A new run whose ``append`` failed: its run id and when it ended (the server's clock)."""
    run_id = stack.trigger("rw_gate_defer", conf={}, logical_date=logical_date)
    deadline = time.monotonic() + 120
    while stack.task_states("rw_gate_defer", run_id).get("append", (None, 0))[0] != "failed":
        assert time.monotonic() < deadline, stack.log_tails()
        time.sleep(0.5)
    ended = stack.rows(
        "select end_date from task_instance where dag_id='rw_gate_defer' and run_id=:r "
        "and task_id='append'",
        r=run_id,
    )[0][0]
    return run_id, _when(ended)


@pytest.fixture(scope="module")
def failed_append(stack: AirflowStack) -> tuple[str, pendulum.DateTime]:
    return _failed_append(stack, "2026-11-20")


@pytest.mark.parametrize(
    ("shift", "ahead", "behind"),
    [("-60s", "the API server's (the Airflow {api} at {url})", "this worker's"),
     ("+60s", "this worker's", "the API server's (the Airflow {api} at {url})")],
)  # fmt: skip
def test_a_worker_clock_beyond_the_tolerance_is_refused_naming_the_clock_and_the_amount(
    stack: AirflowStack,
    failed_append: tuple[str, pendulum.DateTime],
    shift: str,
    ahead: str,
    behind: str,
) -> None:
    run_id, _ = failed_append
    gate, policy = _skewed_worker(
        stack,
        shift,
        [{"what": "gate", "dag_id": "rw_gate_defer", "run_id": run_id, "deadline_in": 6 * 3600},
         {"what": "policy", "deadline_in": 6 * 3600}],
    )  # fmt: skip
    for found, api, url in (
        (gate["refused"], "REST API", stack.url),
        (policy["reason"], "API server", f"{stack.execution_url}/execution/"),
    ):
        first, second = (re.escape(side.format(api=api, url=url)) for side in (ahead, behind))
        # the Date header has whole seconds: "about" is 60 s give or take one
        assert re.search(rf"{first} clock runs about (59|60|61) s ahead of {second}", found), found
        assert "tolerance of 5 s ([retry_window] clock_skew_tolerance)" in found
    assert gate["refused"].startswith("the retry window gate could not decide")
    assert policy["action"] == "fail" and policy["reason"].startswith("gate-error:")


def test_a_worker_behind_within_the_tolerance_meets_the_deadline_on_the_servers_clock(
    stack: AirflowStack, failed_append: tuple[str, pendulum.DateTime]
) -> None:
    run_id, _ = failed_append
    # on the worker's clock, 6 s behind, each retry fits with 3 s to spare: on the
    # server's, which the run's times are on, neither does
    gate, policy = _skewed_worker(
        stack,
        "-6s",
        [{"what": "gate", "dag_id": "rw_gate_defer", "run_id": run_id, "deadline_in": 150 + 3},
         {"what": "policy", "deadline_in": 2 + 150 + 3}],
        clock_skew_tolerance="10",
    )  # fmt: skip
    assert gate["decision"] == "deadline-infeasible", gate
    assert policy["action"] == "fail", policy
    assert policy["reason"].startswith("deadline-infeasible"), policy


#: how far the worker's clock runs ahead in the tolerance test, and the tolerance
AHEAD, TOLERANCE = 6, 10
#: the append's backoff, in the worker's DAG
BACKOFF = 45


def test_a_worker_ahead_within_the_tolerance_keeps_the_stricter_clocks_decision(
    stack: AirflowStack,
) -> None:
    run_id, ended = _failed_append(stack, "2026-11-21")
    backoff_over = ended.add(seconds=BACKOFF)
    # both clocks stopped at the instant this is about, whenever the worker starts and however
    # long its reads take: the worker's reads the backoff over, the server's, AHEAD s behind,
    # still inside it. The policy's deadline, a retry's length less 3 s away on the worker's
    # clock, fits only on the server's
    worker_at = backoff_over.add(microseconds=999_999).replace(microsecond=0)
    server_at = worker_at.subtract(seconds=AHEAD)
    with server_clock_stopped_at(stack.url, server_at) as api:
        gate, policy = _skewed_worker(
            stack,
            worker_at,
            [{"what": "gate", "dag_id": "rw_gate_defer", "run_id": run_id, "deadline_in": 3600,
              "retry_delay": BACKOFF},
             {"what": "policy", "deadline_in": 2 + 150 - 3}],
            api=api,
            clock_skew_tolerance=str(TOLERANCE),
        )  # fmt: skip
    assert server_at < backoff_over <= _when(gate["local"])
    # the gate measured the worker AHEAD s ahead: the Date's second, and one more it may lag
    assert gate["clock"]["offsetLow"] == -AHEAD, gate
    assert gate["clock"]["offsetHigh"] == -AHEAD + 2, gate
    assert gate["decision"] == "wait-backoff", gate  # the server's clock: not yet
    assert gate["earliestStart"] is not None
    assert _when(gate["earliestStart"]) >= backoff_over
    # the stricter of the two clocks: the worker's, on which the retry is too late
    assert (policy["action"], policy["reason"].split(":")[0]) == ("fail", "deadline-infeasible")
