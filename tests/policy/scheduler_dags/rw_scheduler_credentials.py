"""A DAG whose failures and observations carry credentials, the way ordinary libraries show them.

The credentials reach the tasks only through the services' environment
(``RW_SCHEDULER_CREDENTIALS``, a JSON object the test writes), never through the
DAG's code, its arguments or the run's conf: whatever of them the metadata DB
or a task log holds got there through a path the provider must close.

* ``leaks`` fails on every try, under ``RetryWindowPolicy``, with what a client
  library says: a presigned URL in a ``requests`` error, a header dict with a
  bearer token, a URL whose userinfo password holds an unencoded ``/`` and ``@``.
* ``retry_gate`` decides ``load`` on an explicit observation whose ``source`` holds
  userinfo, with a unit of work holding a value registered with ``mask_secret``;
  both arrive through templates, as a reconciliation's findings would.
* ``lookalike`` returns a value with a decision record's keys that is not one.
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
from typing import Any

import pendulum
import requests
from airflow.sdk import DAG, task

# the import Airflow 3.3 documents for DAG authors (airflow.sdk exports none)
from airflow.sdk.log import mask_secret

from airflow_retrywindow import Deadline, RetryWindowGateOperator, RetryWindowPolicy

START = pendulum.datetime(2026, 1, 1, tz="UTC")
CREDENTIALS_ENV = "RW_SCHEDULER_CREDENTIALS"


def _credentials() -> dict[str, str]:
    return dict(json.loads(os.environ.get(CREDENTIALS_ENV, "{}")))


# registered when the file is parsed, in every process that parses it: the task
# process included, as a DAG author registers a token their DAG uses
if delivery_token := _credentials().get("delivery_token"):
    mask_secret(delivery_token)


def _deadline(context):  # type: ignore[no-untyped-def]
    run = context["dag_run"]
    return run.run_after + timedelta(seconds=float(run.conf["deadline_in"]))


def _policy() -> RetryWindowPolicy:
    return RetryWindowPolicy(
        deadline=Deadline.computed(_deadline),
        duration=timedelta(seconds=1),
        validation=timedelta(seconds=1),
        safe_repeat=True,
    )


def _forbidden_presigned_get(found: dict[str, str]) -> Exception:
    """What ``requests`` raises for a 403 on a presigned S3 URL."""
    answer = requests.Response()
    answer.status_code, answer.reason = 403, "Forbidden"
    answer.url = (
        "https://bucket.s3.amazonaws.com/positions.csv?X-Amz-Algorithm=AWS4-HMAC-SHA256"
        f"&X-Amz-Credential={found['amz_credential']}%2F20261101%2Fus-east-1%2Fs3%2Faws4_request"
        f"&X-Amz-Security-Token={found['amz_token']}&X-Amz-Signature={found['amz_signature']}"
    )
    try:
        answer.raise_for_status()
    except requests.HTTPError as error:
        return error
    raise AssertionError("a 403 answer must raise")


def _failure(try_number: int) -> Exception:
    found = _credentials()
    if try_number == 1:
        return _forbidden_presigned_get(found)
    if try_number == 2:
        headers = {"Authorization": f"Bearer {found['bearer']}", "Accept": "application/json"}
        return ConnectionError(f"POST https://api.example.test/v2/loads failed, headers {headers}")
    return ConnectionError(
        f"could not reach https://etl:{found['url_password']}@warehouse.example.test:8443/load"
    )


def _observed_load() -> str:
    """A reconciliation's finding about ``load``, seen just now at a source with userinfo."""
    now = pendulum.now("UTC")
    source = f"https://etl:{_credentials()['source_password']}@jobs.example.com/v1/jobs/positions"
    observation = {
        "state": "retryable",
        "observed_at": now.subtract(seconds=1).isoformat(),
        "finished_at": now.subtract(minutes=2).isoformat(),
        "attempts": 1,
        "source": source,
    }
    return json.dumps({"load": observation})


def _delivery_token() -> str:
    return _credentials()["delivery_token"]


with DAG(
    "rw_sched_credentials",
    schedule=None,
    start_date=START,
    catchup=False,
    tags=["retry-window-test"],
    user_defined_macros={"observed_load": _observed_load, "delivery_token": _delivery_token},
):

    @task(retries=2, retry_delay=timedelta(seconds=1), retry_policy=_policy())
    def leaks(**context):  # type: ignore[no-untyped-def]
        ti = context["ti"]
        with open(context["dag_run"].conf["counter"], "a") as out:
            out.write(f"{ti.task_id} try {ti.try_number} pid {os.getpid()}\n")
        raise _failure(int(ti.try_number))

    @task(retries=2, retry_delay=timedelta(seconds=1), retry_policy=_policy())
    def load() -> str:
        return "loaded"

    @task
    def lookalike() -> dict[str, Any]:
        # a user's value with a decision record's keys, naming this task as its gate
        return {
            "gate": "lookalike",
            "decisions": [{"taskId": "load", "decision": "made-up-decision"}],
            "fixtures": "none",
            "asOf": "yesterday",
            "deadline": 1700000000,
            "guard": [
                {"taskId": "load", "targets": 3, "action": "run"},
                {"taskId": "load", "targets": "preload", "action": "run"},
            ],
        }

    gate = RetryWindowGateOperator(
        task_id="retry_gate",
        targets=["load"],
        observations="{{ observed_load() }}",
        work_unit={"business_date": "{{ ds }}", "delivery_token": "{{ delivery_token() }}"},
    )
    leaks()
    lookalike()
    gate >> load()
