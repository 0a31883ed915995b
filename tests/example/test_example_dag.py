"""The example DAG: it parses cleanly, and on a real Airflow it does what the gate decided."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from devstack import demo
from devstack.example import (
    DAG_ID,
    DAYS,
    LATE,
    LOAD_COMMITTED,
    ON_TIME,
    OVER_BUDGET,
    Day,
    append_clear_problems,
    load_jobs,
    problems,
    xcom,
)
from devstack.stack import ROOT, AirflowStack, sqlite_stack

PARSE = """
from airflow.dag_processing.dagbag import DagBag
from airflow_retrywindow import check_dag
bag = DagBag(dag_folder={folder!r})
assert not bag.import_errors, bag.import_errors
assert bag.dag_ids, "no DAG found"
for dag in bag.dags.values():
    dag.check_cycle()
    assert check_dag(dag) == [], check_dag(dag)
print(sorted(bag.dag_ids))
"""


#: the connection the gated tasks' pool is read through, as a deployment defines it
API_CONNECTION = {"AIRFLOW_CONN_AIRFLOW_API_DEFAULT": "http://admin:admin@localhost:8080"}


def parse_dags(environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PARSE.format(folder=str(ROOT / "dags"))],
        capture_output=True,
        text=True,
        check=False,
        env=environment,
    )


@pytest.mark.airflow
def test_every_dag_file_parses_without_cycles_and_passes_check_dag(airflow_db: Path) -> None:
    done = parse_dags({**os.environ, **API_CONNECTION})
    assert done.returncode == 0, done.stderr[-3000:]
    assert DAG_ID in done.stdout


@pytest.mark.airflow
def test_a_gated_task_in_a_pool_is_refused_without_the_connection_its_pool_is_read_with(
    airflow_db: Path,
) -> None:
    environment = {key: value for key, value in os.environ.items() if key not in API_CONNECTION}
    done = parse_dags(environment)
    assert done.returncode != 0
    # the import errors are printed as a repr: the quotes come escaped
    shown = done.stderr.replace("\\'", "'")
    assert "task 'extract_positions' runs in pool 'positions_db', a dependency" in shown, shown
    assert "connection 'airflow_api_default' ([retry_window] default_conn_id)" in shown
    switched_off = {
        **environment,
        "AIRFLOW__RETRY_WINDOW__DEPENDENCY_POOLS": '{"positions_db": "off"}',
    }
    assert parse_dags(switched_off).returncode == 0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowStack]:
    home = tmp_path_factory.mktemp("example-stack")
    services = ["api-server", "scheduler", "dag-processor", "triggerer"]
    with sqlite_stack(home, services, [DAG_ID]) as running:
        yield running


@pytest.fixture(scope="module")
def runs() -> dict[str, str]:
    """Day kind -> the run id of that day's run on the module's stack."""
    return {}


@pytest.mark.airflow
@pytest.mark.slow
@pytest.mark.parametrize("day", DAYS, ids=[f"{day.kind} day" for day in DAYS])
def test_example_run_follows_the_gate(
    stack: AirflowStack, runs: dict[str, str], day: Day, capsys: pytest.CaptureFixture[str]
) -> None:
    # the demo's own code runs the day, so what make demo prints is tested too
    run_id = runs[day.kind] = demo.run_day(stack, day)
    assert stack.run_state(DAG_ID, run_id) == "success"
    assert problems(stack, run_id, day) == []
    table = xcom(stack, run_id, "retry_gate")
    decisions = {row["taskId"]: row["decision"] for row in table["decisions"]}
    assert decisions["append"] == "reconcile-remote"
    assert decisions["monitor"] == "refresh-observation"
    assert decisions["transform"] == "validate-output"
    printed = capsys.readouterr().out
    assert f"{day.kind} day: run {run_id} ended success" in printed
    assert "append             try 1: reconcile-remote:" in printed
    assert "task       decision" in printed  # the explain table of the gate's fixture
    refused = day in (LATE, OVER_BUDGET)
    assert ("Impact communicated instead of a retry" in printed) == refused


@pytest.mark.airflow
@pytest.mark.slow
def test_each_day_shows_what_the_reconciliation_and_the_dry_run_decided(
    stack: AirflowStack, runs: dict[str, str]
) -> None:
    for day in DAYS:
        run_id = runs.get(day.kind) or demo.run_day(stack, day)
        found = xcom(stack, run_id, "reconcile_load")["load"]
        assert found["source"].startswith(f"job {day.load_job(1)}: ")
        assert found["state"] == ("succeeded" if day.load_committed else "retryable")
        repeat = xcom(stack, run_id, "retry_load")
        if repeat is not None:  # load's try 2 submitted nothing: the repeat is attempt 3's id
            assert repeat.startswith(f"job {day.load_job(3)}: DONE")
    over = xcom(stack, runs.get(OVER_BUDGET.kind) or "", "communicate_impact")
    assert "estimate 260 GB" in over and "approved 200 GB" in over


@pytest.mark.airflow
@pytest.mark.slow
def test_a_lost_worker_reconnects_to_its_running_job_and_submits_nothing(
    stack: AirflowStack, runs: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    day = LOAD_COMMITTED
    run_id = runs.get(day.kind) or demo.run_day(stack, day)
    capsys.readouterr()
    demo.show(stack, f"{day.kind} day", run_id, str(stack.run_state(DAG_ID, run_id)))
    printed = capsys.readouterr().out
    job = day.load_job(1)
    # one submission, found running by try 2, which reconnected and succeeded
    assert load_jobs(stack, run_id) == {job: "DONE"}
    assert stack.task_states(DAG_ID, run_id)["load"] == ("success", 2)
    assert f"load try 2 read:       job {job}: RUNNING (active), so the try ran" in printed
    assert "decided at its start:  observe-running: " in printed
    assert f"reconnects to job {job}, submits nothing" in printed
    assert "load:                  success after 2 tries" in printed
    assert f"load jobs submitted:   1: {job} DONE" in printed


@pytest.mark.airflow
@pytest.mark.slow
def test_a_failed_job_is_decided_by_the_model_and_repeated_once_under_the_next_id(
    stack: AirflowStack, runs: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    day = ON_TIME
    run_id = runs.get(day.kind) or demo.run_day(stack, day)
    capsys.readouterr()
    demo.show(stack, f"{day.kind} day", run_id, str(stack.run_state(DAG_ID, run_id)))
    printed = capsys.readouterr().out
    first, repeat = day.load_job(1), day.load_job(3)
    assert load_jobs(stack, run_id) == {first: "FAILED", repeat: "DONE"}
    assert f"load try 2 read:       job {first}: FAILED (failed), so the try was refused" in printed
    assert "decided at its start:  reconcile-effects: " in printed
    assert "load_retry_window:     retry-eligible:" in printed
    assert "validate_load:         warehouse.fund_positions partition " in printed
    assert f"rows from job {repeat}, no duplicate keys" in printed
    assert f"load jobs submitted:   2: {first} FAILED, {repeat} DONE" in printed


@pytest.mark.airflow
@pytest.mark.slow
def test_clearing_append_with_upstream_lets_its_gate_hold_the_repeat(
    stack: AirflowStack, runs: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    run_id = runs.get(ON_TIME.kind) or demo.run_day(stack, ON_TIME)
    assert demo.repeat_append(stack, run_id) == "success"
    assert append_clear_problems(stack, run_id) == []
    printed = capsys.readouterr().out
    job = f"positions_append_{ON_TIME.business_date.replace('-', '')}_v3_a1"
    assert f"reconcile_append found: job {job}: DONE" in printed
    assert "append_gate decided validate-output: attempt 1 succeeded" in printed
