"""A mapped load and the same load in a mapped task group, each behind one gate.

The first run lets every map index through (a first run is not a retry); the
load of ``p1`` fails, and a load is not claimed safe to repeat, so its policy
refuses the retry (``mapped_loads.py``, copied beside it into the stack's DAG folder).
A person then clears the loads with their upstream gate: the
gate reads every map index's last try and holds back the repeat of both.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG
from mapped_loads import DEADLINE, NOT_SAFE, PARTITIONS, mapped_loads

from airflow_retrywindow import RetryWindowGateOperator

with DAG(
    "rw_gate_mapped_clear",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
):
    load, per_partition = mapped_loads(timedelta(seconds=2))

    gate = RetryWindowGateOperator(
        task_id="gate",
        targets={"load": NOT_SAFE, "per_partition.load_part": NOT_SAFE},
        deadline=DEADLINE,
        guard=["load", "per_partition.load_part"],
    )
    gate >> [load.expand(partition=PARTITIONS), per_partition.expand(partition=PARTITIONS)]
