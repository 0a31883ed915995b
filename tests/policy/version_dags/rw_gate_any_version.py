"""A gate and a sensor given their estimates: parsed on every supported Airflow."""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, task

from airflow_retrywindow import Deadline, RetryWindowGateOperator, RetryWindowSensor, Work

DEADLINE = Deadline.after_data_interval_end(hours=6)
QUICK = Work(duration=timedelta(minutes=1), validation=timedelta(seconds=30), safe_repeat=True)

with DAG("rw_gate_any_version", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):

    @task(retries=2, retry_delay=timedelta(seconds=5))
    def extract() -> None:
        """Extracts the positions."""

    @task(retries=2, retry_delay=timedelta(seconds=5), trigger_rule="all_done")
    def load() -> None:
        """Loads the positions."""

    @task
    def publish() -> None:
        """Publishes the loaded positions."""

    gate = RetryWindowGateOperator(task_id="gate", targets={"extract": QUICK}, deadline=DEADLINE)
    wait = RetryWindowSensor(
        task_id="wait", target="load", work=QUICK, deadline=DEADLINE, trigger_rule="all_done"
    )
    gate >> extract() >> load() >> wait >> publish()
