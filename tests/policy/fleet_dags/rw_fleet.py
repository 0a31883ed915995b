"""Three DAGs whose tasks share one API: a loopback stand-in (``RW_FLEET_STANDIN``).

``rw_fleet_a`` and ``rw_fleet_b``: six gated tasks each (asking the endpoint the run's
``conf["endpoint"]`` names, ``gated`` by default), in the pool ``positions_api``
(their shared dependency), ``retries=3``, ``retry_delay=15 s`` and a deadline an hour
away. ``rw_fleet_plain``: three tasks doing the same with Airflow's own retries, in their
own pool and against their own endpoint (each burns its four tries: three show it). Every
body asks the stand-in once, naming its task and try, and fails on anything but 200.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import DAG, task

from airflow_retrywindow import Deadline, RetryWindowPolicy

START = pendulum.datetime(2026, 1, 1, tz="UTC")
GATED_POOL = "positions_api"
PLAIN_POOL = "positions_plain"
TASKS = 6
PLAIN_TASKS = 3
RETRIES = {"retries": 3, "retry_delay": timedelta(seconds=15)}


def _deadline(context):  # type: ignore[no-untyped-def]
    run = context["dag_run"]
    return run.run_after + timedelta(seconds=float(run.conf["deadline_in"]))


def _ask(endpoint: str, context: Any) -> str:
    ti = context["ti"]
    url = (
        f"{os.environ['RW_FLEET_STANDIN']}/{endpoint}"
        f"?dag={ti.dag_id}&task={ti.task_id}&try={ti.try_number}"
    )
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.read().decode()
    except urllib.error.HTTPError as error:
        raise ConnectionError(f"positions API answered {error.code}") from None


for dag_id in ("rw_fleet_a", "rw_fleet_b"):
    with DAG(dag_id, schedule=None, start_date=START, catchup=False):
        for number in range(TASKS):

            @task(
                task_id=f"load_{number}",
                pool=GATED_POOL,
                retry_policy=RetryWindowPolicy(
                    deadline=Deadline.computed(_deadline),
                    duration=timedelta(seconds=5),
                    validation=timedelta(seconds=5),
                    safe_repeat=True,
                ),
                **RETRIES,
            )
            def load(**context: Any) -> str:
                return _ask(context["dag_run"].conf.get("endpoint", "gated"), context)

            load()

with DAG("rw_fleet_plain", schedule=None, start_date=START, catchup=False):
    for number in range(PLAIN_TASKS):

        @task(task_id=f"load_{number}", pool=PLAIN_POOL, **RETRIES)
        def load_plain(**context: Any) -> str:
            return _ask("plain", context)

        load_plain()
