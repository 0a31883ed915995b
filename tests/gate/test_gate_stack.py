"""The gate and the sensor on a full Airflow: API server, scheduler, DAG processor, triggerer.

A person clears the guarded work; the gate decides the repeat from the real
task instances and the evidence the retry policy left, map index by map index
for a mapped load and a load in a mapped task group. A deferrable sensor waits
out a backoff in the triggerer, holding no worker slot, then lets the retry run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pendulum
import pytest

from devstack.stack import AirflowStack, sqlite_stack

pytestmark = [pytest.mark.airflow, pytest.mark.slow]
DAGS = Path(__file__).with_name("stack_dags")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowStack]:
    home = tmp_path_factory.mktemp("gate-stack")
    services = ["api-server", "scheduler", "dag-processor", "triggerer"]
    dag_ids = ["rw_gate_clear", "rw_gate_defer", "rw_gate_mapped_clear"]
    with sqlite_stack(home, services, dag_ids, dags_folder=DAGS) as running:
        yield running


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
    backoff_over = times["append"][1].add(seconds=10)
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
    # the token, the listing, the earlier tries of each cleared map index, XCom keys, pools
    assert held["requests"] == 1 + 1 + 6 + 1 + 1
