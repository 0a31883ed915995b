"""DAGs of one resumable job each: gated by a RetryWindowPolicy, or plain Airflow.

Each DAG runs one ``StandInJobOperator`` with ``retries=2``. What its job does
and what goes wrong comes from the run's conf (see ``stand_in_job_operator``);
a gated run's deadline is ``run_after + conf["deadline_in"]`` seconds. The
``rw_plain_*`` DAGs are the same tasks without a retry policy: Airflow's own
retries, for the baseline.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG
from stand_in_job_operator import StandInJobOperator

from airflow_retrywindow import Deadline, RetryWindowPolicy

START = pendulum.datetime(2026, 1, 1, tz="UTC")
#: DAG id -> the policy's safe_repeat claim, or None for no retry policy (plain Airflow)
DAGS: dict[str, bool | None] = {
    "rw_resumable_killed_running": True,
    "rw_resumable_lost_then_failed_safe": True,
    "rw_resumable_lost_then_failed_unsafe": False,
    "rw_resumable_lost_before_id": True,
    "rw_resumable_deadline": True,
    "rw_resumable_cleared": True,
    "rw_resumable_short_backoff": True,
    "rw_plain_killed_running": None,
    "rw_plain_lost_then_failed": None,
    "rw_plain_lost_before_id": None,
    "rw_plain_deadline": None,
}


def _deadline(context):  # type: ignore[no-untyped-def]
    run = context["dag_run"]
    return run.run_after + timedelta(seconds=float(run.conf["deadline_in"]))


def _policy(safe_repeat: bool) -> RetryWindowPolicy:
    return RetryWindowPolicy(
        deadline=Deadline.computed(_deadline),
        duration=timedelta(seconds=60),
        validation=timedelta(seconds=5),
        safe_repeat=safe_repeat,
        # the stand-in service's word for a failed job: no failure word is assumed
        failed_statuses=["FAILED"],
    )


#: a retry_delay other than 10 s: 2 s reschedules a try soon enough for Airflow 3.3.2's
#: scheduler to fail it by its race, which the next try's start must recognise
RETRY_DELAY = {"rw_resumable_short_backoff": 2}

for dag_id, safe_repeat in DAGS.items():
    with DAG(dag_id, schedule=None, start_date=START, catchup=False, tags=["retry-window-test"]):
        StandInJobOperator(
            task_id="job",
            # room for a try lost to the race, and one more
            retries=3 if dag_id in RETRY_DELAY else 2,
            # 10 s: a 2 s backoff meets an Airflow 3.3.2 race (see the test module)
            retry_delay=timedelta(seconds=RETRY_DELAY.get(dag_id, 10)),
            retry_policy=None if safe_repeat is None else _policy(safe_repeat),
        )
