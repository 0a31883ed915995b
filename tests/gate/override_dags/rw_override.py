"""The approved-override pattern on a full Airflow (scheduler, triggerer, API server).

``gate`` guards ``load`` and names ``approve_repeat``, an ``ApprovalOperator``
beside ``load``, directly after the gate. The first run lets ``load`` through
and skips the approval: nobody is asked. ``load`` fails with no retries left.
When someone clears the gate with its downstream tasks, the gate refuses the
repeat (``attempts-exhausted``), skips ``load`` and leaves ``approve_repeat`` to
ask ``ops_lead``, the one person assigned to answer. After an approval, clearing
``load`` with its upstream gate lets the repeat run; after a rejection it stays
skipped.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pendulum
from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk import DAG, Param, task
from airflow.sdk.exceptions import AirflowFailException

from airflow_retrywindow import Deadline, RetryWindowGateOperator, Work

DEADLINE = Deadline.after_data_interval_end(hours=6)
LOAD = Work(duration=timedelta(minutes=2), validation=timedelta(seconds=30), safe_repeat=True)
START = pendulum.datetime(2026, 1, 1, tz="UTC")

with DAG("rw_override", schedule=None, start_date=START, catchup=False):
    gate = RetryWindowGateOperator(
        task_id="gate",
        targets={"load": LOAD},
        deadline=DEADLINE,
        guard=["load"],
        approval="approve_repeat",
    )

    approve = ApprovalOperator(
        task_id="approve_repeat",
        subject="Repeat the load of {{ ds }} although the retry window gate refused it?",
        body="The gate's decision record says why it refused; approve only with a reason.",
        params={"reason": Param("", type="string", description="why the repeat is safe")},
        assigned_users=[{"id": "ops_lead", "name": "ops_lead"}],
        response_timeout=timedelta(hours=4),
    )

    @task(retries=0)
    def load(ti: Any = None) -> str:
        if ti.try_number == 1:
            raise AirflowFailException("the vendor feed was truncated")
        return "loaded"

    gate >> [load(), approve]
