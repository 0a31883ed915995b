"""DAGs whose tasks really fail, for testing RetryWindowPolicy on a real Airflow.

Each run's deadline is ``run_after + conf["deadline_in"]`` seconds, so a test
sets how much time is left without depending on the wall clock. ``rw_refusals`` holds
one task per way a failure ends with its first try or its attempts, each on its own
(one ``airflow dags test`` run decides them all).
"""

from __future__ import annotations

import time
from datetime import timedelta

import pendulum
from airflow.sdk import DAG, task
from airflow.sdk.exceptions import AirflowException

from airflow_retrywindow import Deadline, OutcomeUnknown, RetryWindowPolicy

START = pendulum.datetime(2026, 1, 1, tz="UTC")


def _deadline(context):  # type: ignore[no-untyped-def]
    run = context["dag_run"]
    return run.run_after + timedelta(seconds=float(run.conf["deadline_in"]))


def _policy(**overrides):  # type: ignore[no-untyped-def]
    settings = {
        "deadline": Deadline.computed(_deadline),
        "duration": timedelta(seconds=1),
        "validation": timedelta(seconds=1),
        "safe_repeat": True,
        "unknown": [TimeoutError],
    }
    settings.update(overrides)
    return RetryWindowPolicy(**settings)


def _dag(dag_id: str) -> DAG:
    return DAG(dag_id, schedule=None, start_date=START, catchup=False, tags=["retry-window-test"])


GATED = {
    "retry_delay": timedelta(seconds=2),
    "retry_exponential_backoff": 2,
    "max_retry_delay": timedelta(seconds=10),
}

with _dag("rw_backoff"):

    @task(retries=3, retry_policy=_policy(), **GATED)
    def flaky(ti=None):  # type: ignore[no-untyped-def]
        if ti.try_number < 3:
            raise ConnectionError(f"transient failure on try {ti.try_number}")
        return "loaded"

    flaky()

with _dag("rw_deadline"):

    @task(retries=3, retry_policy=_policy(duration=timedelta(minutes=5)), **GATED)
    def long_load():  # type: ignore[no-untyped-def]
        raise ConnectionError("transient failure")

    long_load()


def _broken(context):  # type: ignore[no-untyped-def]
    raise KeyError("deadline_table")


with _dag("rw_refusals"):

    @task(retries=3, retry_policy=_policy(), **GATED)
    def append():  # type: ignore[no-untyped-def]
        raise OutcomeUnknown("load response lost after submission", remote_job_id="job-1")

    @task(retries=3, retry_policy=_policy(), **GATED)
    def submit():  # type: ignore[no-untyped-def]
        raise TimeoutError("no answer after submitting the job")

    @task(retries=3, retry_policy=_policy(safe_repeat=False), **GATED)
    def write_append():  # type: ignore[no-untyped-def]
        raise ConnectionError("failed after writing some rows")

    @task(retries=1, retry_policy=_policy(), **GATED)
    def archive():  # type: ignore[no-untyped-def]
        raise ConnectionError("always failing")

    @task(retries=3, retry_policy=_policy(deadline=Deadline.computed(_broken)), **GATED)
    def report():  # type: ignore[no-untyped-def]
        raise ConnectionError("transient failure")

    @task(retries=3, retry_policy=_policy(), execution_timeout=timedelta(seconds=1), **GATED)
    def slow_submit():  # type: ignore[no-untyped-def]
        time.sleep(30)  # Airflow's execution_timeout ends it after 1 s

    @task(retries=3, retry_policy=_policy(), **GATED)
    def wrapped_submit():  # type: ignore[no-untyped-def]
        try:
            raise TimeoutError("no answer after submitting the job")
        except TimeoutError as error:
            raise AirflowException("the load step failed") from error

    for each in (append, submit, write_append, archive, report, slow_submit, wrapped_submit):
        each()

with _dag("rw_clear"):

    @task(retries=1, retry_policy=_policy(), **GATED)
    def monitor():  # type: ignore[no-untyped-def]
        raise ConnectionError("still failing")

    monitor()

with _dag("rw_mapped"):

    @task(retries=2, retry_policy=_policy(), **GATED)
    def load_partition(partition, ti=None):  # type: ignore[no-untyped-def]
        if ti.try_number < 2:
            raise ConnectionError(f"transient failure on partition {partition}")
        return partition

    load_partition.expand(partition=["eu", "us"])
