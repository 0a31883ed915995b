"""The real ``BigQueryInsertJobOperator``, gated by a ``RetryWindowPolicy``, on a real scheduler.

The operator, its hook, ``google-cloud-bigquery``, ``google-auth`` and the Airflow
connection are the real ones; only BigQuery is the stand-in
(``devstack/bigquery_standin.py``), served from this process and reached by every
Airflow service through ``BIGQUERY_EMULATOR_HOST`` and the connection's key. The
stand-in counts submissions (inserts that created a job, apart from 409s), so one
submission is a reconnect or a collect, two a repeat.

The operator is Airflow's ``ResumableJobMixin`` (``external_id_key =
"bigquery_job_id"``): the gate reconciles an unknown outcome through its own
``get_job_status``. Each DAG (``bigquery_scheduler_dags/``) has ``force_rerun=False``,
``retries=2``, a short ``retry_delay`` and a configured ``job_id``, most with a new
predictable id per try (``..._a{{ ti.try_number }}``).

Where a case loses its worker, the DAG's operator is a thin subclass,
``KillableInsertJobOperator``, that keeps the provider's logic and only adds a
SIGKILL of its own task process on try 1: at the first poll, after the mixin
stored the job id (``kill-during-poll``), or inside ``submit_job`` right after the
insert was answered and before the mixin stores the id (``kill-after-submit``).

The lost-answers case: the answer to the insert is lost (the connection closes
after the stand-in created the job); the client retries the insert with the same
id and gets 409; the operator looks the job up and, because ``reattach_states``
holds RUNNING, reattaches and the mixin stores its id. Then every answer of the
poll (``jobs.getQueryResults``) is lost while the job runs, and the client, whose
``result_retry`` gives up after a few seconds, raises ``RetryError`` from
``requests.exceptions.ConnectionError``, which the policy lists in ``unknown=``.
So the try fails with an unknown outcome while an id is stored: the policy reads
the job through the operator at failure time (it is RUNNING: the retry may only
reconnect), the job ends right after that read, and the next try's start reads it
again and only collects the result. Without ``reattach_states`` the 409 fails the
try with no id stored (the findings the baseline tests pin down), and the gate
would have nothing to read.

Deferrable tasks keep no id in the task state store (the operator's deferrable
path never calls ``execute_resumable``), so no lost deferrable try can be
reconnected to or collected: a worker lost after the insert is ``reconcile-remote``.
The failure the trigger reports (DONE with ``errorResult``) is decided by the model
like any retryable failure.

One stack (API server, scheduler, DAG processor, triggerer; LocalExecutor) and one
stand-in serve the module; every run is triggered as soon as both are up, so the
runs overlap and each test waits for its own. Jobs scripted to run until released
are released by a watcher thread once the requests a case depends on were seen,
so no case races the clock. Two cases leave Airflow's scheduler time on purpose:
it can take the executor's report of a try's exit for a later start of the same
try (same key) and fail that start as killed externally. So the deferred jobs run
on for a few seconds after the trigger's first read, and the repeat after a
confirmed failure has a 10 s ``retry_delay``: the check reschedules that try to the
end of the backoff, and with 2 s the rescheduled start was lost to that race.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from hashlib import md5
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

from devstack.bigquery_standin import BigQueryStandIn, JobScript, bigquery_standin
from devstack.stack import FREQUENT_HEARTBEATS, AirflowStack, sqlite_stack
from tests.resumable import kept_decisions as kept
from tests.resumable.kept_decisions import EVIDENCE_KEY, decision_of

pytestmark = [
    pytest.mark.airflow,
    pytest.mark.slow(minutes=3),
    # looked up, not imported: the Google provider runs in the stack's processes
    pytest.mark.skipif(
        find_spec("airflow.providers.google.cloud.operators.bigquery") is None,
        reason="the google extra (Python 3.11+)",
    ),
]

DAGS = Path(__file__).with_name("bigquery_scheduler_dags")
SERVICES = ("api-server", "scheduler", "dag-processor", "triggerer")
HOUR = 3600
#: the scheduler fails a running try that has not heartbeaten for this long (default 300 s);
#: the killed tries here are reported by their supervisor, so this only bounds a hang
HEARTBEAT_TIMEOUT = 60
#: seconds a worker may take to import the DAG file: with every run's try importing the
#: google provider at once on a small machine, Airflow's 30 s is not always enough
IMPORT_TIMEOUT = 120
#: seconds a deferred job runs on after the trigger's first read: Airflow's scheduler must
#: see the worker's exit after the deferral before the trigger's event queues the try
#: again under the same key, or it takes the resumed try for one killed externally
DEFERRED_RUNS_ON = 8.0
TASK_ID = "query"
TRY_START_KEY = "retry_window.try_start"
JOB_ID_KEY = "bigquery_job_id"
RUN_TIMEOUT = 300
KILL_DURING_POLL = "kill-during-poll"
KILL_AFTER_SUBMIT = "kill-after-submit"
CONFIGURATION = {"query": {"query": "SELECT 1", "useLegacySql": False}}
FOREVER = None  # a JobScript running time: RUNNING until released
DEFERRED_ERROR = "Syntax error: scripted for bqs_deferred_error"

#: (method, API, HTTP status) of one request that named a job; status None: no answer
Request = tuple[str, str, int | None]
#: when a job scripted to run until released ends: a test of the requests naming it
Release = Callable[[list[Request]], bool]


def after_reads(reads: int) -> Release:
    """End the job once ``jobs.get`` has answered ``reads`` times."""
    return lambda seen: seen.count(("GET", "jobs", 200)) >= reads


def after_a_read_past_a_lost_poll(seen: list[Request]) -> bool:
    """End the job once ``jobs.get`` has answered after a poll whose answer was lost."""
    lost = [i for i, request in enumerate(seen) if request == ("GET", "queries", None)]
    return bool(lost) and ("GET", "jobs", 200) in seen[lost[0] :]


@dataclass(frozen=True)
class Case:
    """One DAG run: its jobs' scripts, what goes wrong on try 1, its deadline.

    :param dag_id: the DAG (``bigquery_scheduler_dags/rw_bigquery_jobs.py``).
    :param prefix: the configured job id without the try: every job of the run starts with it.
    :param scripts: what the jobs do, by job id prefix.
    :param release: for jobs scripted to run until released: when each ends.
    :param release_after: seconds from the moment ``release`` holds to the job's end.
    :param fault: the fault of try 1, if any.
    :param deadline_in: seconds from the run's start to the policy's deadline.
    """

    dag_id: str
    prefix: str
    scripts: tuple[JobScript, ...]
    release: Release | None = None
    release_after: float = 0.0
    fault: str | None = None
    deadline_in: int = HOUR


CASES = (
    # outlives the killed try; ends once the retry's start check and the mixin read it
    Case(
        "bqs_killed_running",
        "bqs_killed_running_a",
        (JobScript("bqs_killed_running_a", running=FOREVER),),
        release=after_reads(2),
        fault=KILL_DURING_POLL,
    ),
    # the first job ends with an errorResult long before the killed try's retry starts
    Case(
        "bqs_lost_then_failed_safe",
        "bqs_failed_safe_a",
        (
            JobScript("bqs_failed_safe_a1", running=1, ends="error"),
            JobScript("bqs_failed_safe_a2", running=1),
        ),
        fault=KILL_DURING_POLL,
    ),
    Case(
        "bqs_lost_then_failed_unsafe",
        "bqs_failed_unsafe_a",
        (JobScript("bqs_failed_unsafe_a1", running=1, ends="error"),),
        fault=KILL_DURING_POLL,
    ),
    Case(
        "bqs_lost_before_id",
        "bqs_before_id_a",
        (JobScript("bqs_before_id_a", running=5),),
        fault=KILL_AFTER_SUBMIT,
    ),
    # one attempt takes 65 s with its validation: no retry can end before the deadline
    Case(
        "bqs_deadline",
        "bqs_deadline_a",
        (JobScript("bqs_deadline_a", running=0.5, ends="error"),),
        deadline_in=30,
    ),
    Case(
        "bqs_tolerated_errors",
        "bqs_tolerated_a",
        (JobScript("bqs_tolerated_a1", running=1, ends="warnings"),),
        fault=KILL_DURING_POLL,
    ),
    Case(
        "bqs_lost_answers",
        "bqs_lost_answers_a",
        (
            JobScript(
                "bqs_lost_answers_a",
                running=FOREVER,
                insert_response="drop",
                poll_response="drop",
            ),
        ),
        release=after_a_read_past_a_lost_poll,
    ),
    # one fixed id: every retry of the failed job inserts the same id again
    Case(
        "bqs_duplicate",
        "bqs_duplicate",
        (JobScript("bqs_duplicate", running=0.5, ends="error"),),
    ),
    # the worker's own read when it defers, then the trigger's first poll
    Case(
        "bqs_deferred_ok",
        "bqs_deferred_ok_a",
        (JobScript("bqs_deferred_ok_a", running=FOREVER),),
        release=after_reads(2),
        release_after=DEFERRED_RUNS_ON,
    ),
    Case(
        "bqs_deferred_error",
        "bqs_deferred_error_a",
        (
            JobScript(
                "bqs_deferred_error_a1", running=FOREVER, ends="error", message=DEFERRED_ERROR
            ),
            JobScript("bqs_deferred_error_a2", running=FOREVER),
        ),
        release=after_reads(2),
        release_after=DEFERRED_RUNS_ON,
    ),
    Case(
        "bqs_deferred_lost",
        "bqs_deferred_lost_a",
        (JobScript("bqs_deferred_lost_a", running=5),),
        fault=KILL_AFTER_SUBMIT,
    ),
)
BY_DAG = {case.dag_id: case for case in CASES}


@dataclass(frozen=True)
class Run:
    """One triggered DAG run."""

    dag_id: str
    run_id: str

    @property
    def case(self) -> Case:
        return BY_DAG[self.dag_id]


def job_id(run: Run, try_number: int | None = None) -> str:
    """The id the operator derives: configured id, ``_``, md5 of the labelled configuration."""
    configured = run.case.prefix + ("" if try_number is None else str(try_number))
    labels = {"airflow-dag": run.dag_id, "airflow-task": TASK_ID}
    labelled = json.dumps({**CONFIGURATION, "labels": labels}, sort_keys=True)
    return f"{configured}_{md5(labelled.encode()).hexdigest()}"


def requests_naming(standin: BigQueryStandIn, job: str) -> list[Request]:
    """(method, API, status) of every jobs API request that named ``job``, in order."""
    named = []
    for request in standin.requests_to("/bigquery/v2/"):
        if request["path"].endswith(f"/{job}") or request.get("jobId") == job:
            api = request["path"].split("/")[-2] if request["method"] == "GET" else "insert"
            named.append((request["method"], api, request["status"]))
    return named


def _release_when_due(standin: BigQueryStandIn, stop: threading.Event) -> None:
    """End each job scripted to run until released once its case's requests were seen."""
    due: dict[str, float] = {}
    released: set[str] = set()
    while not stop.wait(0.05):
        for case in CASES:
            if case.release is None:
                continue
            for job in standin.jobs.submissions(case.prefix)["created"]:
                if job not in due and case.release(requests_naming(standin, job)):
                    due[job] = time.monotonic() + case.release_after
                if job in due and job not in released and time.monotonic() >= due[job]:
                    standin.jobs.release(job)
                    released.add(job)


@pytest.fixture(scope="module")
def standin() -> Iterator[BigQueryStandIn]:
    """One stand-in for the module, its jobs scripted, jobs released by a watcher thread."""
    prefixes = [case.prefix for case in CASES]
    # a job id names its case: no case's prefix may start another's
    assert not [(a, b) for a in prefixes for b in prefixes if a != b and b.startswith(a)]
    with bigquery_standin() as serving:
        for case in CASES:
            for script in case.scripts:
                serving.script(script)
        stop = threading.Event()
        watcher = threading.Thread(target=_release_when_due, args=(serving, stop), daemon=True)
        watcher.start()
        yield serving
        stop.set()
        watcher.join(timeout=5)


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, standin: BigQueryStandIn
) -> Iterator[AirflowStack]:
    """A SQLite stack with a short heartbeat timeout, parsing this module's DAGs only."""
    home = tmp_path_factory.mktemp("bigquery")
    dags = home / "dags"
    shutil.copytree(DAGS, dags, ignore=shutil.ignore_patterns("__pycache__"))
    settings = {
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT),
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "1",
        **FREQUENT_HEARTBEATS,
        "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": str(IMPORT_TIMEOUT),
        "AIRFLOW__DAG_PROCESSOR__DAG_FILE_PROCESSOR_TIMEOUT": str(IMPORT_TIMEOUT + 30),
        # every run of the module at once
        "AIRFLOW__CORE__PARALLELISM": str(len(CASES) + 1),
        **standin.environment(),
    }
    dag_ids = [case.dag_id for case in CASES]
    with sqlite_stack(home, SERVICES, dag_ids, dags_folder=dags, extra_env=settings) as running:
        yield running


@pytest.fixture(scope="module")
def runs(stack: AirflowStack) -> dict[str, Run]:
    """One run of every case, all triggered (through the REST API) before any test waits."""
    started = {}
    for case in CASES:
        run_id = f"manual__{case.dag_id}"
        conf = {"fault": case.fault, "deadline_in": case.deadline_in}
        stack.api(
            "POST",
            f"/api/v2/dags/{case.dag_id}/dagRuns",
            {"dag_run_id": run_id, "logical_date": "2026-11-01T00:00:00Z", "conf": conf},
        )
        started[case.dag_id] = Run(case.dag_id, run_id)
    return started


def task_logs(stack: AirflowStack, run: Run) -> str:
    """Every try's task log of the run, for failure messages."""
    folder = stack.home / "logs" / f"dag_id={run.dag_id}" / f"run_id={run.run_id}"
    parts = [
        f"--- {path.relative_to(stack.home)} ---\n{path.read_text(errors='replace')[-6000:]}"
        for path in sorted(folder.glob(f"task_id={TASK_ID}/**/*.log"))
    ]
    return "\n".join(parts) or f"no task logs under {folder}"


TASK = kept.KeptTask(TASK_ID, RUN_TIMEOUT, context=task_logs)


def submitted(standin: BigQueryStandIn, run: Run) -> dict[str, Any]:
    """The run's inserts: the ids they created and those refused as duplicates (409)."""
    return standin.jobs.submissions(run.case.prefix)


def ended(stack: AirflowStack, run: Run, state: str, tries: int) -> None:
    """The run ended ``state`` after ``tries`` tries of its task; else fail with its logs."""
    seen = (TASK.finished(stack, run), *TASK.task_instance(stack, run))
    assert seen == (state, state, tries), f"{run.dag_id}: {seen}\n{task_logs(stack, run)}"


def first_try_marker(stack: AirflowStack, run: Run) -> dict[str, Any]:
    """Try 1's start marker, its work scope checked and left out: the run and window 1."""
    marker = dict(TASK.stored(stack, run, TRY_START_KEY))
    scope = marker.pop("scope")
    assert (scope["runId"], scope["window"], scope["taskId"]) == (run.run_id, 1, "query")
    assert scope["dagVersion"]  # Airflow runs every try under a DAG version
    return marker


def test_a_worker_lost_while_the_job_runs_reconnects(
    stack: AirflowStack, standin: BigQueryStandIn, runs: dict[str, Run]
) -> None:
    run = runs["bqs_killed_running"]
    ended(stack, run, "success", 2)
    first = job_id(run, 1)
    jobs = submitted(standin, run)
    assert (jobs["submissions"], jobs["created"], jobs["conflicts"]) == (1, [first], [])
    assert TASK.stored(stack, run, JOB_ID_KEY) == first
    kept = TASK.decisions(stack, run)
    # try 1 was killed without a decision; try 2 was decided when it started
    assert [d["tryNumber"] for d in kept] == [2]
    latest = kept[-1]
    assert (latest["check"], latest["action"]) == ("retry-start", "run")
    assert decision_of(latest) == "observe-running"
    reconciliation = latest["reconciliation"]
    assert reconciliation["outcome"] == "active"
    assert (reconciliation["externalIdKey"], reconciliation["externalId"]) == (JOB_ID_KEY, first)
    assert reconciliation["status"] in ("PENDING", "RUNNING")
    assert reconciliation["allows"] == "reconnect"
    assert (reconciliation["reachedService"], reconciliation["finished"]) == (True, False)
    assert reconciliation["error"] is None
    assert TASK.latest_evidence(stack, run) == latest
    # try 2 submitted nothing: it read the job twice (the check, the mixin) and polled it
    assert requests_naming(standin, first)[:3] == [
        ("POST", "insert", 200),
        ("GET", "jobs", 200),
        ("GET", "jobs", 200),
    ]


def test_a_job_that_failed_after_its_worker_was_lost_is_repeated_once_when_safe(
    stack: AirflowStack, standin: BigQueryStandIn, runs: dict[str, Run]
) -> None:
    run = runs["bqs_lost_then_failed_safe"]
    ended(stack, run, "success", 2)
    first, second = job_id(run, 1), job_id(run, 2)
    jobs = submitted(standin, run)
    assert (jobs["submissions"], jobs["created"], jobs["conflicts"]) == (2, [first, second], [])
    assert TASK.stored(stack, run, JOB_ID_KEY) == second
    kept = TASK.decisions(stack, run)
    # every decision is try 2's, at its start, on the failed first job
    assert kept and all(d["tryNumber"] == 2 and d["check"] == "retry-start" for d in kept)
    for entry in kept:
        reconciliation = entry["reconciliation"]
        assert (reconciliation["outcome"], reconciliation["status"]) == ("failed", "error")
        assert reconciliation["externalId"] == first
        assert reconciliation["finished"] is True
    # waiting out the backoff reschedules the try; the last start ran it
    assert [(decision_of(d), d["action"]) for d in kept[:-1]] == [
        ("wait-backoff", "reschedule")
    ] * (len(kept) - 1)
    assert (decision_of(kept[-1]), kept[-1]["action"]) == ("retry-eligible", "run")
    assert TASK.latest_evidence(stack, run) == kept[-1]


def test_a_job_that_failed_after_its_worker_was_lost_is_not_repeated_unless_safe(
    stack: AirflowStack, standin: BigQueryStandIn, runs: dict[str, Run]
) -> None:
    run = runs["bqs_lost_then_failed_unsafe"]
    ended(stack, run, "failed", 2)
    jobs = submitted(standin, run)
    assert (jobs["submissions"], jobs["created"]) == (1, [job_id(run, 1)])
    kept = TASK.decisions(stack, run)
    assert [d["tryNumber"] for d in kept] == [2]
    latest = kept[-1]
    assert (latest["check"], latest["action"]) == ("retry-start", "fail")
    assert decision_of(latest) == "reconcile-effects"
    reconciliation = latest["reconciliation"]
    assert (reconciliation["outcome"], reconciliation["status"]) == ("failed", "error")
    assert reconciliation["externalId"] == job_id(run, 1)
    assert TASK.latest_evidence(stack, run) == latest


def test_a_worker_lost_before_the_job_id_was_stored_is_refused(
    stack: AirflowStack, standin: BigQueryStandIn, runs: dict[str, Run]
) -> None:
    run = runs["bqs_lost_before_id"]
    ended(stack, run, "failed", 2)
    jobs = submitted(standin, run)
    assert (jobs["submissions"], jobs["created"]) == (1, [job_id(run, 1)])
    # BigQuery accepted the job, but its id never reached the task state store
    assert TASK.stored(stack, run, JOB_ID_KEY) is None
    # try 1 started with no id and was to submit; the refused try 2 keeps no marker
    assert first_try_marker(stack, run) == {
        "tryNumber": 1,
        "externalId": None,
        "expects": "submit",
        "jobScope": None,
    }
    kept = TASK.decisions(stack, run)
    assert [d["tryNumber"] for d in kept] == [2]
    latest = kept[-1]
    assert (latest["check"], latest["action"], latest["failure"]) == (
        "retry-start",
        "fail",
        "unknown",
    )
    assert decision_of(latest) == "reconcile-remote"
    assert latest["reconciliation"]["outcome"] == "no-id"
    assert latest["reconciliation"]["externalId"] is None
    assert TASK.latest_evidence(stack, run) == latest


def test_an_ordinary_failure_with_no_time_left_is_not_repeated(
    stack: AirflowStack, standin: BigQueryStandIn, runs: dict[str, Run]
) -> None:
    run = runs["bqs_deadline"]
    ended(stack, run, "failed", 1)
    jobs = submitted(standin, run)
    assert (jobs["submissions"], jobs["created"]) == (1, [job_id(run, 1)])
    kept = TASK.decisions(stack, run)
    assert [d["tryNumber"] for d in kept] == [1]
    latest = kept[-1]
    assert (latest["check"], latest["action"], latest["failure"]) == (
        "retry-policy",
        "fail",
        "retryable",
    )
    assert decision_of(latest) == "deadline-infeasible"
    # the poll raised the client's own error for the job's errorResult
    assert "BadRequest" in latest["reason"]
    # an ordinary failure is decided without reading the job again
    assert latest.get("reconciliation") is None
    assert TASK.latest_evidence(stack, run) == latest


def test_a_job_done_with_tolerated_errors_after_a_lost_worker_is_collected(
    stack: AirflowStack, standin: BigQueryStandIn, runs: dict[str, Run]
) -> None:
    run = runs["bqs_tolerated_errors"]
    ended(stack, run, "success", 2)
    first = job_id(run, 1)
    jobs = submitted(standin, run)
    assert (jobs["submissions"], jobs["created"]) == (1, [first])
    job = standin.jobs.get(standin.project, first, "EU")
    assert job is not None
    status = job.status()
    assert (status["state"], "errorResult" in status) == ("DONE", False)
    kept = TASK.decisions(stack, run)
    assert [d["tryNumber"] for d in kept] == [2]
    latest = kept[-1]
    assert (latest["check"], latest["action"]) == ("retry-start", "run")
    assert decision_of(latest) == "validate-output"
    reconciliation = latest["reconciliation"]
    assert (reconciliation["outcome"], reconciliation["status"]) == ("succeeded", "success")
    assert reconciliation["allows"] == "collect"
    assert reconciliation["toleratedErrors"] == len(status["errors"])
    assert f"{len(status['errors'])} errors tolerated" in reconciliation["toValidate"]
    assert TASK.latest_evidence(stack, run) == latest


def test_lost_answers_after_the_insert_are_reconciled_through_the_stored_id(
    stack: AirflowStack, standin: BigQueryStandIn, runs: dict[str, Run]
) -> None:
    run = runs["bqs_lost_answers"]
    ended(stack, run, "success", 2)
    first = job_id(run, 1)
    jobs = submitted(standin, run)
    # the client's own retry of the insert met the job it had created: 409, one job
    assert (jobs["submissions"], jobs["created"], jobs["conflicts"]) == (1, [first], [first])
    seen = requests_naming(standin, first)
    assert seen[:3] == [("POST", "insert", None), ("POST", "insert", 409), ("GET", "jobs", 200)]
    assert ("GET", "queries", None) in seen  # the poll's lost answers
    # the reattached job's id was stored before the poll
    assert TASK.stored(stack, run, JOB_ID_KEY) == first
    kept = TASK.decisions(stack, run)
    assert [(d["tryNumber"], d["check"]) for d in kept] == [(1, "retry-policy"), (2, "retry-start")]
    at_failure, at_start = kept
    # at failure time: an unknown outcome, read through the stored id: still running
    assert (at_failure["failure"], at_failure["action"]) == ("unknown", "retry")
    assert decision_of(at_failure) == "observe-running"
    assert "RetryError" in at_failure["reason"]
    assert "Connection aborted" in at_failure["reason"]
    assert at_failure["reconciliation"]["outcome"] == "active"
    assert at_failure["reconciliation"]["externalId"] == first
    assert at_failure["reconciliation"]["allows"] == "reconnect"
    # the job ended right after that read: the next try's start read it again
    assert (at_start["action"], decision_of(at_start)) == ("run", "validate-output")
    assert at_start["reconciliation"]["outcome"] == "succeeded"
    assert at_start["reconciliation"]["allows"] == "collect"
    assert TASK.latest_evidence(stack, run) == at_start


def test_a_reused_job_id_meets_a_409_and_the_operator_looks_that_job_up(
    stack: AirflowStack, standin: BigQueryStandIn, runs: dict[str, Run]
) -> None:
    run = runs["bqs_duplicate"]
    ended(stack, run, "failed", 3)
    only = job_id(run)
    jobs = submitted(standin, run)
    # each retry inserted the same id again and was refused: no second job, no other id
    assert (jobs["submissions"], jobs["created"], jobs["conflicts"]) == (1, [only], [only, only])
    inserted = [
        request["jobId"]
        for request in standin.requests_to("/bigquery/v2/projects/")
        if request["method"] == "POST" and request.get("jobId", "").startswith(run.case.prefix)
    ]
    assert inserted == [only, only, only]
    seen = requests_naming(standin, only)
    # every 409 is followed by the lookup of that very job, found DONE
    for at in [i for i, request in enumerate(seen) if request == ("POST", "insert", 409)]:
        assert seen[at + 1] == ("GET", "jobs", 200)
    kept = TASK.decisions(stack, run)
    assert [(d["tryNumber"], d["check"], d["failure"]) for d in kept] == [
        (1, "retry-policy", "retryable"),
        (2, "retry-policy", "retryable"),
        (3, "retry-policy", "retryable"),
    ]
    assert "BadRequest" in kept[0]["reason"]
    assert all("already exists and is in DONE state" in d["reason"] for d in kept[1:])
    assert [d["action"] for d in kept] == ["retry", "retry", "fail"]
    assert decision_of(kept[-1]) == "attempts-exhausted"
    assert TASK.latest_evidence(stack, run) == kept[-1]


def test_a_deferrable_job_is_polled_by_the_trigger_and_keeps_no_id(
    stack: AirflowStack, standin: BigQueryStandIn, runs: dict[str, Run]
) -> None:
    run = runs["bqs_deferred_ok"]
    ended(stack, run, "success", 1)
    first = job_id(run, 1)
    jobs = submitted(standin, run)
    assert (jobs["submissions"], jobs["created"]) == (1, [first])
    polls = requests_naming(standin, first)[1:]
    # the worker's read before it defers, then the trigger's jobs.get, never getQueryResults
    assert len(polls) >= 3
    assert {api for _, api, _ in polls} == {"jobs"}
    assert TASK.stored(stack, run, JOB_ID_KEY) is None
    assert first_try_marker(stack, run) == {
        "tryNumber": 1,
        "externalId": None,
        "expects": "submit",
        "jobScope": None,
    }
    assert TASK.stored(stack, run, EVIDENCE_KEY) is None  # nothing failed, nothing decided


def test_a_deferrable_jobs_error_result_is_decided_by_the_model(
    stack: AirflowStack, standin: BigQueryStandIn, runs: dict[str, Run]
) -> None:
    run = runs["bqs_deferred_error"]
    ended(stack, run, "success", 2)
    first, second = job_id(run, 1), job_id(run, 2)
    jobs = submitted(standin, run)
    assert (jobs["submissions"], jobs["created"], jobs["conflicts"]) == (2, [first, second], [])
    # the trigger polled the failed job with jobs.get only
    assert {api for _, api, _ in requests_naming(standin, first)[1:]} == {"jobs"}
    assert TASK.stored(stack, run, JOB_ID_KEY) is None
    kept = TASK.decisions(stack, run)
    assert [d["tryNumber"] for d in kept] == [1]
    latest = kept[-1]
    assert (latest["check"], latest["action"], latest["failure"]) == (
        "retry-policy",
        "retry",
        "retryable",
    )
    assert decision_of(latest) in ("wait-backoff", "retry-eligible")
    assert DEFERRED_ERROR in latest["reason"]
    assert latest.get("reconciliation") is None


def test_a_lost_deferrable_try_has_no_id_to_reconcile(
    stack: AirflowStack, standin: BigQueryStandIn, runs: dict[str, Run]
) -> None:
    run = runs["bqs_deferred_lost"]
    ended(stack, run, "failed", 2)
    jobs = submitted(standin, run)
    assert (jobs["submissions"], jobs["created"]) == (1, [job_id(run, 1)])
    assert TASK.stored(stack, run, JOB_ID_KEY) is None
    kept = TASK.decisions(stack, run)
    assert [d["tryNumber"] for d in kept] == [2]
    latest = kept[-1]
    assert (latest["check"], latest["action"], latest["failure"]) == (
        "retry-start",
        "fail",
        "unknown",
    )
    assert decision_of(latest) == "reconcile-remote"
    assert (latest["reconciliation"]["outcome"], latest["reconciliation"]["externalId"]) == (
        "no-id",
        None,
    )
    assert TASK.latest_evidence(stack, run) == latest
