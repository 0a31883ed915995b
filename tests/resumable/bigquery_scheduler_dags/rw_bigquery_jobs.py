"""DAGs of one real ``BigQueryInsertJobOperator`` each, gated by a ``RetryWindowPolicy``.

For the BigQuery jobs API stand-in (``devstack/bigquery_standin.py``), on a real
scheduler. Every task has ``force_rerun=False``, ``retries=2``, a short
``retry_delay`` and a configured ``job_id``, so the job id is the configured one
plus the md5 of the labelled configuration; ``..._a{{ ti.try_number }}`` gives each
try a new, predictable id. What each job does is scripted in the stand-in by the
configured id's prefix (``JOB_IDS`` without the template), and no prefix is the
prefix of another.

The policy's deadline is ``run_after + conf["deadline_in"]`` seconds. A dropped
connection (``requests.exceptions.ConnectionError``, anywhere in the exception's
chain) is an unknown outcome.

Where a case loses its worker, the task is ``KillableInsertJobOperator``: the
provider's operator, unchanged but for one fault on try 1 named by the run's conf
(``fault``): ``"kill-during-poll"`` SIGKILLs the task process at the first poll,
after the mixin stored the job id; ``"kill-after-submit"`` SIGKILLs it inside
``submit_job``, after the insert was answered and before the mixin stores the id.
"""

from __future__ import annotations

import copy
import os
import signal
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pendulum
from airflow.providers.google.cloud.operators.bigquery import BigQueryInsertJobOperator
from airflow.sdk import DAG
from google.cloud.bigquery import DEFAULT_RETRY

from airflow_retrywindow import Deadline, RetryWindowPolicy

START = pendulum.datetime(2026, 1, 1, tz="UTC")
CONFIGURATION = {"query": {"query": "SELECT 1", "useLegacySql": False}}
LOCATION = "EU"
KILL_DURING_POLL = "kill-during-poll"
KILL_AFTER_SUBMIT = "kill-after-submit"
PER_TRY = "_a{{ ti.try_number }}"
#: how long the client retries a poll whose answer is lost before the poll raises
LOST_POLL_GIVES_UP = 4.0


@dataclass(frozen=True)
class Task:
    """How one DAG's task is set up.

    :param job_id: the configured job id: its prefix, plus the try when ``per_try``.
    :param safe_repeat: the policy's claim.
    :param per_try: a new predictable id per try (``..._a{{ ti.try_number }}``).
    :param deferrable: the operator's deferrable mode (the trigger polls).
    :param killable: the thin subclass that honours the run's ``fault``.
    :param reattach: reattach to a PENDING or RUNNING job found by a 409.
    :param poll_gives_up: seconds the client retries a lost poll answer, else its default.
    :param retry_delay: Airflow's retry delay, the model's backoff, in seconds.
    """

    job_id: str
    safe_repeat: bool = True
    per_try: bool = True
    deferrable: bool = False
    killable: bool = False
    reattach: bool = False
    poll_gives_up: float | None = None
    retry_delay: float = 2


TASKS = {
    "bqs_killed_running": Task("bqs_killed_running", killable=True),
    # the retry-start check reschedules try 2 by the backoff: long enough that the
    # rescheduled start is queued after the scheduler has seen try 2's first exit
    "bqs_lost_then_failed_safe": Task("bqs_failed_safe", killable=True, retry_delay=10),
    "bqs_lost_then_failed_unsafe": Task("bqs_failed_unsafe", safe_repeat=False, killable=True),
    "bqs_lost_before_id": Task("bqs_before_id", killable=True),
    "bqs_deadline": Task("bqs_deadline"),
    "bqs_tolerated_errors": Task("bqs_tolerated", killable=True),
    "bqs_lost_answers": Task("bqs_lost_answers", reattach=True, poll_gives_up=LOST_POLL_GIVES_UP),
    "bqs_duplicate": Task("bqs_duplicate", per_try=False),
    "bqs_deferred_ok": Task("bqs_deferred_ok", deferrable=True),
    "bqs_deferred_error": Task("bqs_deferred_error", deferrable=True),
    "bqs_deferred_lost": Task("bqs_deferred_lost", deferrable=True, killable=True),
}
#: DAG id -> the configured job id (a template where the id carries the try)
JOB_IDS = {
    dag_id: task.job_id + (PER_TRY if task.per_try else "") for dag_id, task in TASKS.items()
}


def _fault(context: Any) -> str | None:
    """The fault the run's conf names for this try: only try 1 has one."""
    if int(context["ti"].try_number) != 1:
        return None
    fault = (context["dag_run"].conf or {}).get("fault")
    return str(fault) if fault else None


class KillableInsertJobOperator(BigQueryInsertJobOperator):
    """``BigQueryInsertJobOperator``, unchanged but for a SIGKILL of its own process on try 1."""

    def submit_job(self, context: Any) -> str:
        job_id = super().submit_job(context)
        if _fault(context) == KILL_AFTER_SUBMIT:
            self._die(f"job {job_id} was inserted and its id is not stored yet")
        return job_id

    def poll_until_complete(self, external_id: Any, context: Any) -> None:
        if _fault(context) == KILL_DURING_POLL:
            self._die(f"job {external_id} is stored and the poll starts")
        super().poll_until_complete(external_id, context)

    def _die(self, why: str) -> None:
        self.log.warning("Killing the task process with SIGKILL: %s", why)
        os.kill(os.getpid(), signal.SIGKILL)


def _deadline(context: Any) -> pendulum.DateTime:
    run = context["dag_run"]
    return pendulum.instance(run.run_after) + timedelta(seconds=float(run.conf["deadline_in"]))


def _policy(safe_repeat: bool) -> RetryWindowPolicy:
    return RetryWindowPolicy(
        deadline=Deadline.computed(_deadline),
        duration=timedelta(seconds=60),
        validation=timedelta(seconds=5),
        safe_repeat=safe_repeat,
        unknown=["requests.exceptions.ConnectionError"],
    )


for dag_id, task in TASKS.items():
    operator = KillableInsertJobOperator if task.killable else BigQueryInsertJobOperator
    extra: dict[str, Any] = {}
    if task.reattach:
        extra["reattach_states"] = {"PENDING", "RUNNING"}
    if task.poll_gives_up is not None:
        extra["result_retry"] = DEFAULT_RETRY.with_timeout(task.poll_gives_up)
    with DAG(dag_id, schedule=None, start_date=START, catchup=False, tags=["retry-window-test"]):
        operator(
            task_id="query",
            configuration=copy.deepcopy(CONFIGURATION),
            job_id=JOB_IDS[dag_id],
            force_rerun=False,
            location=LOCATION,
            deferrable=task.deferrable,
            poll_interval=0.5,
            retries=2,
            retry_delay=timedelta(seconds=task.retry_delay),
            retry_policy=_policy(task.safe_repeat),
            **extra,
        )
