"""The mapped load two gate test DAGs share: ``rw_gate_mapped`` and ``rw_gate_mapped_clear``.

Not a DAG: a module beside them in their DAG folder (Airflow puts the folder on the
import path when it parses a file or runs a task). ``load`` is mapped over
:data:`PARTITIONS`; ``per_partition`` is a mapped task group holding the same load
(``load_part``). The load of ``p1`` fails before its commit, and a load is not claimed
safe to repeat, so its ``RetryWindowPolicy`` refuses the retry.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import task, task_group

from airflow_retrywindow import Deadline, RetryWindowPolicy, Work

DEADLINE = Deadline.after_data_interval_end(hours=6)
PARTITIONS = ["p0", "p1", "p2"]
#: what the gates know of a load: two minutes, and not safe to repeat
NOT_SAFE = Work(duration=timedelta(minutes=2), validation=timedelta(seconds=30), safe_repeat=False)


def _load(partition: str) -> str:
    if partition == "p1":
        raise ConnectionError(f"the load of {partition} failed before its commit")
    return f"loaded {partition}"


def mapped_loads(retry_delay: timedelta) -> tuple[Any, Any]:
    """``load`` and ``per_partition``, to expand over :data:`PARTITIONS` in a DAG.

    :param retry_delay: the loads' ``retry_delay`` (each has 2 retries).
    """
    settings: dict[str, Any] = {
        "retries": 2,
        "retry_delay": retry_delay,
        "retry_policy": RetryWindowPolicy(
            deadline=DEADLINE, duration=120, validation=30, safe_repeat=False
        ),
    }

    @task(**settings)
    def load(partition: str) -> str:
        return _load(partition)

    @task(**settings)
    def load_part(partition: str) -> str:
        return _load(partition)

    @task_group
    def per_partition(partition: str) -> None:
        load_part(partition)

    return load, per_partition
