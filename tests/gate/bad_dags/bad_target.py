"""A gate whose target is misspelt."""

from __future__ import annotations

from airflow.sdk import DAG

from airflow_retrywindow import RetryWindowGateOperator
from tests.gate.placement_parts import DEADLINE, QUICK, START, load

with DAG("rw_gate_bad_target", schedule=None, start_date=START):
    gate = RetryWindowGateOperator(
        task_id="gate", targets={"laod": QUICK}, deadline=DEADLINE, guard=[]
    )
    gate >> load()
