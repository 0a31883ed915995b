"""A shared API goes down: its pool's breaker holds every load, probes, then recovers.

Four gated loads share the pool ``positions_api``, which is a breaker pool: it stands for
the API they share. Each asks the positions API once per try and fails on anything but
200. When the API is down the first tries fail, and after three refused calls the
breaker opens: the pool's slots go to 0, so every load of the pool, retries and first
tries alike, waits in Airflow's queue with no worker and no trigger, and no try is
spent. Once a round the breaker opens one slot for a probe; when a probe succeeds it
recovers (two slots, then twice as many each round, up to the pool's size).

A breaker pool needs two things, both in ``make demo``'s stack: the pool named in
``[retry_window] breaker_pools`` (there with a 15 s round, so that the day takes about
two minutes: ``{"positions_api": {"round": 15}}``; the default round is 60 s), and the
controller's DAG file beside this one (``retry_window_pool_breakers.py``).

The API's URL is the run's ``conf["api"]``: ``make demo`` points it at a loopback
stand-in that refuses every call (503) until the breaker has opened and one of its
probes was refused, then answers 200 (``devstack/outage_day.py``).
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
