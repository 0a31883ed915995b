"""One DAG run that makes every kind of retry window metric a StatsD server should see.

* ``load`` fails retryably, but its next attempt (5 min, plus 1 min of
  validation) cannot finish before the deadline: the policy refuses
  (``deadline-infeasible``) with a negative slack.
* ``killed`` kills its own process on try 1, so Airflow retries it without the
  policy; the retry-start check refuses try 2 (``reconcile-remote``).
* ``gate`` (with a budget) and ``hold`` (a sensor) decide about ``load`` after it
  failed: ``deadline-infeasible`` again, with the pool and budget verdicts.
* ``broken_gate`` reads through a connection that does not exist: a gate error.

Before Airflow 3.3, which has no retry policies, ``load`` fails once with no retries
left and ``killed`` is left out: the gate and the sensor find ``load``'s attempts
exhausted.

The deadline is ``run_after + conf["deadline_in"]`` seconds.
"""

from __future__ import annotations

import os
import signal
from datetime import timedelta

import pendulum
from airflow.sdk import DAG, task

from airflow_retrywindow import (
    Budget,
    Deadline,
    RetryWindowGateOperator,
    RetryWindowPolicy,
    RetryWindowSensor,
    Work,
)
from airflow_retrywindow.version_compat import AIRFLOW_V_3_3_PLUS


def _deadline(context):  # type: ignore[no-untyped-def]
    run = context["dag_run"]
    return run.run_after + timedelta(seconds=float(run.conf["deadline_in"]))


DEADLINE = Deadline.computed(_deadline)
LOAD = Work(duration=timedelta(minutes=5), validation=timedelta(minutes=1), safe_repeat=True)
RETRIES = {"retries": 2, "retry_delay": timedelta(seconds=1)}
#: load's: its policy refuses the first retry; before Airflow 3.3 it has no retry left
LOAD_RETRIES = (
    {
        "retry_policy": RetryWindowPolicy(
            deadline=DEADLINE, duration=LOAD.duration, validation=LOAD.validation, safe_repeat=True
        ),
        **RETRIES,
    }
    if AIRFLOW_V_3_3_PLUS
    else {"retries": 0}
)

with DAG(
    "rw_metrics",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["retry-window-test"],
):

    @task(**LOAD_RETRIES)
    def load() -> None:
        raise ConnectionError("the warehouse closed the connection")

    if AIRFLOW_V_3_3_PLUS:

        @task(
            retry_policy=RetryWindowPolicy(
                deadline=DEADLINE, duration=1, validation=1, safe_repeat=True
            ),
            **RETRIES,
        )
        def killed(ti=None) -> str:  # type: ignore[no-untyped-def]
            if ti.try_number == 1:
                os.kill(os.getpid(), signal.SIGKILL)
            return "ran again"

        killed()

    gate = RetryWindowGateOperator(
        task_id="gate",
        targets={"load": LOAD},
        deadline=DEADLINE,
        guard=[],
        budget=Budget(limit=100, estimate=40, unit="GB"),
        trigger_rule="all_done",
    )
    hold = RetryWindowSensor(
        task_id="hold", target="load", work=LOAD, deadline=DEADLINE, trigger_rule="all_done"
    )
    broken_gate = RetryWindowGateOperator(
        task_id="broken_gate",
        targets={"load": LOAD},
        deadline=DEADLINE,
        guard=[],
        airflow_conn_id="rw_metrics_missing",
        trigger_rule="all_done",
    )

    @task
    def reload() -> str:
        return "never"

    failing = load()
    failing >> [gate, broken_gate]
    failing >> hold >> reload()
