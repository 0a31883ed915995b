"""One gated task mapped over many map indexes that share one API: a fleet in one DAG.

``rw_fleet_mapped``: the task ``load`` over ``RW_FLEET_MAP_INDEXES`` map indexes (200 by
default, read when the file is parsed), in the pool ``positions_api`` (their shared
dependency), ``retries=3``, ``retry_delay=15 s`` and a deadline ``conf["deadline_in"]``
seconds after the run. Each map index asks the API at ``conf["api"]`` once per try,
naming its task (``load[3]``) and try, and fails on anything but 200, as the tasks of
``rw_fleet.py`` do. ``benchmarks/fleet_outage.py`` runs it.
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

MAP_INDEXES = int(os.environ.get("RW_FLEET_MAP_INDEXES", "200"))


def _deadline(context):  # type: ignore[no-untyped-def]
    run = context["dag_run"]
    return run.run_after + timedelta(seconds=float(run.conf["deadline_in"]))


# every map index may run at once: the pool's slots are the only bound on the fleet
with DAG(
    "rw_fleet_mapped",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_tasks=MAP_INDEXES,
):

    @task(
        pool="positions_api",
        retry_policy=RetryWindowPolicy(
            deadline=Deadline.computed(_deadline),
            duration=timedelta(seconds=5),
            validation=timedelta(seconds=5),
            safe_repeat=True,
        ),
        retries=3,
        retry_delay=timedelta(seconds=15),
    )
    def load(number: int, **context: Any) -> str:
        ti = context["ti"]
        url = f"{context['dag_run'].conf['api']}?dag={ti.dag_id}&task=load[{number}]"
        try:
            with urllib.request.urlopen(f"{url}&try={ti.try_number}", timeout=10) as answer:
                return answer.read().decode()
        except urllib.error.HTTPError as error:
            raise ConnectionError(f"positions API answered {error.code}") from None

    load.expand(number=list(range(MAP_INDEXES)))
