"""A well-placed gate: the DAG processor accepts it."""

from __future__ import annotations

from airflow.sdk import DAG

from airflow_retrywindow import RetryWindowGateOperator
from tests.gate.placement_parts import DEADLINE, QUICK, START, load

with DAG("rw_gate_good", schedule=None, start_date=START):
    gate = RetryWindowGateOperator(task_id="gate", targets={"load": QUICK}, deadline=DEADLINE)
    gate >> load()
