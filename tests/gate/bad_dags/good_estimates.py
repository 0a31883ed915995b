"""Estimates taken from the targets' policies: accepted.

The gate lists its targets; the sensor has neither a work nor a deadline; a second
gate overrides the safe-repeat claim of a mapped target in a task group, with a reason.
"""

from __future__ import annotations

from airflow.sdk import DAG, task, task_group

from airflow_retrywindow import (
    RetryWindowGateOperator,
    RetryWindowPolicy,
    RetryWindowSensor,
    Work,
)
from tests.gate.placement_parts import DEADLINE, START

POLICY = RetryWindowPolicy(deadline=DEADLINE, duration=60, validation=30, safe_repeat=True)

with DAG("rw_gate_good_estimates", schedule=None, start_date=START):

    @task(retries=1, retry_policy=POLICY)
    def load(name: str) -> str:
        return f"loaded {name}"

    @task(retries=1, retry_policy=POLICY)
    def report() -> str:
        return "reported"

    @task_group
    def per_file(name: str) -> None:
        load(name)

    targets = [load.expand(name=["a"]), report(), per_file.expand(name=["b"])]
    gate = RetryWindowGateOperator(task_id="gate", targets=["load", "report"], guard=[])
    wait = RetryWindowSensor(task_id="wait", target="report")
    reconciled = RetryWindowGateOperator(
        task_id="reconciled",
        targets={"per_file.load": Work.override(reason="INC-42: rows appended", safe_repeat=False)},
        guard=[],
    )
    targets >> gate >> wait >> reconciled
