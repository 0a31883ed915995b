"""What the scheduler test DAGs share: their deadline, their DAG and a count of each body run.

Every body appends one line to ``conf["counter"]`` before anything else, so a test
counts how often the task's own code ran. Each run's deadline is ``run_after +
conf["deadline_in"]`` seconds. A module of the DAG folder that holds no DAG: its DAG
files import it by name, and a stack whose DAGs use it copies it beside them.
"""

from __future__ import annotations

import os
from datetime import timedelta

import pendulum
from airflow.sdk import DAG

START = pendulum.datetime(2026, 1, 1, tz="UTC")


def deadline_in(context):  # type: ignore[no-untyped-def]
    """The run's deadline: ``conf["deadline_in"]`` seconds after it was asked for."""
    run = context["dag_run"]
    return run.run_after + timedelta(seconds=float(run.conf["deadline_in"]))


def test_dag(dag_id: str) -> DAG:
    """An unscheduled DAG of the scheduler tests."""
    return DAG(dag_id, schedule=None, start_date=START, catchup=False, tags=["retry-window-test"])


def count(context) -> int:  # type: ignore[no-untyped-def]
    """Record one run of the body; return this try's number."""
    ti = context["ti"]
    with open(context["dag_run"].conf["counter"], "a") as out:
        out.write(f"{ti.task_id} try {ti.try_number} pid {os.getpid()}\n")
    return int(ti.try_number)
