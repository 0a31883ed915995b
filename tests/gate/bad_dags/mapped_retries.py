"""A gate whose target may override its retries per map index (expand_kwargs, not strict)."""

from __future__ import annotations

from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG

from airflow_retrywindow import RetryWindowGateOperator
from tests.gate.placement_parts import DEADLINE, QUICK, START, load

with DAG("rw_gate_mapped_retries", schedule=None, start_date=START):
    gate = RetryWindowGateOperator(
        task_id="gate", targets={"copy": QUICK}, deadline=DEADLINE, guard=[]
    )
    copy = BashOperator.partial(task_id="copy", bash_command="true").expand_kwargs(
        [{"retries": 0}, {"retries": 3}], strict=False
    )
    copy >> gate >> load()
