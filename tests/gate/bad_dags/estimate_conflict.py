"""A gate whose Work says a load is safe to repeat while the load's policy says it is not."""

from __future__ import annotations

from airflow.sdk import DAG, task

from airflow_retrywindow import RetryWindowGateOperator, RetryWindowPolicy, Work
from tests.gate.placement_parts import DEADLINE, START

with DAG("rw_gate_estimate_conflict", schedule=None, start_date=START):

    @task(
        retries=1,
        retry_policy=RetryWindowPolicy(
            deadline=DEADLINE, duration=60, validation=30, safe_repeat=False
        ),
    )
    def load() -> str:
        return "loaded"

    gate = RetryWindowGateOperator(
        task_id="gate",
        targets={"load": Work(duration=60, validation=30, safe_repeat=True)},
        guard=[],
    )
    load() >> gate
