"""A scheduled DAG whose Airflow deadline alerts are also its retry window's deadlines.

The scheduler creates the run (today's, catchup off) and with it one deadline row
per alert. Three tasks use them:

* ``load`` fails its first try with a retryable error; its policy takes the
  ``positions ready`` alert (logical date + interval) and jitters the wait;
* ``gate`` runs after it and decides on the ``regulator cutoff`` alert (a fixed
  datetime with a negative interval), read back through the REST API;
* ``keep_rows`` fails, so the run fails and Airflow keeps its deadline rows (it
  prunes them after a success). The ``within four hours`` alert (the run's
  queued_at) has a row too, though no task may use it: a policy naming it is
  refused when the DAG is parsed.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pendulum
from airflow.sdk import DAG, DeadlineAlert, DeadlineReference, SyncCallback, task

from airflow_retrywindow import Deadline, RetryWindowGateOperator, RetryWindowPolicy, Work

#: every deadline lies in the future, so no callback ever runs
NEVER = SyncCallback("rw_deadline_alert.never_called")
READY = DeadlineAlert(
    reference=DeadlineReference.DAGRUN_LOGICAL_DATE,
    interval=timedelta(days=2, hours=6),
    callback=NEVER,
    name="positions ready",
)
CUTOFF = DeadlineAlert(
    reference=DeadlineReference.FIXED_DATETIME(datetime(2030, 1, 2, 6, tzinfo=timezone.utc)),
    interval=timedelta(minutes=-30),
    callback=NEVER,
    name="regulator cutoff",
)
QUEUED = DeadlineAlert(
    reference=DeadlineReference.DAGRUN_QUEUED_AT,
    interval=timedelta(hours=4),
    callback=NEVER,
    name="within four hours",
)
#: the first wait, and how far jitter may lengthen it
RETRY_DELAY = timedelta(seconds=4)
JITTER = 0.5


def never_called(**_: object) -> None:
    """The alerts' callback; the deadlines are too far away for it to run."""


def _policy(deadline: Deadline, *, jitter: float = 0.0) -> RetryWindowPolicy:
    return RetryWindowPolicy(
        deadline=deadline,
        duration=timedelta(seconds=5),
        validation=timedelta(seconds=1),
        safe_repeat=True,
        jitter=jitter,
    )


with DAG(
    "rw_deadline_alert",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    deadline=[READY, CUTOFF, QUEUED],
    tags=["retry-window-test"],
):

    @task(
        retries=2,
        retry_delay=RETRY_DELAY,
        retry_exponential_backoff=2,
        max_retry_delay=timedelta(seconds=60),
        retry_policy=_policy(Deadline.dag_alert("positions ready"), jitter=JITTER),
    )
    def load(ti=None):  # type: ignore[no-untyped-def]
        if ti.try_number == 1:
            raise ConnectionError("positions database closed the connection")

    @task
    def keep_rows() -> None:
        raise RuntimeError("fails on purpose: a failed run keeps its deadline rows")

    gate = RetryWindowGateOperator(
        task_id="gate",
        # the gate answers to another alert than load's policy: said explicitly
        targets={
            "load": Work.override(
                reason="the gate answers to the regulator's cutoff", deadline=CUTOFF
            )
        },
        deadline=CUTOFF,
        guard=[],
    )
    load() >> gate
    keep_rows()
