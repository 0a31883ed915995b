"""A gate with a target that has neither a RetryWindowPolicy nor a Work."""

from __future__ import annotations

from airflow.sdk import DAG

from airflow_retrywindow import RetryWindowGateOperator
from tests.gate.placement_parts import DEADLINE, START, load

with DAG("rw_gate_no_estimate", schedule=None, start_date=START):
    gate = RetryWindowGateOperator(task_id="gate", targets=["load"], deadline=DEADLINE)
    gate >> load()
