"""A gate and a sensor whose targets run in a breaker pool: their repeats are held while
the pool's breaker is open.

``append`` and ``append_b`` run in the pool ``rw_gate_feed``, which the test names in
``[retry_window] breaker_pools`` and whose description carries the breaker's state as
the test wrote it. Both fail; once their 1 s backoff is over, ``gate_append`` decides
``append``'s repeat (``retry_append``) and ``wait_append_b`` waits on ``append_b``'s
(``retry_append_b``), timing out in 20 s, before a held repeat is decided again
(skipped: ``soft_fail``).
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, task
from settling import settle_past

from airflow_retrywindow import Deadline, RetryWindowGateOperator, RetryWindowSensor, Work
from airflow_retrywindow.version_compat import AirflowFailException

POOL = "rw_gate_feed"
DEADLINE = Deadline.after_data_interval_end(hours=6)
QUICK = Work(duration=timedelta(minutes=1), validation=timedelta(seconds=30), safe_repeat=True)

with DAG(
    "rw_gate_pool_open",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["retry-window-test"],
):

    @task(trigger_rule="all_done")
    def backoff_over() -> None:
        """Nothing decides until the targets' 1 s backoff is over: a decision inside it
        would wait, and which one comes is a matter of timing."""
        settle_past(1)

    pause = backoff_over()

    for suffix in ("", "_b"):

        @task(task_id=f"append{suffix}", pool=POOL, retries=1, retry_delay=timedelta(seconds=1))
        def append() -> None:
            raise AirflowFailException("append failed; repeat it after the backoff")

        @task(task_id=f"retry_append{suffix}")
        def retry_append() -> str:
            return "appended"

        decider = (
            RetryWindowSensor(
                task_id=f"wait_append{suffix}",
                target=f"append{suffix}",
                work=QUICK,
                deadline=DEADLINE,
                mode="poke",
                poke_interval=600,
                timeout=20,
                soft_fail=True,
                trigger_rule="all_done",
            )
            if suffix
            else RetryWindowGateOperator(
                task_id="gate_append",
                targets={"append": QUICK},
                deadline=DEADLINE,
                guard={"retry_append": "append"},
                trigger_rule="all_done",
            )
        )
        failed = append()
        failed >> pause >> decider >> retry_append()
