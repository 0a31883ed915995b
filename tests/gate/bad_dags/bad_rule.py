"""A guarded task that would run after its gate failed."""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, task

from airflow_retrywindow import Deadline, RetryWindowGateOperator, Work

DEADLINE = Deadline.after_data_interval_end(hours=6)
QUICK = Work(duration=timedelta(minutes=1), validation=timedelta(seconds=30), safe_repeat=True)
START = pendulum.datetime(2026, 1, 1, tz="UTC")


@task
def load() -> str:
    return "loaded"


with DAG("rw_gate_bad_rule", schedule=None, start_date=START):
    gate = RetryWindowGateOperator(task_id="gate", targets={"load": QUICK}, deadline=DEADLINE)
    gate >> load.override(trigger_rule="all_done")()
