"""Settings the gate cannot express are refused before any run: in tests and at parse time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BAD_DAGS = Path(__file__).with_name("bad_dags")
GOOD_DAGS = Path(__file__).with_name("dags")

PARSE = """
import sys
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
for path, error in bag.import_errors.items():
    print("IMPORT ERROR", path, error)
print("DAGS", sorted(bag.dag_ids))
"""


def _parse(folder: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", PARSE, str(folder)], capture_output=True, text=True, check=True
    )
    return done.stdout


@pytest.mark.airflow
def test_dag_processor_refuses_unexpressible_settings(airflow_db: Path) -> None:
    output = _parse(BAD_DAGS)
    assert "IMPORT ERROR" in output
    assert "retry window gate: task 'too_many': retries=12 means 13 runs" in output
    assert "DAGS []" in output


@pytest.mark.airflow
def test_dag_processor_accepts_expressible_settings(airflow_db: Path) -> None:
    output = _parse(GOOD_DAGS)
    assert "IMPORT ERROR" not in output
    assert "rw_backoff" in output


def test_check_dag_reports_only_gated_tasks() -> None:
    from airflow.sdk import DAG

    from airflow_retrywindow import check_dag

    namespace: dict[str, object] = {}
    source = (BAD_DAGS / "unexpressible_retries.py").read_text()
    exec(compile(source, "unexpressible_retries.py", "exec"), namespace)
    dags = [value for value in namespace.values() if isinstance(value, DAG)]
    assert len(dags) == 1
    problems = check_dag(dags[0])
    assert len(problems) == 1
    assert problems[0].startswith("rw_unexpressible: task 'too_many': retries=12")
