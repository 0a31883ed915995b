"""The real ``BigQueryInsertJobOperator`` against the BigQuery jobs API stand-in; no retry policy.

The operator, its hook, ``google-cloud-bigquery``, ``google-auth`` and the Airflow
connection are the real ones; only BigQuery is the stand-in
(``devstack/bigquery_standin.py``), reached through ``BIGQUERY_EMULATOR_HOST`` and a
service-account key whose ``token_uri`` is the stand-in's. This is the baseline the
retry policy's reconciliation builds on: what the provider itself does.

The first tests call the operator in this process with a minimal context (a task
instance that keeps its XComs, a dict as task state store); those marked ``airflow``
run it through ``dag.test()`` on the throwaway metadata DB, triggerer path included.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from hashlib import md5
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pendulum
import pytest
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowException

from devstack.bigquery_standin import BigQueryStandIn, JobScript, bigquery_standin
from tests.policy.airflow_runs import query, tries

if TYPE_CHECKING:
    from airflow.providers.google.cloud.operators.bigquery import BigQueryInsertJobOperator

# looked up, not imported: the Google provider's import is a second of every collecting worker
pytestmark = pytest.mark.skipif(
    find_spec("airflow.providers.google.cloud.operators.bigquery") is None,
    reason="the google extra (Python 3.11+)",
)

ROOT = Path(__file__).resolve().parents[2]
CASES = Path(__file__).with_name("bigquery_dags") / "bq_standin_cases.py"
CONFIGURATION = {"query": {"query": "SELECT 1", "useLegacySql": False}}
LOCATION = "EU"
DIRECT_DAG = "bq_direct"
FOREVER = None  # a JobScript running time: RUNNING until released


@pytest.fixture(scope="module")
def standin() -> Iterator[BigQueryStandIn]:
    """One stand-in for the module, its environment set for this process."""
    with bigquery_standin() as serving, pytest.MonkeyPatch.context() as patch:
        for name, value in serving.environment().items():
            patch.setenv(name, value)
        yield serving


@dataclass
class _TaskInstance:
    """What the operator asks of ``context["ti"]`` outside a task runner."""

    try_number: int = 1
    xcoms: dict[str, Any] = field(default_factory=dict)
    stats_tags: dict[str, str] = field(default_factory=dict)

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[key] = value


class _StateStore(dict[str, Any]):
    """The task state store, as ``execute_resumable`` uses it (``get``, ``set``)."""

    def set(self, key: str, value: Any) -> None:
        self[key] = value


def _context(try_number: int = 1, store: _StateStore | None = None) -> dict[str, Any]:
    return {
        "ti": _TaskInstance(try_number),
        "dag_run": type("Run", (), {"start_date": pendulum.now("UTC")})(),
        "task_state_store": _StateStore() if store is None else store,
    }


def _operator(job_id: str, **kwargs: Any) -> BigQueryInsertJobOperator:
    from airflow.providers.google.cloud.operators.bigquery import BigQueryInsertJobOperator

    with DAG(DIRECT_DAG, schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
        return BigQueryInsertJobOperator(
            task_id="query",
            configuration=copy.deepcopy(CONFIGURATION),
            job_id=job_id,
            force_rerun=False,
            location=LOCATION,
            **kwargs,
        )


def _insert(job_id: str) -> None:
    """Insert a job under exactly ``job_id`` through the provider's hook, without waiting."""
    from airflow.providers.google.cloud.hooks.bigquery import BigQueryHook

    BigQueryHook().insert_job(
        configuration=copy.deepcopy(CONFIGURATION), job_id=job_id, location=LOCATION, nowait=True
    )


def derived_job_id(configured: str, dag_id: str = DIRECT_DAG) -> str:
    """The id the operator derives: the configured one, ``_``, md5 of the labelled configuration."""
    labelled = {**CONFIGURATION, "labels": {"airflow-dag": dag_id, "airflow-task": "query"}}
    return f"{configured}_{md5(json.dumps(labelled, sort_keys=True).encode()).hexdigest()}"


def _requests(standin: BigQueryStandIn, job_id: str) -> list[tuple[str, str, int | None]]:
    """(method, API, status) of every jobs API request that named ``job_id``, in order."""
    named = []
    for request in standin.requests_to("/bigquery/v2/"):
        if request["path"].endswith(f"/{job_id}") or request.get("jobId") == job_id:
            api = request["path"].split("/")[-2] if request["method"] == "GET" else "insert"
            named.append((request["method"], api, request["status"]))
    return named


def _release_after_reads(standin: BigQueryStandIn, job_id: str, reads: int) -> None:
    """From a thread: end the RUNNING of ``job_id`` once jobs.get has answered ``reads`` times."""

    def release() -> None:
        while _requests(standin, job_id).count(("GET", "jobs", 200)) < reads:
            time.sleep(0.05)
        standin.jobs.release(job_id)

    threading.Thread(target=release, daemon=True).start()


# -- the operator in this process ----------------------------------------------------------


def test_a_clean_job_succeeds_and_its_id_is_stored(standin: BigQueryStandIn) -> None:
    standin.script(JobScript(prefix="direct_clean", running=0.3))
    context = _context()
    returned = _operator("direct_clean").execute(context)
    assert returned == derived_job_id("direct_clean")
    assert context["task_state_store"] == {"bigquery_job_id": returned}
    assert standin.submissions("direct_clean") == 1
    assert ("GET", "queries", 200) in _requests(standin, returned)


def test_done_with_an_error_result_raises_the_clients_error(standin: BigQueryStandIn) -> None:
    standin.script(JobScript(prefix="direct_error", running=0.3, ends="error", message="Boom."))
    context = _context()
    from google.api_core.exceptions import BadRequest

    with pytest.raises(BadRequest, match="Boom"):
        _operator("direct_error").execute(context)
    # stored before the poll: the next try reads this job's status first
    assert context["task_state_store"] == {"bigquery_job_id": derived_job_id("direct_error")}


def test_done_with_only_non_fatal_errors_succeeds(standin: BigQueryStandIn) -> None:
    standin.script(JobScript(prefix="direct_warn", running=0.3, ends="warnings"))
    returned = _operator("direct_warn").execute(_context())
    assert returned == derived_job_id("direct_warn")
    job = standin.jobs.get(standin.project, returned, LOCATION)
    assert job is not None
    status = job.status()
    assert (status["state"], len(status["errors"]), "errorResult" in status) == ("DONE", 1, False)


@pytest.mark.parametrize(
    ("script", "status", "active", "succeeded"),
    [
        (JobScript(pending=3600), "PENDING", True, False),
        (JobScript(running=FOREVER), "RUNNING", True, False),
        (JobScript(running=0), "success", False, True),
        (JobScript(running=0, ends="warnings"), "success", False, True),
        (JobScript(running=0, ends="error"), "error", False, False),
    ],
    ids=["pending", "running", "done", "done-with-warnings", "done-with-error-result"],
)
def test_get_job_status_answers_as_the_provider_says(
    standin: BigQueryStandIn, script: JobScript, status: str, active: bool, succeeded: bool
) -> None:
    prefix = f"status_{status}_{script.ends}_{script.pending:g}"
    standin.script(JobScript(**{**script.as_json(), "prefix": prefix}))
    _insert(f"{prefix}_1")
    operator = _operator(prefix)
    answered = operator.get_job_status(f"{prefix}_1", _context())
    assert answered == status
    assert operator.is_job_active(answered) is active
    assert operator.is_job_succeeded(answered) is succeeded


def test_get_job_status_of_an_unknown_job_is_not_found(standin: BigQueryStandIn) -> None:
    operator = _operator("never_inserted")
    assert operator.get_job_status("never_inserted_0", _context()) == "not_found"
    assert _requests(standin, "never_inserted_0") == [("GET", "jobs", 404)]


def test_a_reused_job_id_gets_409_and_the_operator_looks_that_job_up(
    standin: BigQueryStandIn,
) -> None:
    standin.script(JobScript(prefix="direct_reused", running=0))
    job_id = _operator("direct_reused").execute(_context())
    with pytest.raises(AirflowException, match=f"{job_id} already exists and is in DONE state"):
        _operator("direct_reused").execute(_context())  # a new run: nothing stored
    assert _requests(standin, job_id)[-2:] == [("POST", "insert", 409), ("GET", "jobs", 200)]
    submitted = standin.jobs.submissions("direct_reused")
    assert submitted["created"] == [job_id]
    assert submitted["conflicts"] == [job_id]


@pytest.mark.parametrize("lost", ["drop", "error-500"])
def test_a_lost_insert_answer_is_retried_by_the_client_into_a_409(
    standin: BigQueryStandIn, lost: str
) -> None:
    prefix = f"direct_lost_{lost}"
    standin.script(JobScript(prefix=prefix, running=FOREVER, insert_response=lost))
    context = _context()
    with pytest.raises(AirflowException, match="already exists and is in RUNNING state"):
        _operator(prefix).execute(context)
    job_id = derived_job_id(prefix)
    first = 500 if lost == "error-500" else None
    assert _requests(standin, job_id) == [
        ("POST", "insert", first),
        ("POST", "insert", 409),
        ("GET", "jobs", 200),
    ]
    assert standin.submissions(prefix) == 1  # the job runs on, and no id was stored
    assert context["task_state_store"] == {}
    # the next try finds no id, submits the same id again and fails the same way
    retry = _context(try_number=2, store=context["task_state_store"])
    with pytest.raises(AirflowException, match="already exists and is in RUNNING state"):
        _operator(prefix).execute(retry)
    assert standin.jobs.submissions(prefix)["conflicts"] == [job_id, job_id]
    assert standin.jobs.release(prefix) == [job_id]


def test_a_lost_insert_answer_reattaches_when_running_is_a_reattach_state(
    standin: BigQueryStandIn,
) -> None:
    standin.script(JobScript(prefix="direct_reattach", running=FOREVER, insert_response="drop"))
    _release_after_reads(standin, derived_job_id("direct_reattach"), reads=1)  # the lookup
    context = _context()
    operator = _operator("direct_reattach", reattach_states={"PENDING", "RUNNING"})
    assert operator.execute(context) == derived_job_id("direct_reattach")
    assert context["task_state_store"] == {"bigquery_job_id": derived_job_id("direct_reattach")}
    assert standin.submissions("direct_reattach") == 1


def test_lost_poll_answers_raise_once_the_result_retry_gives_up(
    standin: BigQueryStandIn,
) -> None:
    from google.api_core.exceptions import RetryError
    from google.cloud.bigquery import DEFAULT_RETRY
    from requests.exceptions import ConnectionError as RequestsConnectionError

    standin.script(JobScript(prefix="direct_lost_poll", running=FOREVER, poll_response="drop"))
    context = _context()
    operator = _operator("direct_lost_poll", result_retry=DEFAULT_RETRY.with_timeout(2.0))
    with pytest.raises(RetryError) as raised:
        operator.execute(context)
    assert isinstance(raised.value.__cause__, RequestsConnectionError)
    job_id = derived_job_id("direct_lost_poll")
    assert context["task_state_store"] == {"bigquery_job_id": job_id}  # stored before the poll
    seen = _requests(standin, job_id)
    assert seen[:2] == [("POST", "insert", 200), ("GET", "jobs", 200)]
    assert set(seen[2:]) == {("GET", "queries", None)}  # jobs.get still answers
    assert operator.get_job_status(job_id, context) == "RUNNING"
    assert standin.jobs.release("direct_lost_poll") == [job_id]


# -- the stand-in itself ----------------------------------------------------------------------


def _http(url: str, body: dict[str, Any] | None = None, token: str = "") -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_scripts_and_submissions_over_http(standin: BigQueryStandIn) -> None:
    status, script = _http(
        f"{standin.url}/_standin/script", {"prefix": "http_", "ends": "error", "running": 0}
    )
    assert status == 200
    assert standin.jobs.script_for("http_1") == JobScript.from_json(script)
    _insert("http_1")
    status, counted = _http(f"{standin.url}/_standin/submissions?prefix=http_")
    assert (status, counted["submissions"], counted["conflicts"]) == (200, 1, [])
    assert _http(f"{standin.url}/_standin/script", {"prefix": "x", "ends": "maybe"})[0] == 400


def test_the_jobs_api_wants_a_token_it_issued(standin: BigQueryStandIn) -> None:
    status, answer = _http(f"{standin.url}/bigquery/v2/projects/{standin.project}/jobs/any")
    assert (status, answer["error"]["status"]) == (401, "UNAUTHENTICATED")


def test_run_on_its_own_with_scripts_from_a_file(tmp_path: Path) -> None:
    scripts = tmp_path / "scripts.json"
    scripts.write_text(json.dumps([{"prefix": "cli_", "running": 0, "ends": "error"}]))
    env_file = tmp_path / "standin.env"
    command = ["-m", "devstack.bigquery_standin", "--scripts", str(scripts)]
    process = subprocess.Popen([sys.executable, *command, "--env-file", str(env_file)], cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while not env_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        env = dict(line.split("=", 1) for line in env_file.read_text().splitlines())
        url = env["BIGQUERY_EMULATOR_HOST"]
        key = json.loads(env["AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT"])["extra"]["keyfile_dict"]
        assert json.loads(key)["token_uri"] == f"{url}/token"
        token = _http(f"{url}/token", {})[1]["access_token"]
        job = {"jobReference": {"jobId": "cli_1"}, "configuration": copy.deepcopy(CONFIGURATION)}
        status, inserted = _http(f"{url}/bigquery/v2/projects/p/jobs", job, token)
        assert (status, inserted["status"]["errorResult"]["reason"]) == (200, "invalidQuery")
        assert _http(f"{url}/_standin/submissions?prefix=cli_")[1]["created"] == ["cli_1"]
    finally:
        process.terminate()
        assert process.wait(timeout=30) == 0


def test_the_two_clients_read_bigquery_emulator_host_differently(
    standin: BigQueryStandIn,
) -> None:
    from gcloud.aio.bigquery.bigquery import init_api_root
    from google.auth.credentials import AnonymousCredentials
    from google.cloud.bigquery import Client

    host = os.environ["BIGQUERY_EMULATOR_HOST"]
    assert host.startswith("http://127.0.0.1:")
    client = Client(project=standin.project, credentials=AnonymousCredentials())
    endpoint = client._connection.API_BASE_URL
    assert endpoint == host  # the value as the endpoint, scheme included
    # gcloud-aio (the provider's async hook: cancel, query output) adds a scheme of its own
    assert init_api_root(None) == (True, f"http://{host}/bigquery/v2")


# -- dag.test(): the task runner, the task state store, the triggerer ------------------------


@pytest.fixture(scope="module")
def cases(airflow_db: Path, standin: BigQueryStandIn) -> Any:
    """The DAGs of ``bigquery_dags/``, in the Airflow home's bundle and imported here."""
    shutil.copy(CASES, airflow_db / "dags" / CASES.name)
    from tests.resumable.bigquery_dags import bq_standin_cases

    return bq_standin_cases


def _run(cases: Any, dag_id: str) -> tuple[str, list[str]]:
    """Run the DAG once; its run id and the states of its task's tries."""
    run = getattr(cases, dag_id).test()
    return run.run_id, [t.state for t in tries(dag_id, run.run_id, "query")]


def _stored_job_id(dag_id: str, run_id: str) -> str | None:
    rows = query(
        "select value from task_state_store where dag_id=? and run_id=? and key=?",
        dag_id,
        run_id,
        "bigquery_job_id",
    )
    return json.loads(rows[0][0]) if rows else None


@pytest.mark.airflow
def test_dag_test_clean_job(standin: BigQueryStandIn, cases: Any) -> None:
    standin.script(JobScript(prefix="bq_clean", running=0.5))
    run_id, states = _run(cases, "bq_clean")
    assert states == ["success"]
    assert _stored_job_id("bq_clean", run_id) == derived_job_id("bq_clean", "bq_clean")


@pytest.mark.airflow
def test_dag_test_templated_job_id_carries_the_try(standin: BigQueryStandIn, cases: Any) -> None:
    standin.script(JobScript(prefix="bq_tmpl_a1", running=0.3, ends="error"))
    standin.script(JobScript(prefix="bq_tmpl_a2", running=0.3))
    run_id, states = _run(cases, "bq_templated")
    assert states == ["failed", "success"]
    first, second = (derived_job_id(f"bq_tmpl_a{n}", "bq_templated") for n in (1, 2))
    assert standin.jobs.submissions("bq_tmpl_")["created"] == [first, second]
    # try 2 read the status of try 1's stored id ("error": resubmit), then stored its own
    try_2 = tries("bq_templated", run_id, "query")[1].start
    assert try_2 is not None
    read_in_try_2 = [
        request
        for request in standin.requests_to(f"/jobs/{first}")
        if pendulum.parse(request["at"]) >= try_2
    ]
    assert [(r["method"], r["status"]) for r in read_in_try_2] == [("GET", 200)]
    assert _stored_job_id("bq_templated", run_id) == second


@pytest.mark.airflow
def test_dag_test_retry_with_the_same_id_meets_its_own_done_job(
    standin: BigQueryStandIn, cases: Any
) -> None:
    standin.script(JobScript(prefix="bq_same", running=0.3, ends="error"))
    _, states = _run(cases, "bq_retried_same_id")
    assert states == ["failed", "failed"]
    job_id = derived_job_id("bq_same", "bq_retried_same_id")
    submitted = standin.jobs.submissions("bq_same")
    assert (submitted["created"], submitted["conflicts"]) == ([job_id], [job_id])


@pytest.mark.airflow
def test_dag_test_a_second_run_reuses_the_id_and_fails(
    standin: BigQueryStandIn, cases: Any
) -> None:
    standin.script(JobScript(prefix="bq_reused", running=0))
    assert _run(cases, "bq_reused")[1] == ["success"]
    assert _run(cases, "bq_reused")[1] == ["failed"]
    job_id = derived_job_id("bq_reused", "bq_reused")
    assert standin.jobs.submissions("bq_reused")["conflicts"] == [job_id]
    assert _requests(standin, job_id)[-2:] == [("POST", "insert", 409), ("GET", "jobs", 200)]


@pytest.mark.airflow
@pytest.mark.parametrize(
    ("dag_id", "ends", "state"),
    [
        ("bq_deferrable", "success", "success"),
        ("bq_deferrable_error", "error", "failed"),
    ],
)
def test_dag_test_deferrable_polls_from_the_trigger_and_stores_no_id(
    standin: BigQueryStandIn, cases: Any, dag_id: str, ends: str, state: str
) -> None:
    configured = cases.JOB_IDS[dag_id]
    job_id = derived_job_id(configured, dag_id)
    standin.script(JobScript(prefix=configured, running=FOREVER, ends=ends))
    _release_after_reads(standin, job_id, reads=2)  # the worker's, then the trigger's first
    run_id, states = _run(cases, dag_id)
    assert states == [state]
    polls = _requests(standin, job_id)[1:]
    # the trigger reads jobs.get (the sync client in a thread), never getQueryResults
    assert len(polls) >= 3
    assert {api for _, api, _ in polls} == {"jobs"}
    assert _stored_job_id(dag_id, run_id) is None
    # the try's id is in its XComs only, which a new try clears
    paths = query(
        "select value from xcom where dag_id=? and run_id=? and key='job_id_path'", dag_id, run_id
    )
    assert [json.loads(value) for (value,) in paths] == [f"{standin.project}:{LOCATION}:{job_id}"]
    assert standin.submissions(configured) == 1
