"""A mapped load and the same load in a mapped task group, each behind one gate.

The first run lets every map index through (a first run is not a retry); the
load of ``p1`` fails, and a load is not claimed safe to repeat, so its policy
refuses the retry. A person then clears the loads with their upstream gate: the
gate reads every map index's last try and holds back the repeat of both.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, task, task_group

from airflow_retrywindow import Deadline, RetryWindowGateOperator, RetryWindowPolicy, Work

DEADLINE = Deadline.after_data_interval_end(hours=6)
NOT_SAFE = Work(duration=timedelta(minutes=2), validation=timedelta(seconds=30), safe_repeat=False)
PARTITIONS = ["p0", "p1", "p2"]
LOAD = {
    "retries": 2,
    "retry_delay": timedelta(seconds=2),
    "retry_policy": RetryWindowPolicy(
        deadline=DEADLINE, duration=120, validation=30, safe_repeat=False
    ),
}


def _load(partition: str) -> str:
    if partition == "p1":
        raise ConnectionError(f"the load of {partition} failed before its commit")
    return f"loaded {partition}"


with DAG(
    "rw_gate_mapped_clear",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
):

    @task(**LOAD)
    def load(partition: str) -> str:
        return _load(partition)

    @task(**LOAD)
    def load_part(partition: str) -> str:
        return _load(partition)

    @task_group
    def per_partition(partition: str) -> None:
        load_part(partition)

    gate = RetryWindowGateOperator(
        task_id="gate",
        targets={"load": NOT_SAFE, "per_partition.load_part": NOT_SAFE},
        deadline=DEADLINE,
        guard=["load", "per_partition.load_part"],
    )
    gate >> [load.expand(partition=PARTITIONS), per_partition.expand(partition=PARTITIONS)]
