"""A sensor whose target is not in its DAG."""

from __future__ import annotations

from airflow.sdk import DAG

from airflow_retrywindow import RetryWindowSensor
from tests.gate.placement_parts import DEADLINE, QUICK, START, load

with DAG("rw_gate_bad_sensor", schedule=None, start_date=START):
    wait = RetryWindowSensor(task_id="wait", target="ghost", work=QUICK, deadline=DEADLINE)
    wait >> load()
