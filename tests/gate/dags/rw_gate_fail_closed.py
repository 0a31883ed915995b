"""Gates that cannot decide: each must fail and keep its guarded task from running."""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, task

from airflow_retrywindow import Deadline, RetryWindowGateOperator, Work

DEADLINE = Deadline.after_data_interval_end(hours=6)
QUICK = Work(duration=timedelta(minutes=1), validation=timedelta(seconds=30), safe_repeat=True)
NAIVE = (
    '{"guarded_naive": {"state": "retryable", "observed_at": "2026-01-01T00:00:00", '
    '"finished_at": "2026-01-01T00:00:00"}}'
)

with DAG(
    "rw_gate_fail_closed",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["retry-window-test"],
):
    for name, conn_id, observations in (
        ("no_connection", "rw_gate_missing", None),
        ("unreachable", "rw_gate_unreachable", None),
        ("naive", "airflow_api_default", NAIVE),
    ):
        gate = RetryWindowGateOperator(
            task_id=f"gate_{name}",
            targets={f"guarded_{name}": QUICK},
            deadline=DEADLINE,
            airflow_conn_id=conn_id,
            observations=observations,
        )

        @task(task_id=f"guarded_{name}")
        def guarded() -> str:
            return "ran"

        gate >> guarded()
