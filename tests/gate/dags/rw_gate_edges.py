"""Gates at the edges: targets under a RetryWindowPolicy subclass, and API URLs with credentials.

``sub_unknown`` and ``sub_silent`` use a team's subclass of ``RetryWindowPolicy``
that caps every wait at 10 minutes. ``sub_unknown`` loses its outcome (the
policy classifies it); ``sub_silent`` fails in a way Airflow never shows the
policy (``AirflowFailException``), so nothing is classified. ``edge_gate``
decides both.
``userinfo_gate`` reads the API through a URL that carries credentials;
``userinfo_closed_gate`` cannot reach such a URL and fails.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import DAG, task
from airflow.sdk.exceptions import AirflowFailException

from airflow_retrywindow import (
    Deadline,
    OutcomeUnknown,
    RetryWindowGateOperator,
    RetryWindowPolicy,
    Work,
)
from airflow_retrywindow.timing.retry_settings import RetrySettings

DEADLINE = Deadline.after_data_interval_end(hours=6)
QUICK = Work(duration=timedelta(minutes=1), validation=timedelta(seconds=30), safe_repeat=True)
BACKOFF = {"retries": 2, "retry_delay": timedelta(minutes=4), "retry_exponential_backoff": 2}


class CappedPolicy(RetryWindowPolicy):
    """A team's policy: every wait is capped at 10 minutes, whatever Airflow allows."""

    def settings_of(self, task: Any) -> RetrySettings:
        return RetrySettings.of_task(task, delay_cap=600)


with DAG(
    "rw_gate_edges",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["retry-window-test"],
):

    @task(
        retry_policy=CappedPolicy(deadline=DEADLINE, duration=60, validation=30, safe_repeat=True),
        **BACKOFF,
    )
    def sub_unknown() -> None:
        raise OutcomeUnknown("load response lost after submission", remote_job_id="edge-1")

    @task(
        retry_policy=CappedPolicy(deadline=DEADLINE, duration=60, validation=30, safe_repeat=True),
        **BACKOFF,
    )
    def sub_silent() -> None:
        raise AirflowFailException("the load failed; its retry policy is never asked")

    @task(trigger_rule="all_done")
    def settle() -> None:
        time.sleep(1)

    edge_gate = RetryWindowGateOperator(
        task_id="edge_gate",
        targets={"sub_unknown": QUICK, "sub_silent": QUICK},
        deadline=DEADLINE,
        guard=[],
        trigger_rule="all_done",
    )
    userinfo_gate = RetryWindowGateOperator(
        task_id="userinfo_gate",
        targets={"sub_unknown": QUICK},
        deadline=DEADLINE,
        guard=[],
        airflow_conn_id="rw_gate_userinfo",
        trigger_rule="all_done",
    )
    userinfo_closed_gate = RetryWindowGateOperator(
        task_id="userinfo_closed_gate",
        targets={"guarded_closed": QUICK},
        deadline=DEADLINE,
        airflow_conn_id="rw_gate_userinfo_closed",
        trigger_rule="all_done",
    )

    @task
    def guarded_closed() -> str:
        return "ran"

    [sub_unknown(), sub_silent()] >> settle() >> [edge_gate, userinfo_gate, userinfo_closed_gate]
    userinfo_closed_gate >> guarded_closed()
