"""A gate and a sensor whose targets share a failing pool: their repeats are held.

The three ``feed_*`` tasks of the pool ``rw_gate_feed`` lose their outcome and their
``RetryWindowPolicy`` refuses to repeat them blind: three distinct task instances of
the pool failed with a failure the policy classed unknown, so the pool, a shared
dependency with the default settings, is failing (open). Then ``append`` and
``append_b``, in the same pool, fail; once their 1 s backoff is over, ``gate_append``
decides ``append``'s repeat (``retry_append``) and ``wait_append_b`` waits on
``append_b``'s (``retry_append_b``), timing out in 20 s, before the pool's next round
(skipped: ``soft_fail``).
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, task
from airflow.sdk.exceptions import AirflowFailException
from settling import settle_past

from airflow_retrywindow import (
    Deadline,
    OutcomeUnknown,
    RetryWindowGateOperator,
    RetryWindowPolicy,
    RetryWindowSensor,
    Work,
)

POOL = "rw_gate_feed"
FEEDS = 3  # the default trip: failures of 3 distinct task instances
DEADLINE = Deadline.after_data_interval_end(hours=6)
QUICK = Work(duration=timedelta(minutes=1), validation=timedelta(seconds=30), safe_repeat=True)
FEED_POLICY = RetryWindowPolicy(
    deadline=DEADLINE, duration=timedelta(minutes=1), validation=timedelta(seconds=30),
    safe_repeat=False,
)  # fmt: skip

with DAG(
    "rw_gate_pool_open",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["retry-window-test"],
):
    feeds = []
    for number in range(FEEDS):

        @task(
            task_id=f"feed_{number}",
            pool=POOL,
            retries=1,
            retry_delay=timedelta(seconds=2),
            retry_policy=FEED_POLICY,
        )
        def feed() -> None:
            raise OutcomeUnknown("the feed's answer was lost after it was sent")

        feeds.append(feed())

    @task(trigger_rule="all_done")
    def backoff_over() -> None:
        """Nothing decides until the targets' 1 s backoff is over: a decision inside it
        would wait, and which one comes is a matter of timing."""
        settle_past(1)

    pause = backoff_over()

    for suffix in ("", "_b"):

        @task(
            task_id=f"append{suffix}",
            pool=POOL,
            retries=1,
            retry_delay=timedelta(seconds=1),
            trigger_rule="all_done",
        )
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
        feeds >> failed >> pause >> decider >> retry_append()
