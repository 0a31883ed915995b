"""Mapped targets and mapped guarded tasks, in and out of (mapped) task groups: accepted."""

from __future__ import annotations

from airflow.sdk import DAG, task, task_group

from airflow_retrywindow import RetryWindowGateOperator, RetryWindowSensor
from tests.gate.placement_parts import DEADLINE, QUICK, START


@task
def load_file(name: str) -> str:
    return f"loaded {name}"


with DAG("rw_gate_good_mapped", schedule=None, start_date=START):

    @task_group
    def per_file(name: str) -> None:
        load_file(name)

    gate = RetryWindowGateOperator(
        task_id="gate",
        targets={"per_file.load_file": QUICK, "load_file": QUICK},
        deadline=DEADLINE,
        guard={"per_file.load_file": "per_file.load_file", "load_file": "load_file"},
    )
    gate >> [per_file.expand(name=["a.csv", "b.csv"]), load_file.expand(name=["c.csv"])]

    wait = RetryWindowSensor(
        task_id="wait", target="per_file.load_file", work=QUICK, deadline=DEADLINE
    )
    gate >> wait >> load_file.override(task_id="reload").expand(name=["a.csv", "b.csv"])
