"""Daily fund-positions delivery, with every retry decided by the retry window gate.

The situations of the exercise on a real Airflow, with no external job: a small
stand-in for the warehouse's job API (``simulated_*`` below) answers from the
run's params, so each day's outcome is deterministic and never depends on
``now()``.

* ``report`` fails once with a retryable error and waits out its backoff;
* ``load`` is a WRITE_APPEND job, submitted as ``positions_load_<date>_v3_a1``;
  it is not claimed safe to repeat, so its policy refuses the blind retry.
  ``reconcile_load`` looks that job up and hands what it found to the
  ``load_retry_window`` sensor as an observation:

  - the job FAILED with nothing appended: the sensor waits out the backoff and
    lets ``retry_load`` submit the *next* predictable id, ``..._a2``, if the
    repeat still fits the deadline and the dry run (``dry_run_load``) fits the
    approved budget of 200 GB; ``validate_load`` then checks the rows;
  - the job had in fact committed: nothing is repeated; ``validate_load`` checks
    the rows the first attempt appended;
  - the repeat no longer fits the deadline, or its dry run estimates 260 GB
    against the approved 200: ``communicate_impact`` says so instead;

* ``append`` sits behind its own gate, ``append_gate``, with ``reconcile_append``
  in front of it. Its submission goes out and the answer is lost
  (``OutcomeUnknown``), so its policy refuses the retry. Clear ``append`` *with
  upstream* (extract and transform run again too: cheap here): the
  reconciliation finds the lost submission committed, and the gate skips the
  repeat instead of appending the rows twice;
* ``archive`` runs out of attempts;
* ``monitor`` is judged from an observation that is older than allowed;
* ``transform`` succeeds, and its output still needs validation.

``retry_gate`` publishes the decision table for the whole run and short-circuits
``rerun_everything``: the request to "just re-run everything".

Durations are seconds so a run takes about half a minute. The delivery deadline
is ``params.deadline_seconds`` after the run is triggered; in production it would
be a business time such as ``Deadline.daily_at("06:00", tz="Europe/Lisbon")``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import DAG, Param, task

from airflow_retrywindow import (
    Budget,
    Deadline,
    OutcomeUnknown,
    RetryWindowGateOperator,
    RetryWindowPolicy,
    RetryWindowSensor,
    Work,
)

POOL = "positions_db"  # 2 slots: one heavy extraction or two light tasks at once
TRANSFORM_VERSION = "v3"
DESTINATION = "warehouse.fund_positions"
RETRIES = {
    "retries": 3,
    "retry_delay": timedelta(seconds=4),
    "retry_exponential_backoff": 2,
    "max_retry_delay": timedelta(seconds=12),
}
#: the bytes a repeat of the load may read, as approved; raised only by whoever
#: approves the budget, never by the DAG on a retry
APPROVED_LOAD_GB = 200
#: the key under which a task records the job it submitted, before waiting for it
SUBMITTED = "submitted_job"


def delivery_deadline(context: Any) -> pendulum.DateTime:
    """The run's delivery deadline: ``deadline_seconds`` after it was triggered."""
    run = context["dag_run"]
    seconds = int(context["params"]["deadline_seconds"])
    return pendulum.instance(run.run_after).add(seconds=seconds)


DEADLINE = Deadline.computed(delivery_deadline)
#: after reconcile_load confirmed that nothing was appended, repeating the load
#: with the next job id is safe: the one value the sensor states differently
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


def client_job_id(context: Any, step: str, attempt: int) -> str:
    """A job id we choose, predictable from the unit of work and the attempt.

    The service refuses a second job with the same id, so a lost answer can be
    looked up and a duplicate submission is detected. A repeat gets the next
    attempt's id, and only once the earlier job is confirmed failed.
    """
    return f"positions_{step}_{context['ds_nodash']}_{TRANSFORM_VERSION}_a{attempt}"


def record_submission(context: Any, job_id: str) -> None:
    """Keep the id of the submitted job in XCom, so a reconciliation can find it."""
    at = pendulum.now("UTC").isoformat()
    context["ti"].xcom_push(key=SUBMITTED, value={"job_id": job_id, "submitted_at": at})


def observation(state: str, submitted: dict[str, Any], source: str) -> dict[str, Any]:
    """A reconciliation's finding, in the shape the gate and sensor take as observations.

    The stand-in's jobs end as soon as they are submitted; a real reconciliation
    takes ``finished_at`` from the job's end time in the job API.
    """
    return {
        "state": state,
        "observed_at": pendulum.now("UTC").isoformat(),
        "finished_at": submitted["submitted_at"],
        "source": source,
    }


# -- the stand-in for the warehouse's job API -------------------------------------------


def simulated_load_job(context: Any, job_id: str) -> tuple[bool, str]:
    """What the job API says of the load job: whether it committed, and in words.

    The ``load_committed`` param decides.
    """
    if context["params"]["load_committed"]:
        return True, f"job {job_id}: DONE, 1204 rows appended to {DESTINATION}"
    return False, f"job {job_id}: FAILED, errorResult set, 0 rows appended"


def simulated_dry_run_gb(context: Any) -> int:
    """The bytes a dry run of the load's query estimates: the ``dry_run_gb`` param."""
    return int(context["params"]["dry_run_gb"])


with DAG(
    dag_id="retry_window_example",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    params={
        "deadline_seconds": Param(150, type="integer", minimum=1),
        "load_committed": Param(
            False, type="boolean", description="simulated: the failed load had committed"
        ),
        "dry_run_gb": Param(
            180, type="integer", minimum=0, description="simulated: the repeat's dry-run estimate"
        ),
    },
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
        return {**extracted, "transform_version": TRANSFORM_VERSION}

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
        """A WRITE_APPEND job that loses its connection while it runs; repeating it
        blindly could append the rows twice, so its policy refuses the in-place retry."""
        job_id = client_job_id(context, "load", attempt=1)
        record_submission(context, job_id)
        raise ConnectionError(f"connection lost while waiting for job {job_id}")

    @task(trigger_rule="all_done")
    def reconcile_load(**context: Any) -> dict[str, Any] | None:
        """Look the load's job up by its id and report it as an observation of ``load``."""
        submitted = context["ti"].xcom_pull(task_ids="load", key=SUBMITTED)
        if not submitted:
            print("load submitted no job in this run: nothing to reconcile")
            return None
        committed, found = simulated_load_job(context, submitted["job_id"])
        print(found)
        # committed: its rows are in, nothing to repeat; otherwise confirmed failed
        state = "succeeded" if committed else "retryable"
        return {"load": observation(state, submitted, found)}

    @task
    def dry_run_load(**context: Any) -> int:
        """Estimate what the repeat of the load would read (a dry run: nothing runs)."""
        estimate = simulated_dry_run_gb(context)
        print(f"dry run of the load for {context['ds']}: {estimate} GB would be processed")
        return estimate

    load_retry_window = RetryWindowSensor(
        task_id="load_retry_window",
        target="load",
        work=RECONCILED,  # duration, validation and deadline: from load's policy
        observations="{{ ti.xcom_pull(task_ids='reconcile_load') | tojson }}",
        budget=Budget(
            limit=APPROVED_LOAD_GB,
            estimate="{{ ti.xcom_pull(task_ids='dry_run_load') }}",
            unit="GB",
        ),
        # the observation is read again after the backoff: allow for the wait
        max_observation_age=timedelta(minutes=2),
        deferrable=True,
        poke_interval=2,
        timeout=300,
        # skip only retry_load, so load_outcome's own trigger rule decides
        ignore_downstream_trigger_rules=False,
    )

    @task
    def retry_load(**context: Any) -> str:
        """The repeat: attempt 1 is confirmed failed, so it is attempt 2's id, never
        attempt 1's again and never a random one."""
        job_id = client_job_id(context, "load", attempt=2)
        record_submission(context, job_id)
        return f"job {job_id} submitted"

    @task.branch(trigger_rule="none_failed")
    def load_outcome(**context: Any) -> str:
        """Follow the sensor's decision: validate the rows once they are in, otherwise
        say that the delivery is late."""
        record = context["ti"].xcom_pull(task_ids="load_retry_window") or {}
        repeated = "retry_load" not in (record.get("skipped") or [])
        decided = (record.get("decisions") or [{}])[0].get("decision")
        committed = decided == "validate-output"  # the first attempt's rows are in
        return "validate_load" if repeated or committed else "communicate_impact"

    @task
    def validate_load(**context: Any) -> str:
        """The validation the model counts in: the rows of the business date are in,
        once each by record key (fund, instrument, date)."""
        message = f"{DESTINATION} partition {context['ds_nodash']}: 1204 rows, no duplicate keys"
        print(message)
        return message

    @task
    def communicate_impact(**context: Any) -> str:
        """The repeat may not run (deadline or budget): say so instead of retrying."""
        record = context["ti"].xcom_pull(task_ids="load_retry_window") or {}
        budget = record.get("budget") or {}
        if budget.get("verdict") == "budget-exceeded":
            reason = budget["reason"]  # never answered by raising the cap for a retry
        else:
            reason = ((record.get("decisions") or [{}])[0]).get("reason", "no retry window")
        message = (
            f"Positions file for {context['ds']} is held back, the load is not repeated "
            f"({reason}). "
            "Affected: every fund whose positions load failed. Alternative: deliver "
            "yesterday's validated file flagged as stale, and the corrected file when "
            "the load completes."
        )
        print(message)
        return message

    @task
    def reconcile_append(**context: Any) -> dict[str, Any] | None:
        """Before append is repeated, look up the job its last attempt submitted."""
        submitted = context["ti"].xcom_pull(task_ids="append", key=SUBMITTED)
        if not submitted:
            print("append has submitted no job in this run: nothing to reconcile")
            return None
        # the stand-in service: the submission whose answer was lost did commit
        found = f"job {submitted['job_id']}: DONE, 310 rows appended"
        print(found)
        return {"append": observation("succeeded", submitted, found)}

    append_gate = RetryWindowGateOperator(
        task_id="append_gate",
        targets=["append"],  # its estimate and the deadline come from its policy
        observations="{{ ti.xcom_pull(task_ids='reconcile_append') | tojson }}",
        work_unit={
            "business_date": "{{ ds }}",
            "destination": DESTINATION,
            "remote_job_id": f"positions_append_{{{{ ds_nodash }}}}_{TRANSFORM_VERSION}_a1",
        },
        # skip only append when refused; the rest of the run is not this gate's
        ignore_downstream_trigger_rules=False,
    )

    @task(retry_policy=gated(10, 5), **RETRIES)
    def append(transformed: dict[str, Any], **context: Any) -> None:
        """The submission went out and its answer was lost: the outcome is unknown."""
        job_id = client_job_id(context, "append", attempt=1)
        record_submission(context, job_id)
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
            "transform_version": TRANSFORM_VERSION,
            "destination": DESTINATION,
            "remote_job_id": f"positions_load_{{{{ ds_nodash }}}}_{TRANSFORM_VERSION}_a1",
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
    outcome = load_outcome()
    (
        failed_load
        >> reconcile_load()
        >> dry_run_load()
        >> load_retry_window
        >> retry_load()
        >> outcome
    )
    validated, impact = validate_load(), communicate_impact()
    outcome >> [validated, impact]
    appended = append(transformed)
    transformed >> reconcile_append() >> append_gate >> appended
    (
        [
            report(transformed),
            validated,
            impact,
            appended,
            archive(transformed),
            monitor(),
            observe_monitor(),
        ]
        >> retry_gate
        >> rerun_everything()
    )
