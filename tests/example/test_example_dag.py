"""The example DAG: it parses cleanly, and on a real Airflow it does what the gate decided."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from devstack import demo
from devstack.example import DAG_ID, LATE, ON_TIME, Day, problems, xcom
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


@pytest.mark.airflow
def test_every_dag_file_parses_without_cycles_and_passes_check_dag(airflow_db: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PARSE.format(folder=str(ROOT / "dags"))],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert DAG_ID in done.stdout


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowStack]:
    home = tmp_path_factory.mktemp("example-stack")
    services = ["api-server", "scheduler", "dag-processor", "triggerer"]
    with sqlite_stack(home, services, [DAG_ID]) as running:
        yield running


@pytest.mark.airflow
@pytest.mark.slow
@pytest.mark.parametrize("day", [ON_TIME, LATE], ids=["on-time day", "late day"])
def test_example_run_follows_the_gate(
    stack: AirflowStack, day: Day, capsys: pytest.CaptureFixture[str]
) -> None:
    # the demo's own code runs the day, so what make demo prints is tested too
    run_id = demo.run_day(stack, day)
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
    assert ("Impact communicated instead of a retry" in printed) == (day is LATE)
