"""Sensors holding retries: each target really fails, then its sensor decides.

The ``wait_*`` sensors (deferrable, short, poke, reschedule) each wait out a backoff of
their target and let the retry through; they run one after another, and before anything
else. Each target stops the run's clock as it fails (``settling.stop_clock``), so its
sensor finds the whole backoff to wait however late a busy machine starts it; the test
sets the clock running from the wait's end once the sensor said how it waits.
``wait_broken`` skips the retry of a terminal failure, with no work and no deadline of
its own: both are its target's ``RetryWindowPolicy``'s; ``wait_late`` and
``wait_late_hard`` time out on a one-hour backoff.

``broken`` and its sensor need retry policies (Airflow 3.3): older Airflow has the rest.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, task
from settling import stop_clock

from airflow_retrywindow import (
    Deadline,
    RetryWindowPolicy,
    RetryWindowSensor,
    TerminalFailure,
    Work,
)
from airflow_retrywindow.version_compat import AIRFLOW_V_3_3_PLUS, AirflowFailException

DEADLINE = Deadline.after_data_interval_end(hours=6)
QUICK = Work(duration=timedelta(minutes=1), validation=timedelta(seconds=30), safe_repeat=True)
#: each mode's backoff, all of it left when its sensor looks on the stopped clock: the
#: deferrable sensor's as long as the wait it would sleep in the worker ([retry_window]
#: sensor_short_wait, 10 s in the test's run), so it defers; the others' a second, which
#: with the model's rounding of the end and the Date's second stays under it
BACKOFF_SECONDS = {"deferred": 10, "short": 1, "poke": 1, "reschedule": 1}

with DAG(
    "rw_gate_sensor",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["retry-window-test"],
):
    previous = None
    for mode, backoff in BACKOFF_SECONDS.items():

        @task(
            task_id=f"append_{mode}",
            trigger_rule="all_done",
            retries=1,
            retry_delay=timedelta(seconds=backoff),
        )
        def append() -> None:
            stop_clock()  # its sensor looks at the instant append failed
            raise AirflowFailException("append failed; retry after the backoff")

        wait = RetryWindowSensor(
            task_id=f"wait_{mode}",
            target=f"append_{mode}",
            work=QUICK,
            deadline=DEADLINE,
            deferrable=mode in ("deferred", "short"),
            mode="reschedule" if mode == "reschedule" else "poke",
            poke_interval=600,
            timeout=120,
            trigger_rule="all_done",
        )

        @task(task_id=f"retry_{mode}")
        def retry() -> str:
            return "appended"

        first = append()
        if previous is not None:
            previous >> first
        first >> wait >> (previous := retry())

    if AIRFLOW_V_3_3_PLUS:

        @task(
            retries=2,
            retry_delay=timedelta(seconds=2),
            retry_policy=RetryWindowPolicy(
                deadline=Deadline.after_data_interval_end(hours=5),
                duration=90,
                validation=45,
                safe_repeat=False,
            ),
        )
        def broken() -> None:
            raise TerminalFailure("the destination table was dropped")

        wait_broken = RetryWindowSensor(
            task_id="wait_broken", target="broken", trigger_rule="all_done"
        )

        @task
        def retry_broken() -> str:
            return "never"

        @task
        def after_broken() -> str:
            return "never either"

        broken_task = broken()
        previous >> broken_task
        broken_task >> wait_broken >> retry_broken() >> after_broken()

    @task(retries=1, retry_delay=timedelta(hours=1))
    def late() -> None:
        raise AirflowFailException("failed; the next attempt may start in an hour")

    late_task = late()
    previous >> late_task
    for soft in (True, False):
        sensor = RetryWindowSensor(
            task_id="wait_late" if soft else "wait_late_hard",
            target="late",
            work=QUICK,
            deadline=DEADLINE,
            timeout=30,
            soft_fail=soft,
            trigger_rule="all_done",
        )

        @task(task_id="retry_late" if soft else "retry_late_hard")
        def retry_late() -> str:
            return "never"

        late_task >> sensor >> retry_late()
