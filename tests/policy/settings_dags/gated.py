"""A DAG with a gated task: refused when the [retry_window] settings are bad."""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, task

from airflow_retrywindow import Deadline, RetryWindowPolicy

with DAG("rw_settings_gated", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):

    @task(
        retries=2,
        retry_delay=timedelta(seconds=30),
        retry_policy=RetryWindowPolicy(
            deadline=Deadline.after_data_interval_start(hours=6),
            duration=timedelta(minutes=1),
            validation=timedelta(0),
            safe_repeat=True,
        ),
    )
    def load():  # type: ignore[no-untyped-def]
        return None

    load()
