"""A chain that lets a retry bypass the window: refused when the DAG is parsed."""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.providers.common.compat.sdk import ChainRetryPolicy
from airflow.sdk import DAG, ExceptionRetryPolicy, RetryRule, task

from airflow_retrywindow import Deadline, RetryWindowPolicy

with DAG("rw_chain_refused", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):

    @task(
        retries=2,
        retry_policy=ChainRetryPolicy(
            [
                ExceptionRetryPolicy(rules=[RetryRule(exception=ConnectionError)]),
                RetryWindowPolicy(
                    deadline=Deadline.after_data_interval_end(hours=6),
                    duration=timedelta(minutes=5),
                    validation=timedelta(minutes=1),
                    safe_repeat=True,
                ),
            ]
        ),
    )
    def load() -> None: ...

    load()
