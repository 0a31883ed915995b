"""A DAG whose failures carry credentials in six syntaxes no shape list covered.

``syntaxes`` fails on every try, under ``RetryWindowPolicy``, with two of them a
try: a URL fragment's ``#access_token=``, a Python dict repr's ``'password'``, a
libpq DSN's ``password=``, an Azure connection string's ``AccountKey=...;``, an
``X-Api-Key:`` header line and a ``Cookie:`` header line. The credentials reach
the task only through the services' environment (``RW_SCHEDULER_SYNTAX_CREDENTIALS``,
a JSON object the test writes), never through the DAG's code or the run's conf.
"""

from __future__ import annotations

import json
import os
from datetime import timedelta

import pendulum
from airflow.sdk import DAG, task

from airflow_retrywindow import Deadline, RetryWindowPolicy

START = pendulum.datetime(2026, 1, 1, tz="UTC")
CREDENTIALS_ENV = "RW_SCHEDULER_SYNTAX_CREDENTIALS"


def _deadline(context):  # type: ignore[no-untyped-def]
    run = context["dag_run"]
    return run.run_after + timedelta(seconds=float(run.conf["deadline_in"]))


def _failure(try_number: int) -> Exception:
    """Two of the six texts on each try, short enough to be kept whole."""
    found = json.loads(os.environ.get(CREDENTIALS_ENV, "{}"))
    texts = [
        f"redirected to https://app.example.test/cb#access_token={found['fragment']}&state=s42",
        f"bad settings { ({'user': 'etl', 'password': found['dict_repr']})!r}",
        f"connect failed: host=db.example.test user=etl password={found['dsn']} dbname=wh",
        f"AccountName=acct;AccountKey={found['account_key']};EndpointSuffix=core.windows.net",
        f"403 Forbidden, sent:\nX-Api-Key: {found['api_key_header']}\nAccept: application/json",
        f"401, sent:\nCookie: session={found['cookie']}; theme=dark\nAccept: text/html",
    ]
    first = 2 * (try_number - 1)
    return ConnectionError("\n".join(texts[first : first + 2]))


with DAG(
    "rw_sched_credential_syntaxes",
    schedule=None,
    start_date=START,
    catchup=False,
    tags=["retry-window-test"],
):

    @task(
        retries=2,
        retry_delay=timedelta(seconds=1),
        retry_policy=RetryWindowPolicy(
            deadline=Deadline.computed(_deadline),
            duration=timedelta(seconds=1),
            validation=timedelta(seconds=1),
            safe_repeat=True,
        ),
    )
    def syntaxes(**context):  # type: ignore[no-untyped-def]
        ti = context["ti"]
        with open(context["dag_run"].conf["counter"], "a") as out:
            out.write(f"{ti.task_id} try {ti.try_number} pid {os.getpid()}\n")
        raise _failure(int(ti.try_number))

    syntaxes()
