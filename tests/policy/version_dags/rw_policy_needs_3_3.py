"""A task under a RetryWindowPolicy: parsed on Airflow 3.3, an import error naming why before."""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, task

from airflow_retrywindow import Deadline, RetryWindowPolicy

with DAG("rw_policy_needs_3_3", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):

    @task(
        retries=2,
        retry_delay=timedelta(seconds=5),
        retry_policy=RetryWindowPolicy(
            deadline=Deadline.after_data_interval_end(hours=6),
            duration=60,
            validation=30,
            safe_repeat=True,
        ),
    )
    def load() -> None:
        """Loads the positions."""

    load()
