"""A gate whose target sits inside a mapped task group: its task instances are all mapped."""

from __future__ import annotations

from airflow.sdk import DAG, task, task_group

from airflow_retrywindow import RetryWindowGateOperator
from tests.gate.placement_parts import DEADLINE, QUICK, START, load


@task
def load_file(name: str) -> str:
    return f"loaded {name}"


with DAG("rw_gate_mapped_group", schedule=None, start_date=START):

    @task_group
    def per_file(name: str) -> None:
        load_file(name)

    gate = RetryWindowGateOperator(
        task_id="gate", targets={"per_file.load_file": QUICK}, deadline=DEADLINE, guard=[]
    )
    per_file.expand(name=["a.csv", "b.csv"]) >> gate >> load()
