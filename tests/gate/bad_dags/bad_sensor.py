"""A sensor whose target is not in its DAG."""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, task

from airflow_retrywindow import Deadline, RetryWindowSensor, Work

DEADLINE = Deadline.after_data_interval_end(hours=6)
QUICK = Work(duration=timedelta(minutes=1), validation=timedelta(seconds=30), safe_repeat=True)
START = pendulum.datetime(2026, 1, 1, tz="UTC")


@task
def load() -> str:
    return "loaded"


with DAG("rw_gate_bad_sensor", schedule=None, start_date=START):
    wait = RetryWindowSensor(task_id="wait", target="ghost", work=QUICK, deadline=DEADLINE)
    wait >> load()
