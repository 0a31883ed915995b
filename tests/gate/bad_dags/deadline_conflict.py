"""A gate without a deadline whose targets' policies give two different ones."""

from __future__ import annotations

from airflow.sdk import DAG, task

from airflow_retrywindow import Deadline, RetryWindowGateOperator, RetryWindowPolicy
from tests.gate.placement_parts import DEADLINE, START

EARLIER = Deadline.after_data_interval_end(hours=4)

with DAG("rw_gate_deadline_conflict", schedule=None, start_date=START):

    @task(
        retries=1,
        retry_policy=RetryWindowPolicy(
            deadline=DEADLINE, duration=60, validation=30, safe_repeat=True
        ),
    )
    def load() -> str:
        return "loaded"

    @task(
        retries=1,
        retry_policy=RetryWindowPolicy(
            deadline=EARLIER, duration=60, validation=30, safe_repeat=True
        ),
    )
    def report() -> str:
        return "reported"

    gate = RetryWindowGateOperator(task_id="gate", targets=["load", "report"], guard=[])
    [load(), report()] >> gate
