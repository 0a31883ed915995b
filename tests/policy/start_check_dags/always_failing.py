"""A gated task that fails every try: each failure is decided by the policy."""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, task

from airflow_retrywindow import Deadline, RetryWindowPolicy

with DAG("rw_start_check", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):

    @task(
        retries=1,
        retry_delay=timedelta(seconds=2),
        retry_policy=RetryWindowPolicy(
            deadline=Deadline.after_data_interval_start(hours=6),
            duration=timedelta(seconds=10),
            validation=timedelta(0),
            safe_repeat=True,
        ),
    )
    def load():  # type: ignore[no-untyped-def]
        raise ConnectionError("the warehouse reset the connection")

    load()
