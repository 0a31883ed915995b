"""Tasks that fail and notify through RetryWindowNotifier, for a run on a real scheduler.

* ``long_load``: the next attempt cannot finish before the deadline
  (``deadline-infeasible``); its failure message holds a connection's password.
  Mailed through the SMTP provider's ``SmtpNotifier``.
* ``append``: its outcome is unknown (``reconcile-remote``); the message goes to a
  plain callable that appends it to the file named by ``conf["outbox"]``.
* ``flaky``: fails once and is retried after the model's backoff (``wait-backoff``);
  mailed from ``on_retry_callback``.
* ``unguarded``: no retry policy, so no decision; its failure message holds a
  secret registered with ``mask_secret``. Mailed all the same.

The run's deadline is ``run_after + conf["deadline_in"]`` seconds. The SMTP server,
the connections and the secret come from the environment the test starts Airflow with.
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
from typing import Any

import pendulum
from airflow.providers.smtp.notifications.smtp import SmtpNotifier
from airflow.sdk import DAG, Connection, task
from airflow.sdk.log import mask_secret

from airflow_retrywindow import Deadline, OutcomeUnknown, RetryWindowNotifier, RetryWindowPolicy
from airflow_retrywindow.notifications.message import Message

SMTP_CONN = "rw_notify_smtp"
API_CONN = "rw_notify_api"
SECRET_ENV = "RW_NOTIFY_SECRET"
TO = "oncall@example.test"
BUSINESS_DATE = "{{ dag_run.conf['business_date'] }}"


def _deadline(context: Any) -> Any:
    run = context["dag_run"]
    return run.run_after + timedelta(seconds=float(run.conf["deadline_in"]))


def _policy(duration: timedelta) -> RetryWindowPolicy:
    return RetryWindowPolicy(
        deadline=Deadline.computed(_deadline),
        duration=duration,
        validation=timedelta(seconds=1),
        safe_repeat=True,
    )


def _mail(**kwargs: Any) -> RetryWindowNotifier:
    return RetryWindowNotifier(
        SmtpNotifier(to=TO, from_email="airflow@example.test", smtp_conn_id=SMTP_CONN),
        work_unit={
            "business_date": BUSINESS_DATE,
            "remote_job_id": f"positions-{BUSINESS_DATE}-v1",
        },
        **kwargs,
    )


def _to_outbox(message: Message, context: Any) -> None:
    with open(context["dag_run"].conf["outbox"], "a", encoding="utf-8") as outbox:
        outbox.write(json.dumps({"subject": message.subject, "text": message.text}) + "\n")


GATED = {"retries": 3, "retry_delay": timedelta(seconds=2), "retry_exponential_backoff": 2}

with DAG(
    "rw_notify",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["retry-window-test"],
):

    @task(
        retry_policy=_policy(timedelta(minutes=5)),
        on_failure_callback=_mail(
            affected="the 40 funds of the positions file",
            alternative="deliver the validated funds now, the rest by 10:00",
        ),
        **GATED,
    )
    def long_load() -> None:
        api = Connection.get(API_CONN)  # Airflow registers its password with the masker
        raise ConnectionError(f"login to {api.host} as {api.login}:{api.password} was refused")

    @task(
        retry_policy=_policy(timedelta(seconds=1)),
        on_failure_callback=RetryWindowNotifier(_to_outbox),
        **GATED,
    )
    def append() -> None:
        raise OutcomeUnknown("load response lost after submission", remote_job_id="positions-a1")

    @task(
        retry_policy=_policy(timedelta(seconds=1)),
        on_retry_callback=_mail(),
        **GATED,
    )
    def flaky(ti: Any = None) -> str:
        if ti.try_number < 2:
            raise ConnectionError("service unavailable before the job was accepted")
        return "loaded"

    @task(on_failure_callback=_mail())
    def unguarded() -> None:
        secret = os.environ[SECRET_ENV]
        mask_secret(secret)
        raise ValueError(f"partition 20261201 rejected; session token {secret}")

    long_load()
    append()
    flaky()
    unguarded()
