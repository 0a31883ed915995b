"""A guarded task that is not downstream of its gate."""

from __future__ import annotations

from airflow.sdk import DAG

from airflow_retrywindow import RetryWindowGateOperator
from tests.gate.placement_parts import DEADLINE, QUICK, START, load

with DAG("rw_gate_not_downstream", schedule=None, start_date=START):
    RetryWindowGateOperator(task_id="gate", targets={"load": QUICK}, deadline=DEADLINE)
    load()
