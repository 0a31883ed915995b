"""A gated operator that starts its tries in the triggerer: refused when parsed.

With ``start_from_trigger=True`` the scheduler hands every try, retries
included, straight to the triggerer, so no retry-start check can run before a
retry. The provider's cluster policy refuses the DAG; ``check_dag`` says the same.
It sits in its own folder because the test adds it to the DAG folder only once
the other DAGs were parsed.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import DAG, BaseOperator
from airflow.triggers.base import StartTriggerArgs

from airflow_retrywindow import Deadline, RetryWindowPolicy


class StartsInTheTriggerer(BaseOperator):
    """Start in the triggerer with ``rw_probe_trigger.ProbeTrigger``."""

    start_trigger_args = StartTriggerArgs(
        trigger_cls="rw_probe_trigger.ProbeTrigger",
        trigger_kwargs={"counter": "/dev/null", "try_number": 1, "fail": True},
        next_method="execute_complete",
    )
    start_from_trigger = True

    def execute_complete(self, context: Any, event: Any = None) -> Any:
        return event


with DAG(
    "rw_trigger_start",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["retry-window-test"],
) as dag:
    StartsInTheTriggerer(
        task_id="watch",
        retries=1,
        retry_delay=timedelta(seconds=1),
        retry_policy=RetryWindowPolicy(
            deadline=Deadline.after_data_interval_end(hours=6),
            duration=timedelta(minutes=1),
            validation=timedelta(0),
            safe_repeat=True,
        ),
    )
