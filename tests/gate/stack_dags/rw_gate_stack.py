"""DAGs for the gate on a full Airflow (scheduler, triggerer, API server).

``rw_gate_clear``: the gate sits in front of ``load``. The first run lets the
first attempt through; ``load`` loses its outcome. A person clears ``load`` with
its upstream: the gate holds the repeat until a reconciliation, read from the
remote service (here the Variable ``rw_gate_remote_load``), says what happened.

``rw_gate_defer``: a deferrable sensor waits out a 25 s backoff in the
triggerer, then lets the retry through.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import DAG, Variable, task
from airflow.sdk.exceptions import AirflowFailException

from airflow_retrywindow import (
    Deadline,
    OutcomeUnknown,
    RetryWindowGateOperator,
    RetryWindowPolicy,
    RetryWindowSensor,
    Work,
)

DEADLINE = Deadline.after_data_interval_end(hours=6)
LOAD = Work(duration=timedelta(minutes=2), validation=timedelta(seconds=30), safe_repeat=True)
START = pendulum.datetime(2026, 1, 1, tz="UTC")

with DAG("rw_gate_clear", schedule=None, start_date=START, catchup=False):

    @task
    def reconcile() -> dict[str, Any] | None:
        """Look the load job up by its client job id; report what the service says."""
        found = Variable.get("rw_gate_remote_load", default=None, deserialize_json=True)
        if not found:
            return None
        return {"load": {**found, "observed_at": pendulum.now("UTC").isoformat()}}

    gate = RetryWindowGateOperator(
        task_id="gate",
        targets={"load": LOAD},
        deadline=DEADLINE,
        guard=["load"],
        observations="{{ ti.xcom_pull(task_ids='reconcile') }}",
        work_unit={"business_date": "{{ ds }}", "remote_job_id": "load-{{ ds_nodash }}"},
    )

    @task(
        retries=2,
        retry_delay=timedelta(seconds=2),
        retry_policy=RetryWindowPolicy(
            deadline=DEADLINE, duration=120, validation=30, safe_repeat=True
        ),
    )
    def load(ti: Any = None) -> str:
        if ti.try_number == 1:
            raise OutcomeUnknown("load response lost after submission", remote_job_id="load-1")
        return "loaded"

    reconcile() >> gate >> load()

with DAG("rw_gate_defer", schedule=None, start_date=START, catchup=False):
    # longer than the wait a sensor sleeps in the worker (sensor_short_wait): this one defers
    @task(retries=1, retry_delay=timedelta(seconds=25))
    def append() -> None:
        raise AirflowFailException("append failed; retry after the backoff")

    wait = RetryWindowSensor(
        task_id="wait",
        target="append",
        work=LOAD,
        deadline=DEADLINE,
        trigger_rule="all_done",
        timeout=300,
    )

    @task
    def retry() -> str:
        return "appended"

    append() >> wait >> retry()
