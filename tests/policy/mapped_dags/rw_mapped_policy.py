"""One mapped load whose map indexes fail differently, under one RetryWindowPolicy.

``ok`` succeeds; ``flaky`` fails once with a retryable error and succeeds after the
model's backoff; ``lost`` loses its outcome; ``broken`` needs a repair. Each map
index is decided on its own, and keeps its own evidence.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, task

from airflow_retrywindow import Deadline, OutcomeUnknown, RetryWindowPolicy, TerminalFailure

PARTITIONS = ["ok", "flaky", "lost", "broken"]


def _deadline(context):  # type: ignore[no-untyped-def]
    return context["dag_run"].run_after + timedelta(hours=1)


with DAG(
    "rw_mapped_policy",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["retry-window-test"],
):

    @task(
        retries=2,
        retry_delay=timedelta(seconds=2),
        retry_policy=RetryWindowPolicy(
            deadline=Deadline.computed(_deadline), duration=1, validation=1, safe_repeat=True
        ),
    )
    def load(partition, ti=None):  # type: ignore[no-untyped-def]
        if partition == "flaky" and ti.try_number == 1:
            raise ConnectionError("the database closed the connection")
        if partition == "lost":
            raise OutcomeUnknown("no answer after submitting the load", remote_job_id="load-lost")
        if partition == "broken":
            raise TerminalFailure("the target table is missing")
        return partition

    load.expand(partition=PARTITIONS)
