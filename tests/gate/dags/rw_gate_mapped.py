"""Mapped targets and mapped guarded tasks, decided per map index on a real DAG run.

* ``load`` is mapped over three partitions under a ``RetryWindowPolicy``
  (``mapped_loads.py``); the load of ``p1`` fails, and a load is not claimed safe to
  repeat, so its policy refuses the retry. ``mapped_gate`` decides each map index and
  skips ``reload``, the repeat it guards, mapped too over a list another task returns.
* ``per_partition`` is the same load inside a mapped task group; ``group_gate``
  skips ``repeat``, a mapped task group holding the repeat.
* ``append`` fails in both map indexes, each after three seconds, so the one that
  runs second ends three seconds later; ``wait_append`` (deferrable) waits out the
  backoff that ends last, then lets ``retry_append`` through, and ``append_gate``
  lets ``rerun`` run. On the test's clock (``settling.py``) the pauses move the clock,
  which then stands still until the sensor said until when it waits: the sensor finds
  both backoffs whole, however late a busy machine starts it.
* ``by_partition`` is a mapped task group with its own gate: ``fetch`` fails
  for ``p0`` (retryable, attempts left) and succeeds for ``p1``; each map index of
  ``gate_here`` decides only its own map index of ``fetch``, so ``refetch[0]``
  runs and ``refetch[1]`` (its fetch succeeded: nothing to repeat) is skipped.
* ``settle`` fails in both map indexes, with a ten-minute backoff; a
  reconciliation finds the outcome of ``settle[1]`` unknown, so ``wait_settle``
  skips ``retry_settle`` at once although ``settle[0]`` only waits.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import DAG, task, task_group
from airflow.sdk.exceptions import AirflowFailException
from mapped_loads import DEADLINE, NOT_SAFE, PARTITIONS, mapped_loads
from settling import pause, settle_past

from airflow_retrywindow import (
    RetryWindowGateOperator,
    RetryWindowSensor,
    Work,
)

SAFE = Work(duration=timedelta(minutes=1), validation=timedelta(seconds=30), safe_repeat=True)
#: as long as the wait a sensor sleeps in the worker ([retry_window] sensor_short_wait's
#: default, 10 s): all of it left when the sensor looks on the stopped clock, it defers
BACKOFF = {"retries": 1, "retry_delay": timedelta(seconds=10)}

with DAG(
    "rw_gate_mapped",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["retry-window-test"],
) as dag:
    load, per_partition = mapped_loads(timedelta(seconds=1))

    @task
    def reload(partition: str) -> str:
        return f"reloaded {partition}"

    @task
    def partitions() -> list[str]:
        return PARTITIONS

    mapped_gate = RetryWindowGateOperator(
        task_id="mapped_gate",
        targets={"load": NOT_SAFE},
        deadline=DEADLINE,
        guard={"reload": "load"},
        trigger_rule="all_done",
    )
    load.expand(partition=PARTITIONS) >> mapped_gate >> reload.expand(partition=partitions())

    @task_group
    def repeat(partition: str) -> None:
        reload.override(task_id="reload_part")(partition)

    group_gate = RetryWindowGateOperator(
        task_id="group_gate",
        targets={"per_partition.load_part": NOT_SAFE},
        deadline=DEADLINE,
        guard={"repeat.reload_part": "per_partition.load_part"},
        trigger_rule="all_done",
    )
    per_partition.expand(partition=PARTITIONS) >> group_gate >> repeat.expand(partition=PARTITIONS)

    @task(**BACKOFF)
    def append(seconds: int) -> None:
        pause(seconds)
        raise AirflowFailException("append failed; retry after the backoff")

    wait_append = RetryWindowSensor(
        task_id="wait_append",
        target="append",
        work=SAFE,
        deadline=DEADLINE,
        timeout=120,
        trigger_rule="all_done",
    )

    @task
    def retry_append(seconds: int) -> str:
        return f"appended after {seconds}"

    append_gate = RetryWindowGateOperator(
        task_id="append_gate",
        targets={"append": SAFE},
        deadline=DEADLINE,
        guard={"rerun": "append"},
    )

    @task
    def rerun(seconds: int) -> str:
        return f"rerun after {seconds}"

    pauses = [3, 3]
    appended = append.expand(seconds=pauses)
    appended >> wait_append >> [retry_append.expand(seconds=pauses), append_gate]
    append_gate >> rerun.expand(seconds=pauses)

    @task(retries=1, retry_delay=timedelta(seconds=1))
    def fetch(partition: str) -> str:
        if partition == "p0":  # no retry now; the gate decides the repeat
            raise AirflowFailException(f"the fetch of {partition} failed")
        return f"fetched {partition}"

    @task(trigger_rule="all_done")
    def settle_down() -> None:
        """Let fetch[0]'s one-second backoff pass before its gate decides."""
        settle_past(1)

    @task
    def refetch(partition: str) -> str:
        return f"refetched {partition}"

    @task_group
    def by_partition(partition: str) -> None:
        gate_here = RetryWindowGateOperator(
            task_id="gate_here",
            targets={"by_partition.fetch": SAFE},
            deadline=DEADLINE,
            guard={"by_partition.refetch": "by_partition.fetch"},
            trigger_rule="all_done",
        )
        fetch(partition) >> settle_down() >> gate_here >> refetch(partition)

    by_partition.expand(partition=["p0", "p1"])
    # its move of the clock not between the appends' failures and the sensor's first look
    dag.get_task("by_partition.settle_down") >> appended

    @task(retries=1, retry_delay=timedelta(minutes=10))
    def settle(partition: str) -> None:
        raise AirflowFailException(f"settlement of {partition} failed")

    @task(trigger_rule="all_done")
    def reconcile_settle() -> dict[str, Any]:
        """The settlement service lost track of p1's job: its outcome is unknown."""
        seen = pendulum.now("UTC").isoformat()
        return {"settle[1]": {"state": "unknown", "observed_at": seen, "source": "job p1: lost"}}

    wait_settle = RetryWindowSensor(
        task_id="wait_settle",
        target="settle",
        work=SAFE,
        deadline=DEADLINE,
        observations="{{ ti.xcom_pull(task_ids='reconcile_settle') | tojson }}",
        timeout=120,
        trigger_rule="all_done",
    )

    @task
    def retry_settle(partition: str) -> str:
        return f"settled {partition}"

    settled = settle.expand(partition=["p0", "p1"])
    settled >> reconcile_settle() >> wait_settle
    settled >> wait_settle >> retry_settle.expand(partition=["p0", "p1"])
