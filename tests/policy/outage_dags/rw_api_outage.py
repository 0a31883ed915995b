"""DAGs that fail, or decide, while the test's proxy cuts Airflow's API away.

``rw_outage_blip`` and ``rw_outage_long``: try 1 fails at once; the retry policy
then reads the API server's clock, which is when the proxy starts its cut.
``rw_outage_gate``: a gate reads its run through a REST connection whose proxy
answers the first requests with 502; ``rw_outage_gate_long`` through one whose
proxy is cut for longer than the gate's ``gate_timeout``. Every body appends one line to
``conf["counter"]``, so a test counts how often the task's own code ran.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import DAG, task

from airflow_retrywindow import Deadline, RetryWindowGateOperator, RetryWindowPolicy

START = pendulum.datetime(2026, 1, 1, tz="UTC")
#: the gates' REST connections, each through its proxy (set by the test's environment)
GATE_CONNECTION = "rw_outage_api"
LONG_OUTAGE_CONNECTION = "rw_outage_api_long"


def _deadline(context):  # type: ignore[no-untyped-def]
    run = context["dag_run"]
    return run.run_after + timedelta(seconds=float(run.conf["deadline_in"]))


def _policy() -> RetryWindowPolicy:
    return RetryWindowPolicy(
        deadline=Deadline.computed(_deadline),
        duration=timedelta(seconds=1),
        validation=timedelta(seconds=1),
        safe_repeat=True,
    )


def _count(context: Any) -> int:
    """Record one run of the body; return this try's number."""
    ti = context["ti"]
    with open(context["dag_run"].conf["counter"], "a") as out:
        out.write(f"{ti.task_id} try {ti.try_number}\n")
    return int(ti.try_number)


for dag_id in ("rw_outage_blip", "rw_outage_long"):
    with DAG(dag_id, schedule=None, start_date=START, catchup=False):

        @task(retries=2, retry_delay=timedelta(seconds=1), retry_policy=_policy())
        def load(**context: Any) -> str:
            if _count(context) < 2:
                raise ConnectionError("connection reset by the warehouse")
            return "loaded"

        load()

for dag_id, conn_id in (
    ("rw_outage_gate", GATE_CONNECTION),
    ("rw_outage_gate_long", LONG_OUTAGE_CONNECTION),
):
    with DAG(dag_id, schedule=None, start_date=START, catchup=False):
        gate = RetryWindowGateOperator(
            task_id="gate",
            targets={"load": None},  # the policy's estimates
            deadline=Deadline.computed(_deadline),
            guard=["load"],
            airflow_conn_id=conn_id,
        )

        @task(retries=2, retry_delay=timedelta(seconds=1), retry_policy=_policy())
        def load(**context: Any) -> str:
            _count(context)
            return "loaded"

        gate >> load()
