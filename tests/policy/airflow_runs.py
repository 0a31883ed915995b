"""Run test DAGs on the throwaway Airflow and read what happened from its metadata DB."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pendulum

DAGS = Path(__file__).with_name("dags")


def install_dags(home: Path) -> None:
    """Copy this folder's test DAGs into the Airflow home's DAG bundle."""
    for source in DAGS.glob("*.py"):
        shutil.copy(source, home / "dags" / source.name)


def airflow(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run the ``airflow`` command line of this virtualenv."""
    binary = Path(sys.executable).with_name("airflow")
    done = subprocess.run(
        [str(binary), *args], capture_output=True, text=True, env=os.environ.copy(), check=False
    )
    if check and done.returncode != 0:
        raise AssertionError(f"airflow {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done


def run_dag(dag_id: str, **conf: Any) -> tuple[str, str]:
    """Run one DAG run to its end with ``airflow dags test``; return its run id and output."""
    done = airflow("dags", "test", dag_id, "-c", json.dumps(conf), check=False)
    row = query("select run_id from dag_run where dag_id=? order by id desc limit 1", dag_id)
    assert row, f"no run of {dag_id} was recorded:\n{done.stdout}\n{done.stderr}"
    return str(row[0][0]), done.stdout + done.stderr


def query(sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Rows from the metadata DB."""
    with sqlite3.connect(Path(os.environ["AIRFLOW_HOME"]) / "airflow.db") as db:
        return db.execute(sql, params).fetchall()


@dataclass(frozen=True)
class Try:
    """One try of a task instance, from the metadata DB."""

    number: int
    state: str
    start: pendulum.DateTime | None
    end: pendulum.DateTime | None
    delay: float | None
    reason: str | None


def _when(text: str | None) -> pendulum.DateTime | None:
    return pendulum.parse(text, tz="UTC") if text else None  # type: ignore[return-value]


def tries(dag_id: str, run_id: str, task_id: str) -> list[Try]:
    """Every try of the task instance, the current one last."""
    columns = "try_number, state, start_date, end_date, retry_delay_override, retry_reason"
    where = "where dag_id=? and run_id=? and task_id=?"
    rows = query(f"select {columns} from task_instance_history {where}", dag_id, run_id, task_id)
    rows += query(f"select {columns} from task_instance {where}", dag_id, run_id, task_id)
    found = {
        n: Try(n, state, _when(start), _when(end), delay, reason)
        for n, state, start, end, delay, reason in rows
    }
    return [found[n] for n in sorted(found)]


def max_tries(dag_id: str, run_id: str, task_id: str) -> int:
    """The task instance's ``max_tries`` column."""
    rows = query(
        "select max_tries from task_instance where dag_id=? and run_id=? and task_id=?",
        dag_id,
        run_id,
        task_id,
    )
    return int(rows[0][0])


def evidence(dag_id: str, run_id: str, task_id: str) -> dict[str, Any] | None:
    """The gate's evidence in the task state store, decoded."""
    rows = query(
        "select value from task_state_store where dag_id=? and run_id=? and task_id=? and key=?",
        dag_id,
        run_id,
        task_id,
        "retry_window.evidence",
    )
    return json.loads(rows[0][0]) if rows else None
