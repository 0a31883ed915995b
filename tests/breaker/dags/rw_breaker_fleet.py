"""A fleet that shares one dependency: the stand-in at ``RW_FLEET_STANDIN``.

``rw_breaker_a`` and ``rw_breaker_b``: the gated task ``call`` mapped over
``RW_FLEET_MAP_INDEXES`` map indexes (read when the file is parsed) in the breaker pool
``positions_api``, ``retries=3``, ``retry_delay=15 s`` and a deadline
``conf["deadline_in"]`` seconds after the run. ``rw_breaker_plain``: the same task with
Airflow's own retries, in the pool ``positions_plain``, which is no breaker. Each try
asks the endpoint ``conf["endpoint"]`` once, naming its DAG, task and try, and fails on
anything but 200.
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
MAP_INDEXES = int(os.environ.get("RW_FLEET_MAP_INDEXES", "30"))
RETRIES = {"retries": 3, "retry_delay": timedelta(seconds=15)}


def _deadline(context):  # type: ignore[no-untyped-def]
    run = context["dag_run"]
    return run.run_after + timedelta(seconds=float(run.conf["deadline_in"]))


def _ask(number: int, context: Any) -> str:
    ti, conf = context["ti"], context["dag_run"].conf
    url = (
        f"{os.environ['RW_FLEET_STANDIN']}/{conf.get('endpoint', 'gated')}"
        f"?dag={ti.dag_id}&task=call[{number}]&try={ti.try_number}"
    )
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.read().decode()
    except urllib.error.HTTPError as error:
        raise ConnectionError(f"positions API answered {error.code}") from None


# every map index may run at once: the pools' slots are the only bound
for dag_id in ("rw_breaker_a", "rw_breaker_b"):
    with DAG(dag_id, schedule=None, start_date=START, catchup=False, max_active_tasks=1000):

        @task(
            pool="positions_api",
            retry_policy=RetryWindowPolicy(
                deadline=Deadline.computed(_deadline),
                duration=timedelta(seconds=5),
                validation=timedelta(seconds=5),
                safe_repeat=True,
            ),
            **RETRIES,
        )
        def call(number: int, **context: Any) -> str:
            return _ask(number, context)

        call.expand(number=list(range(MAP_INDEXES)))

with DAG("rw_breaker_plain", schedule=None, start_date=START, catchup=False, max_active_tasks=1000):

    @task(pool="positions_plain", **RETRIES)
    def call(number: int, **context: Any) -> str:
        return _ask(number, context)

    call.expand(number=list(range(MAP_INDEXES)))
