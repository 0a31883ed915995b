"""Daily fund-positions delivery, with every retry decided by the retry window gate.

The situations of the exercise on a real Airflow, with no external service: a
small stand-in for the warehouse's job API (below) answers from the run's params,
so each day plays the same way. Every try of a task runs in a process of its own,
so the stand-in keeps its jobs in files, one JSON file per job under
``$AIRFLOW_HOME/stand-in-warehouse/<run id>/``.

* ``report`` fails once with a retryable error, which its rules (an ``ExceptionRetryPolicy``
  given to the window as ``classify=``) call retryable, and waits out its backoff;
* ``load`` is a WRITE_APPEND job on the stand-in warehouse, built on Airflow's
  ``ResumableJobMixin`` (``StandInLoadOperator`` below): it submits
  ``positions_load_<date>_v3_a<try>``, keeps the id in the task state store and
  polls the job. On try 1 its worker is lost while the job runs (the task process
  is SIGKILLed, as by the OOM killer or a lost node), so Airflow retries without
  asking its policy; the retry-start check reads the job once before try 2 runs:

  - the job still runs (it goes on to commit): ``observe-running``, try 2
    reconnects to it and submits nothing. One submission, and the load succeeds;
  - the job FAILED: a confirmed failure, but the load is not claimed safe to
    repeat, so its policy refuses (``reconcile-effects``). ``reconcile_load``
    looks the job up and hands what it found (nothing appended) to the
    ``load_retry_window`` sensor as an observation. The sensor waits out the
    backoff and lets ``retry_load`` submit the *next* attempt's id if the repeat
    still fits the deadline and the dry run (``dry_run_load``) fits the approved
    budget of 200 GB; ``validate_load`` then checks that exactly one job
    committed. When the repeat no longer fits the deadline, or its dry run
    estimates 260 GB against the approved 200, ``communicate_impact`` says so
    instead;

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

Durations are seconds so a run takes about a minute. The delivery deadline
is ``params.deadline_seconds`` after the run is triggered; in production it would
be a business time such as ``Deadline.daily_at("06:00", tz="Europe/Lisbon")``.
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import DAG, BaseOperator, Param, task

from airflow_retrywindow import (
    Budget,
    Deadline,
    OutcomeUnknown,
    RetryWindowGateOperator,
    RetryWindowPolicy,
    RetryWindowSensor,
    Work,
)
from airflow_retrywindow.policies.retry_policy import refuse_before_retry_policies

try:  # Airflow 3.3's retry policies and resumable jobs (AIP-105)
    from airflow.sdk import ExceptionRetryPolicy, ResumableJobMixin, RetryAction, RetryRule
except ImportError:  # an older Airflow: this file's import error says why, not which name
    refuse_before_retry_policies()
    raise

POOL = "positions_db"  # 2 slots: one heavy extraction or two light tasks at once
TRANSFORM_VERSION = "v3"
DESTINATION = "warehouse.fund_positions"
RETRIES = {
    "retries": 3,
    "retry_delay": timedelta(seconds=4),
    "retry_exponential_backoff": 2,
    "max_retry_delay": timedelta(seconds=12),
}
#: seconds before load's try 2; its repeat's backoff is three times that (30 s). The
#: distributed path lengthens it (``RW_EXAMPLE_LOAD_RETRY_DELAY``, read when the file is
#: parsed) so that its sensor, however late a loaded machine starts it, still has more than
#: ``[retry_window] sensor_short_wait`` of the backoff left and defers it
LOAD_RETRY_DELAY = int(os.environ.get("RW_EXAMPLE_LOAD_RETRY_DELAY", "10"))
#: the bytes a repeat of the load may read, as approved; raised only by whoever
#: approves the budget, never by the DAG on a retry
APPROVED_LOAD_GB = 200
#: the key under which append records the job it submitted, before waiting for it
SUBMITTED = "submitted_job"
#: the XCom key of the latest decision of a task's RetryWindowPolicy
EVIDENCE = "retry_window.evidence"


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


def gated(
    duration: int,
    validation: int,
    *,
    safe_repeat: bool = True,
    failed_statuses: tuple[str, ...] = (),
    classify: ExceptionRetryPolicy | None = None,
) -> RetryWindowPolicy:
    """The retry window policy every task of this DAG uses."""
    return RetryWindowPolicy(
        deadline=DEADLINE,
        duration=timedelta(seconds=duration),
        validation=timedelta(seconds=validation),
        safe_repeat=safe_repeat,
        unknown=[TimeoutError],
        terminal=[PermissionError],
        failed_statuses=failed_statuses,
        classify=classify,
    )


#: the report's rules, as a team writes them for Airflow's ExceptionRetryPolicy. They
#: classify for the window rather than decide: a RETRY here is still checked against the
#: deadline (its delay would only be the shortest wait), and a FAIL ends the task
#: (repair-cause) with the rule's reason. In a ChainRetryPolicy before the window, the
#: RETRY rule would bypass it, and the DAG would be refused when it is parsed.
REPORT_RULES = ExceptionRetryPolicy(
    rules=[
        RetryRule(
            exception=ConnectionError,
            action=RetryAction.RETRY,
            reason="the positions database drops idle connections; a new try reconnects",
        ),
        RetryRule(
            exception=KeyError,
            action=RetryAction.FAIL,
            reason="a fund is missing from the report template; repair the template",
        ),
    ]
)


def client_job_prefix(context: Any, step: str) -> str:
    """The part of a step's job ids that names the unit of work: every attempt shares it."""
    return f"positions_{step}_{context['ds_nodash']}_{TRANSFORM_VERSION}_a"


def client_job_id(context: Any, step: str, attempt: int) -> str:
    """A job id we choose, predictable from the unit of work and the attempt.

    The service refuses a second job with the same id, so a lost answer can be
    looked up and a duplicate submission is detected. A repeat gets the next
    attempt's id, and only once the earlier job is confirmed failed.
    """
    return f"{client_job_prefix(context, step)}{attempt}"


def record_submission(context: Any, job_id: str) -> None:
    """Keep the id of the submitted job in XCom, so a reconciliation can find it."""
    at = pendulum.now("UTC").isoformat()
    context["ti"].xcom_push(key=SUBMITTED, value={"job_id": job_id, "submitted_at": at})


def observation(state: str, finished_at: str | None, source: str) -> dict[str, Any]:
    """A reconciliation's finding, in the shape the gate and sensor take as observations."""
    return {
        "state": state,
        "observed_at": pendulum.now("UTC").isoformat(),
        "finished_at": finished_at,
        "source": source,
    }


# -- the stand-in for the warehouse's job API -------------------------------------------

RUNNING, DONE, FAILED, NOT_FOUND = "RUNNING", "DONE", "FAILED", "NOT_FOUND"
#: the rows one committed load appends to the business date's partition
LOAD_ROWS = 1204


@dataclass(frozen=True)
class StandInJob:
    """One job of the stand-in warehouse: RUNNING for ``runs_for`` seconds after its
    submission, then ``outcome`` (DONE or FAILED)."""

    id: str
    submitted_at: pendulum.DateTime
    runs_for: float
    outcome: str

    @property
    def ends_at(self) -> pendulum.DateTime:
        return self.submitted_at + timedelta(seconds=self.runs_for)

    def status(self) -> str:
        """What the job API says now."""
        return RUNNING if pendulum.now("UTC") < self.ends_at else self.outcome

    def describe(self) -> str:
        """The job as a reconciliation reports it."""
        status = self.status()
        if status == DONE:
            return f"job {self.id}: DONE, {LOAD_ROWS} rows appended to {DESTINATION}"
        if status == FAILED:
            return f"job {self.id}: FAILED, errorResult set, 0 rows appended"
        return f"job {self.id}: RUNNING since {self.submitted_at.format('HH:mm:ss')}Z"


class StandInWarehouse:
    """The jobs of one run: one JSON file per job id (``submitted_at``, ``runs_for``,
    ``outcome``), written once, when the job is submitted.

    :param folder: where the run's jobs are kept.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @classmethod
    def of(cls, context: Any) -> StandInWarehouse:
        """The warehouse a run's tasks share, under the Airflow home: each run of the
        example keeps its own jobs, so it plays its own day."""
        home = Path(os.environ.get("AIRFLOW_HOME") or Path.home() / "airflow")
        return cls(home / "stand-in-warehouse" / context["run_id"])

    def submit(self, job_id: str, runs_for: float, outcome: str) -> StandInJob:
        """Accept a job under the client's id; :class:`FileExistsError` when it is taken."""
        self.folder.mkdir(parents=True, exist_ok=True)
        job = StandInJob(job_id, pendulum.now("UTC"), runs_for, outcome)
        # creating the file is the submission: exclusive, so one id names one job
        # even when two processes submit it at once
        with (self.folder / f"{job_id}.json").open("x") as file:
            json.dump(
                {
                    "submitted_at": job.submitted_at.isoformat(),
                    "runs_for": runs_for,
                    "outcome": outcome,
                },
                file,
            )
        return job

    def job(self, job_id: str) -> StandInJob | None:
        """The job submitted under ``job_id``, if any."""
        path = self.folder / f"{job_id}.json"
        return self._read(path) if path.exists() else None

    def jobs(self, prefix: str) -> list[StandInJob]:
        """Every job whose id starts with ``prefix``, in the order they were submitted."""
        found = [self._read(path) for path in self.folder.glob(f"{prefix}*.json")]
        return sorted(found, key=lambda job: job.submitted_at)

    @staticmethod
    def _read(path: Path) -> StandInJob:
        stored = json.loads(path.read_text())
        submitted = pendulum.parse(stored["submitted_at"])
        return StandInJob(path.stem, submitted, float(stored["runs_for"]), stored["outcome"])


class LoadJobFailed(RuntimeError):
    """The load job ended FAILED: a retryable failure, seen by the try that polled it."""


def load_job_script(context: Any, attempt: int) -> tuple[float, str]:
    """How long the stand-in runs a load job, and how it ends: (seconds, DONE or FAILED).

    The ``load_committed`` param decides the first attempt, whose worker is lost
    while the job runs. A committing job outlives the lost try and Airflow's retry
    delay (10 to 20 s here), so the retry finds it running; a failing one has
    failed before the retry starts, so the retry finds a confirmed failure. A
    repeat commits.
    """
    if attempt > 1:
        return 3.0, DONE
    if context["params"]["load_committed"]:
        return 40.0, DONE
    return 3.0, FAILED


class StandInLoadOperator(ResumableJobMixin, BaseOperator):
    """A WRITE_APPEND load on the stand-in warehouse, resumable like Airflow's job
    operators (``ResumableJobMixin``, AIP-103).

    It submits the job under a client-chosen id, keeps that id in the task state
    store under ``load_job_id``, then polls the job. A later try reads the stored
    job first: it reconnects to a job that still runs, collects one that committed,
    and submits again, under the next attempt's id, only after a failure.

    :param lose_worker_on_try: the try whose worker is lost (SIGKILLed) while its job runs.
    :param decided_by: the sensor that let this repeat run: the repeat is the attempt
        after those the sensor counted. ``None``: the attempt is the task's try number.
    """

    external_id_key = "load_job_id"
    #: seconds between two status reads while the job runs
    poll_interval = 1.0

    def __init__(
        self,
        *,
        lose_worker_on_try: int | None = None,
        decided_by: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.lose_worker_on_try = lose_worker_on_try
        self.decided_by = decided_by

    def execute(self, context: Any) -> Any:
        return self.execute_resumable(context)

    def attempt(self, context: Any) -> int:
        """The attempt this try submits, which its job id names."""
        if self.decided_by is None:
            return int(context["ti"].try_number)
        record = context["ti"].xcom_pull(task_ids=self.decided_by) or {}
        return int(record["decisions"][0]["attempts"]) + 1

    def submit_job(self, context: Any) -> str:
        attempt = self.attempt(context)
        job_id = client_job_id(context, "load", attempt)
        runs_for, outcome = load_job_script(context, attempt)
        try:
            StandInWarehouse.of(context).submit(job_id, runs_for, outcome)
        except FileExistsError:
            # the id is taken: that job *is* this attempt, so it is resumed rather
            # than submitted twice (never a new random id to get around it)
            self.log.warning("Job %s was submitted before; resuming it", job_id)
        else:
            self.log.info("Submitted job %s", job_id)
        return job_id

    def get_job_status(self, external_id: Any, context: Any) -> str:
        job = StandInWarehouse.of(context).job(str(external_id))
        return job.status() if job else NOT_FOUND

    def is_job_active(self, status: str) -> bool:
        return status == RUNNING

    def is_job_succeeded(self, status: str) -> bool:
        return status == DONE

    def poll_until_complete(self, external_id: Any, context: Any) -> None:
        while True:
            status = self.get_job_status(external_id, context)
            if self.is_job_succeeded(status):
                self.log.info("Job %s is DONE", external_id)
                return
            if not self.is_job_active(status):
                raise LoadJobFailed(f"job {external_id} ended {status}")
            if int(context["ti"].try_number) == self.lose_worker_on_try:
                # the id is stored and the job runs on: what an OOM kill or a lost
                # node leaves behind. The process ends at once, so no retry policy
                # is asked; the retry-start check decides the next try
                self.log.warning("Losing the worker while job %s runs (SIGKILL)", external_id)
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(self.poll_interval)

    def get_job_result(self, external_id: Any, context: Any) -> str:
        job = StandInWarehouse.of(context).job(str(external_id))
        return job.describe() if job else f"job {external_id}: {NOT_FOUND}"


def latest_attempt_end(context: Any, job: StandInJob) -> pendulum.DateTime:
    """When load's latest attempt ended: its job's end, or the refusal of load's retry.

    A try refused when it started, on reading its job failed, counts as an attempt,
    so the backoff before the next one runs from that refusal, as from any failed try.
    """
    ended = job.ends_at
    decided = context["ti"].xcom_pull(task_ids="load", key=EVIDENCE) or {}
    read = decided.get("reconciliation") or {}
    if decided.get("action") == "fail" and read.get("readAt"):
        ended = max(ended, pendulum.parse(read["readAt"]))
    return ended


def simulated_dry_run_gb(context: Any) -> int:
    """The bytes a dry run of the load's query estimates: the ``dry_run_gb`` param."""
    return int(context["params"]["dry_run_gb"])


with DAG(
    dag_id="retry_window_example",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    params={
        "deadline_seconds": Param(240, type="integer", minimum=1),
        "load_committed": Param(
            False,
            type="boolean",
            description="simulated: the load job whose worker is lost commits (DONE); "
            "otherwise it fails with nothing appended",
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

    @task(pool=POOL, pool_slots=1, retry_policy=gated(20, 5, classify=REPORT_RULES), **RETRIES)
    def report(transformed: dict[str, Any], **context: Any) -> str:
        """Fails once with a retryable error, then succeeds after the model's backoff."""
        if context["ti"].try_number == 1:
            raise ConnectionError("positions database closed the connection")
        return f"report for {transformed['business_date']}"

    # repeating a WRITE_APPEND load blindly could append the rows twice: not
    # claimed safe to repeat, so its policy refuses a repeat of a failed job
    load = StandInLoadOperator(
        task_id="load",
        lose_worker_on_try=1,
        # the stand-in service's own word for a failed job: only declared words confirm one
        retry_policy=gated(35, 5, safe_repeat=False, failed_statuses=(FAILED,)),
        retries=3,
        retry_delay=timedelta(seconds=LOAD_RETRY_DELAY),
        # 10 s before try 2, then 30 s before the repeat
        retry_exponential_backoff=3,
        max_retry_delay=timedelta(seconds=max(60, 3 * LOAD_RETRY_DELAY)),
    )

    @task(trigger_rule="all_done")
    def reconcile_load(**context: Any) -> dict[str, Any] | None:
        """Look the load's jobs up by their predictable ids and report the latest as an
        observation of ``load``."""
        jobs = StandInWarehouse.of(context).jobs(client_job_prefix(context, "load"))
        if not jobs:
            print("load submitted no job in this run: nothing to reconcile")
            return None
        job = jobs[-1]
        found = job.describe()
        print(found)
        status = job.status()
        if status == RUNNING:
            return {"load": observation("running", None, found)}
        # committed: its rows are in, nothing to repeat; otherwise confirmed failed
        state = "succeeded" if status == DONE else "retryable"
        return {"load": observation(state, latest_attempt_end(context, job).isoformat(), found)}

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
        # the observation is read again after the backoff: allow for the wait, and 90 s
        # for a busy machine to run reconcile_load early and resume the sensor late
        max_observation_age=timedelta(seconds=3 * LOAD_RETRY_DELAY + 90),
        deferrable=True,
        poke_interval=2,
        timeout=300,
        # skip only retry_load, so load_outcome's own trigger rule decides
        ignore_downstream_trigger_rules=False,
    )

    # the repeat: the earlier job is confirmed failed, so it is the next attempt's
    # id, never the failed one's again and never a random one
    retry_load = StandInLoadOperator(task_id="retry_load", decided_by="load_retry_window")

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
        once each by record key (fund, instrument, date), so exactly one load job
        may have committed; two would have appended the rows twice."""
        jobs = StandInWarehouse.of(context).jobs(client_job_prefix(context, "load"))
        committed = [job.id for job in jobs if job.status() == DONE]
        partition = f"{DESTINATION} partition {context['ds_nodash']}"
        if len(committed) != 1:
            raise ValueError(f"{partition}: {len(committed)} load jobs committed {committed}")
        message = f"{partition}: {LOAD_ROWS} rows from job {committed[0]}, no duplicate keys"
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
        # the stand-in service: the submission whose answer was lost did commit, as
        # soon as it was submitted (a real reconciliation reads the job's end time)
        found = f"job {submitted['job_id']}: DONE, 310 rows appended"
        print(found)
        return {"append": observation("succeeded", submitted["submitted_at"], found)}

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
    outcome = load_outcome()
    (
        transformed
        >> load
        >> reconcile_load()
        >> dry_run_load()
        >> load_retry_window
        >> retry_load
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
