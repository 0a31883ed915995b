"""A short outage of a shared API: the fleet's retries are held, probed, then released.

Four gated loads share the pool ``positions_api``: the pool is their shared
dependency. Each asks the positions API once per try and fails on anything but 200.
When the API is down, every first try fails; with three or more of the pool's task
instances failing the pool is ``open``, and a retry that starts is held at its start
(deferred to the triggerer: its try is not spent, and it holds no worker) unless it is
the round's probe. Once a probe succeeds the pool is ``recovering`` and the triggerer
wakes the held retries in waves.

The API's URL is the run's ``conf["api"]``: ``make demo`` points it at a loopback
stand-in that answers 503 until 40 s after the first retry reached it, then 200
(``devstack/fleet_outage.py``).
Its outage day sets the pool's round to 15 s so that the day takes about two minutes
(``[retry_window] dependency_pools = {"positions_api": {"round": 15}}``); the
default round is 60 s.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import DAG, task

from airflow_retrywindow import Deadline, RetryWindowPolicy

DAG_ID = "retry_window_outage"
#: the gated loads' pool: the API they share
POOL = "positions_api"
LOADS = 4
#: from the run: a deadline that leaves room for the outage and the retries after it
DEADLINE = timedelta(hours=1)


def _deadline(context: Any) -> Any:
    return context["dag_run"].run_after + DEADLINE


with DAG(
    DAG_ID,
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    doc_md=__doc__,
    tags=["retry-window", "example"],
):
    for number in range(LOADS):

        @task(
            task_id=f"load_{number}",
            pool=POOL,
            retries=3,
            retry_delay=timedelta(seconds=15),
            retry_policy=RetryWindowPolicy(
                deadline=Deadline.computed(_deadline),
                duration=timedelta(seconds=5),
                validation=timedelta(seconds=5),
                safe_repeat=True,  # a read: asking again changes nothing
            ),
        )
        def load(**context: Any) -> str:
            """Ask the positions API once; a 503 is a retryable failure."""
            ti = context["ti"]
            url = (
                f"{context['dag_run'].conf['api']}/positions"
                f"?dag={ti.dag_id}&task={ti.task_id}&try={ti.try_number}"
            )
            try:
                with urllib.request.urlopen(url, timeout=10) as answer:
                    return f"positions API answered {answer.status}"
            except urllib.error.HTTPError as error:
                raise ConnectionError(f"positions API answered {error.code}") from None

        load()
