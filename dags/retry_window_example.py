"""Daily fund-positions delivery, with every retry decided by the retry window gate.

The six situations of the exercise, on a real Airflow, with no external job: each
task simulates its outcome deterministically from the run (never from ``now()``).

* ``report`` fails once with a retryable error and waits out its backoff;
* ``load`` is a WRITE_APPEND load not claimed safe to repeat: its policy refuses the
  blind retry, ``reconcile_load`` confirms nothing was appended, and the
  ``load_retry_window`` sensor lets ``retry_load`` repeat it (same client job id)
  only if it still fits the deadline; otherwise ``communicate_impact`` runs;
* ``append`` loses its confirmation (``OutcomeUnknown``): reconcile, never retry;
* ``archive`` runs out of attempts;
* ``monitor`` is judged from an observation that is older than allowed;
* ``transform`` succeeds, and its output still needs validation.

``retry_gate`` publishes the decision table for the whole run and short-circuits
``rerun_everything``: the request to "just re-run everything".

Durations are seconds so a run takes about a minute. The delivery deadline is
``params.deadline_seconds`` after the run is triggered; in production it would be
a business time such as ``Deadline.daily_at("06:00", tz="Europe/Lisbon")``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import DAG, Param, task

from airflow_retrywindow import (
    Deadline,
    OutcomeUnknown,
    RetryWindowGateOperator,
    RetryWindowPolicy,
    RetryWindowSensor,
    Work,
)

POOL = "positions_db"  # 2 slots: one heavy extraction or two light tasks at once
RETRIES = {
    "retries": 3,
    "retry_delay": timedelta(seconds=4),
    "retry_exponential_backoff": 2,
    "max_retry_delay": timedelta(seconds=12),
}


def delivery_deadline(context: Any) -> pendulum.DateTime:
    """The run's delivery deadline: ``deadline_seconds`` after it was triggered."""
    run = context["dag_run"]
    seconds = int(context["params"]["deadline_seconds"])
    return pendulum.instance(run.run_after).add(seconds=seconds)


DEADLINE = Deadline.computed(delivery_deadline)
#: after reconcile_load confirmed that nothing was appended, repeating the load
#: with its client job id is safe: the one value the sensor states differently
#: from load's policy, so it says so explicitly and why
RECONCILED = Work.override(
    reason="reconcile_load confirmed the failed load appended nothing", safe_repeat=True
)


def gated(duration: int, validation: int, *, safe_repeat: bool = True) -> RetryWindowPolicy:
    """The retry window policy every task of this DAG uses."""
    return RetryWindowPolicy(
        deadline=DEADLINE,
        duration=timedelta(seconds=duration),
        validation=timedelta(seconds=validation),
        safe_repeat=safe_repeat,
        unknown=[TimeoutError],
        terminal=[PermissionError],
    )


def client_job_id(context: Any, step: str) -> str:
    """A job id chosen by us, stable across attempts: the run's business date and step."""
    return f"positions-{context['ds_nodash']}-{step}-v1"


with DAG(
    dag_id="retry_window_example",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    params={"deadline_seconds": Param(150, type="integer", minimum=1)},
    tags=["retry-window", "example"],
    doc_md=__doc__,
):

    @task(pool=POOL, pool_slots=2, retry_policy=gated(10, 2), **RETRIES)
    def extract_positions(**context: Any) -> dict[str, Any]:
        """The heavy extraction: both slots of the positions database."""
        return {"business_date": context["ds"], "partition": f"positions/{context['ds']}"}

    @task(pool=POOL, pool_slots=1, retry_policy=gated(30, 5), **RETRIES)
    def transform(extracted: dict[str, Any]) -> dict[str, Any]:
        """Succeeds; its output still has to be validated before delivery."""
        return {**extracted, "transform_version": "v1"}

    @task(pool=POOL, pool_slots=1, retry_policy=gated(20, 5), **RETRIES)
    def report(transformed: dict[str, Any], **context: Any) -> str:
        """Fails once with a retryable error, then succeeds after the model's backoff."""
        if context["ti"].try_number == 1:
            raise ConnectionError("positions database closed the connection")
        return f"report for {transformed['business_date']}"

    @task(
        retry_policy=gated(35, 5, safe_repeat=False),
        retries=3,
        retry_delay=timedelta(seconds=15),
        retry_exponential_backoff=2,
        max_retry_delay=timedelta(seconds=60),
    )
    def load(transformed: dict[str, Any], **context: Any) -> None:
        """A WRITE_APPEND load that fails on its first attempt; repeating it blindly
        could append the rows twice, so its policy refuses the in-place retry."""
        job_id = client_job_id(context, "load")
        raise ConnectionError(f"load job {job_id} failed before its commit")

    @task(trigger_rule="all_done")
    def reconcile_load(**context: Any) -> str:
        """Look the load's job up by its client job id (simulated: it never committed)."""
        job_id = client_job_id(context, "load")
        print(f"job {job_id}: state FAILED, errorResult set, 0 rows appended")
        return job_id

    load_retry_window = RetryWindowSensor(
        task_id="load_retry_window",
        target="load",
        work=RECONCILED,  # duration, validation and deadline: from load's policy
        deferrable=True,
        poke_interval=2,
        timeout=300,
        # skip only retry_load, so communicate_impact's own trigger rule decides
        ignore_downstream_trigger_rules=False,
    )

    @task
    def retry_load(**context: Any) -> str:
        """The repeat of the load, with the same client job id (never a random one)."""
        return f"job {client_job_id(context, 'load')} resubmitted"

    @task(trigger_rule="all_skipped")
    def communicate_impact(**context: Any) -> str:
        """The delivery no longer fits: say so instead of retrying."""
        record = context["ti"].xcom_pull(task_ids="load_retry_window") or {}
        decisions = record.get("decisions") or [{}]
        decision = decisions[0].get("reason", "the retry window is closed")
        message = (
            f"Positions file for {context['ds']} will miss its deadline "
            f"({decision}). Affected: every fund whose positions load failed. "
            "Alternative: deliver yesterday's validated file flagged as stale, "
            "and the corrected file when the load completes."
        )
        print(message)
        return message

    @task(retry_policy=gated(10, 5), **RETRIES)
    def append(transformed: dict[str, Any], **context: Any) -> None:
        """The submission went out and its answer was lost: the outcome is unknown."""
        job_id = client_job_id(context, "append")
        raise OutcomeUnknown(f"no response after submitting {job_id}", remote_job_id=job_id)

    @task(retry_policy=gated(10, 2), retries=1, retry_delay=timedelta(seconds=2))
    def archive(transformed: dict[str, Any]) -> None:
        """Fails on every attempt, so it runs out of attempts."""
        raise ConnectionError("archive bucket unavailable")

    @task(retry_policy=gated(5, 0), **RETRIES)
    def monitor() -> str:
        """Watches a remote job; the gate judges it from a handed-in observation."""
        return "remote job still running"

    @task
    def observe_monitor(**context: Any) -> dict[str, Any]:
        """The last observation of the monitored job, a minute before the run was
        triggered: older than the gate's allowed ten seconds."""
        seen = pendulum.instance(context["dag_run"].run_after).subtract(minutes=1)
        return {"monitor": {"state": "running", "observed_at": seen.isoformat()}}

    retry_gate = RetryWindowGateOperator(
        task_id="retry_gate",
        # each target's estimate and the deadline come from its RetryWindowPolicy
        targets=["report", "load", "append", "archive", "monitor", "transform"],
        max_observation_age=timedelta(seconds=10),
        observations="{{ ti.xcom_pull(task_ids='observe_monitor') | tojson }}",
        work_unit={
            "business_date": "{{ ds }}",
            "input_partition": "positions/{{ ds }}",
            "transform_version": "v1",
            "destination": "warehouse.fund_positions",
            "remote_job_id": "positions-{{ ds_nodash }}-load-v1",
        },
        guard={"rerun_everything": ["report", "load", "append", "archive", "monitor", "transform"]},
        trigger_rule="all_done",
    )

    @task
    def rerun_everything() -> None:
        """The blind "just re-run everything": runs only if every target may retry now."""

    extracted = extract_positions()
    transformed = transform(extracted)
    failed_load = load(transformed)
    impact = communicate_impact()
    failed_load >> reconcile_load() >> load_retry_window >> retry_load() >> impact
    (
        [
            report(transformed),
            failed_load,
            append(transformed),
            archive(transformed),
            monitor(),
            observe_monitor(),
            impact,
        ]
        >> retry_gate
        >> rerun_everything()
    )
