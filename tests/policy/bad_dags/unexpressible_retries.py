"""A DAG whose gated task asks for more retries than the gate can express."""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, task

from airflow_retrywindow import Deadline, RetryWindowPolicy

with DAG(
    "rw_unexpressible", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")
) as dag:

    @task(
        retries=12,
        retry_delay=timedelta(seconds=4),
        retry_policy=RetryWindowPolicy(
            deadline=Deadline.after_data_interval_end(hours=6),
            duration=timedelta(minutes=1),
            validation=timedelta(0),
            safe_repeat=True,
        ),
    )
    def too_many():  # type: ignore[no-untyped-def]
        return None

    @task(retries=12)
    def ungated():  # type: ignore[no-untyped-def]
        return None

    too_many() >> ungated()
