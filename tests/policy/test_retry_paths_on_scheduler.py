"""Every way a try of a gated task can end, on a real scheduler with the LocalExecutor.

The retry policy runs in the task process. When that process is killed, or the
scheduler fails the try because its heartbeat stopped, Airflow schedules the
retry without asking the policy; the retry-start check must then refuse the next
try before the task's code runs. An execution timeout, an ordinary retryable
failure and a failure whose message holds a registered secret go through the
policy itself.

A failure or an observation may carry credentials the way ordinary libraries
print them (a presigned URL, an authorization header, URL userinfo) and a unit of
work a value registered with ``mask_secret``: none of them may reach any table of
the metadata DB or a line the provider logs, and the run view reads a run that
also holds a user's value shaped like a decision record. A failure may also carry
a credential by its name in six syntaxes no list of shapes covered (a URL
fragment, a dict repr, a DSN, an Azure connection string, an ``X-Api-Key:`` and a
``Cookie:`` header line): no text, JSON or binary column of any table holds one.

One stack (API server, scheduler, DAG processor) serves the whole module, with
a heartbeat timeout of 15 s instead of 300 s. Every run is triggered as soon as
the stack is up, so the runs overlap and each test waits for its own.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import urllib.error
import urllib.request
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pendulum
import psutil
import pytest
import sqlalchemy

from devstack.stack import ADMIN, FREQUENT_HEARTBEATS, AirflowStack, sqlite_stack

pytestmark = [pytest.mark.airflow, pytest.mark.slow(minutes=1.5)]

DAGS = Path(__file__).with_name("scheduler_dags")
SERVICES = ("api-server", "scheduler", "dag-processor")
HOUR = 3600
#: the scheduler fails a running try that has not heartbeaten for this long (default 300 s):
#: on CI's busiest minutes a killed try's supervisor took over 15 s to report its exit
HEARTBEAT_TIMEOUT = 30
#: the secret the leaking task registers with Airflow's masker; reaches the task
#: through the services' environment, so only a leak can put it in the metadata DB
SECRET = secrets.token_hex(24)
SECRET_ENV = "RW_SCHEDULER_PATHS_SECRET"
#: one distinct, unguessable value per credential the credentials DAG shows; it reads
#: them from the services' environment, so only a leak can put them in the DB or a log
CREDENTIALS = {
    "amz_credential": f"AKIA{secrets.token_hex(8).upper()}",
    "amz_token": secrets.token_hex(16),
    "amz_signature": secrets.token_hex(32),
    "bearer": f"eyJ{secrets.token_hex(12)}.eyJ{secrets.token_hex(12)}.{secrets.token_hex(12)}",
    # unencoded '/' and '@' in the password: each part is a secret of its own
    "url_password": f"{secrets.token_hex(8)}/{secrets.token_hex(8)}@{secrets.token_hex(8)}",
    "source_password": f"{secrets.token_hex(8)}@{secrets.token_hex(8)}/{secrets.token_hex(8)}",
    "delivery_token": secrets.token_hex(20),
}
CREDENTIALS_ENV = "RW_SCHEDULER_CREDENTIALS"
#: the six credentials the syntaxes DAG raises, each in a syntax of its own
SYNTAX_CREDENTIALS = {
    name: secrets.token_hex(12)
    for name in ("fragment", "dict_repr", "dsn", "account_key", "api_key_header", "cookie")
}
SYNTAX_CREDENTIALS_ENV = "RW_SCHEDULER_SYNTAX_CREDENTIALS"
EVIDENCE_KEY = "retry_window.evidence"
#: dag id -> the task id it runs
TASKS = {
    "rw_sched_sigkill": "killed",
    "rw_sched_heartbeat": "lost",
    "rw_sched_exec_timeout": "slow",
    "rw_sched_retry": "flaky",
    "rw_sched_secret": "leaky",
    "rw_sched_credentials": "leaks",
    "rw_sched_credential_syntaxes": "syntaxes",
}
RUN_TIMEOUT = 150


@dataclass(frozen=True)
class Run:
    """One triggered DAG run and the files its task writes."""

    dag_id: str
    run_id: str
    counter: Path
    pids: Path

    @property
    def task_id(self) -> str:
        return TASKS[self.dag_id]

    def body_runs(self) -> list[str]:
        """One line per time the task's own code started."""
        return self.counter.read_text().splitlines() if self.counter.exists() else []


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowStack]:
    """A SQLite stack with a short heartbeat timeout and the secret in its environment."""
    home = tmp_path_factory.mktemp("scheduler-paths")
    dags = home / "dags"
    shutil.copytree(DAGS, dags, ignore=shutil.ignore_patterns("__pycache__"))
    settings = {
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT),
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "1",
        **FREQUENT_HEARTBEATS,
        SECRET_ENV: SECRET,
        CREDENTIALS_ENV: json.dumps(CREDENTIALS),
        SYNTAX_CREDENTIALS_ENV: json.dumps(SYNTAX_CREDENTIALS),
    }
    with sqlite_stack(home, SERVICES, list(TASKS), dags_folder=dags, extra_env=settings) as running:
        yield running


@pytest.fixture(scope="module")
def runs(stack: AirflowStack) -> dict[str, Run]:
    """One run of every DAG, all triggered before any test waits for one."""
    files = stack.home / "task-files"
    files.mkdir()
    started = {}
    for dag_id in TASKS:
        counter, pids = files / f"{dag_id}.runs", files / f"{dag_id}.pids"
        conf = {"deadline_in": HOUR, "counter": str(counter), "pids": str(pids)}
        run_id = stack.trigger(dag_id, conf=conf, logical_date="2026-11-01")
        started[dag_id] = Run(dag_id, run_id, counter, pids)
    return started


def finished(stack: AirflowStack, run: Run) -> str:
    """Wait for ``run`` to end; its state."""
    return stack.wait_for_run(run.dag_id, run.run_id, timeout=RUN_TIMEOUT)


def evidence(stack: AirflowStack, run: Run) -> dict[str, Any]:
    """The gate's decisions for the run's task, from the task state store."""
    rows = stack.rows(
        "select value from task_state_store"
        " where dag_id=:d and run_id=:r and task_id=:t and key=:k",
        d=run.dag_id,
        r=run.run_id,
        t=run.task_id,
        k=EVIDENCE_KEY,
    )
    assert rows, f"no {EVIDENCE_KEY} for {run.dag_id}.{run.task_id}\n{stack.log_tails()}"
    return dict(json.loads(rows[0][0]))


def task_instance(stack: AirflowStack, run: Run) -> tuple[str, int]:
    """The task instance's (state, try number)."""
    return stack.task_states(run.dag_id, run.run_id)[run.task_id]


def history(stack: AirflowStack, run: Run) -> list[tuple[Any, ...]]:
    """Earlier tries: (try number, state, start, end, retry_delay_override, retry_reason)."""
    return stack.rows(
        "select try_number, state, start_date, end_date, retry_delay_override, retry_reason"
        " from task_instance_history where dag_id=:d and run_id=:r and task_id=:t"
        " order by try_number",
        d=run.dag_id,
        r=run.run_id,
        t=run.task_id,
    )


def heartbeat_timeouts(stack: AirflowStack, run: Run) -> list[int]:
    """Try numbers the scheduler failed for a missing heartbeat (its audit log)."""
    rows = stack.rows(
        "select try_number from log where event='heartbeat timeout'"
        " and dag_id=:d and run_id=:r and task_id=:t",
        d=run.dag_id,
        r=run.run_id,
        t=run.task_id,
    )
    return [int(row[0]) for row in rows]


def assert_refused_at_retry_start(stack: AirflowStack, run: Run) -> None:
    """The contract for a retry Airflow scheduled without the policy: try 2 refused."""
    lines = run.body_runs()
    assert len(lines) == 1 and lines[0].startswith(f"{run.task_id} try 1 "), lines
    assert task_instance(stack, run) == ("failed", 2)
    stored = evidence(stack, run)
    # try 1 ended without a decision; the only one is the refusal of try 2
    assert [d["tryNumber"] for d in stored["decisions"]] == [2]
    latest = stored["latest"]
    assert latest["tryNumber"] == 2
    assert latest["action"] == "fail"
    assert latest["failure"] == "unknown"
    assert latest["check"] == "retry-start"
    assert latest["result"]["tasks"][0]["decision"] == "reconcile-remote"
    assert latest["reason"].startswith("reconcile-remote: ")
    assert "try 1 ended without a retry decision" in latest["reason"]
    # the window counts the lost attempt: the model saw attempt 1 of 3 end unknown
    assert latest["fixture"]["tasks"][0]["attempts"] == 1
    assert latest["fixture"]["policy"]["maxAttempts"] == 3


def test_sigkilled_task_process_is_refused_at_the_next_try(
    stack: AirflowStack, runs: dict[str, Run]
) -> None:
    run = runs["rw_sched_sigkill"]
    assert finished(stack, run) == "failed"
    assert_refused_at_retry_start(stack, run)
    # the supervisor saw the exit and reported it: no heartbeat timeout was needed
    assert heartbeat_timeouts(stack, run) == []


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_heartbeat_timeout_is_refused_at_the_next_try(
    stack: AirflowStack, runs: dict[str, Run]
) -> None:
    run = runs["rw_sched_heartbeat"]
    assert finished(stack, run) == "failed"
    killed = json.loads(run.pids.read_text())
    # LocalExecutor 3.3: the task process is forked by the executor's worker process,
    # which is its supervisor (it heartbeats and reports the end); both were killed
    assert "airflow worker -- LocalExecutor" in killed["supervisor_cmdline"]
    assert killed["task_pgid"] == killed["task"]
    assert _gone(killed["task"]) and _gone(killed["supervisor"])
    # nobody reported try 1's end: the scheduler failed it for its missing heartbeat
    assert heartbeat_timeouts(stack, run) == [1]
    assert_refused_at_retry_start(stack, run)


def test_execution_timeout_is_an_unknown_outcome(stack: AirflowStack, runs: dict[str, Run]) -> None:
    run = runs["rw_sched_exec_timeout"]
    assert finished(stack, run) == "failed"
    assert len(run.body_runs()) == 1
    assert task_instance(stack, run) == ("failed", 1)
    stored = evidence(stack, run)
    assert [d["tryNumber"] for d in stored["decisions"]] == [1]
    latest = stored["latest"]
    assert (latest["tryNumber"], latest["action"]) == (1, "fail")
    assert latest["failure"] == "unknown"
    assert latest["check"] == "retry-policy"
    assert latest["result"]["tasks"][0]["decision"] == "reconcile-remote"
    assert "AirflowTaskTimeout" in latest["reason"]


def test_retryable_failure_retries_after_the_model_delay(
    stack: AirflowStack, runs: dict[str, Run]
) -> None:
    run = runs["rw_sched_retry"]
    assert finished(stack, run) == "success"
    assert [line.split()[:3] for line in run.body_runs()] == [
        ["flaky", "try", "1"],
        ["flaky", "try", "2"],
        ["flaky", "try", "3"],
    ]
    assert task_instance(stack, run) == ("success", 3)
    stored = evidence(stack, run)
    decisions = stored["decisions"]
    # both retries were the policy's; the retry-start check let them through
    assert [d["tryNumber"] for d in decisions] == [1, 2]
    assert [d["check"] for d in decisions] == ["retry-policy", "retry-policy"]
    assert [d["action"] for d in decisions] == ["retry", "retry"]
    assert [d["result"]["tasks"][0]["decision"] for d in decisions] == [
        "wait-backoff",
        "wait-backoff",
    ]
    model_delays = [float(d["result"]["tasks"][0]["backoff"]) for d in decisions]
    assert model_delays == [1.0, 2.0]  # retry_delay 1 s, then doubled
    earlier = history(stack, run)
    assert [row[0] for row in earlier] == [1, 2]
    assert [row[4] for row in earlier] == model_delays
    current = stack.rows(
        "select start_date from task_instance where dag_id=:d and run_id=:r and task_id=:t",
        d=run.dag_id,
        r=run.run_id,
        t=run.task_id,
    )
    starts = [pendulum.parse(row[2]) for row in earlier] + [pendulum.parse(current[0][0])]
    ends = [pendulum.parse(row[3]) for row in earlier]
    for end, next_start, delay in zip(ends, starts[1:], model_delays, strict=True):
        assert (next_start - end).total_seconds() >= delay  # type: ignore[operator]


def _holds(value: object, needle: str) -> bool:
    if isinstance(value, str):
        return needle in value
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        if needle.encode() in raw:
            return True
        try:
            return needle.encode() in zlib.decompress(raw)
        except zlib.error:
            return False
    return False


def _cells(stack: AirflowStack) -> Iterator[tuple[str, str, object]]:
    """(table, column, value) of every cell of every table of the metadata DB."""
    tables = [row[0] for row in stack.rows("select name from sqlite_master where type='table'")]
    for table in tables:
        for row in stack.rows(f'select * from "{table}"'):
            for column, value in row._mapping.items():
                yield table, column, value


def stored_anywhere(stack: AirflowStack, needles: Iterable[str]) -> list[str]:
    """Where any of ``needles`` is in the metadata DB: ``table.column: value``."""
    wanted = list(needles)
    return [
        f"{table}.{column}: {str(value)[:300]}"
        for table, column, value in _cells(stack)
        if any(_holds(value, needle) for needle in wanted)
    ]


def task_log_lines(stack: AirflowStack) -> Iterator[tuple[Path, str, str]]:
    """(file, line, event) of every line of every task log file: Airflow writes JSON lines."""
    for path in sorted((stack.home / "logs").glob("dag_id=*/**/*.log")):
        for line in path.read_text(errors="replace").splitlines():
            try:
                event = str(json.loads(line).get("event"))
            except (ValueError, AttributeError):
                event = line
            yield path, line, event


def all_finished(stack: AirflowStack, runs: dict[str, Run]) -> None:
    """Wait for every run: nothing may still be writing when the DB or a log is read."""
    for run in runs.values():
        finished(stack, run)


def test_a_registered_secret_is_stored_nowhere(stack: AirflowStack, runs: dict[str, Run]) -> None:
    run = runs["rw_sched_secret"]
    assert finished(stack, run) == "failed"
    all_finished(stack, runs)
    assert len(run.body_runs()) == 2
    assert task_instance(stack, run) == ("failed", 2)
    masked = "GET https://api.example.test/v1?api_key=*** failed"

    stored = evidence(stack, run)
    decisions = stored["decisions"]
    assert [d["result"]["tasks"][0]["decision"] for d in decisions] == [
        "wait-backoff",
        "attempts-exhausted",
    ]
    assert all(masked in d["reason"] for d in decisions)
    earlier = history(stack, run)
    assert [row[0] for row in earlier] == [1]
    retry_reason = earlier[0][5]
    assert retry_reason and retry_reason.startswith("wait-backoff: ") and masked in retry_reason

    assert stored_anywhere(stack, [SECRET]) == []
    # the scan read the places the failure's text went to, masked
    masked_in = {table for table, _, value in _cells(stack) if _holds(value, masked)}
    assert {"task_state_store", "task_instance_history", "xcom"} <= masked_in
    # Airflow masks a registered secret in every task log line, its own and ours
    assert [
        f"{path}: {line[:300]}" for path, line, _ in task_log_lines(stack) if SECRET in line
    ] == []


# -- credentials the way libraries show them ---------------------------------------------

#: what stays of each failure's text once its credentials are masked
MASKED_FAILURES = (
    "HTTPError: 403 Client Error: Forbidden for url: https://bucket.s3.amazonaws.com/"
    "positions.csv?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=***",
    "headers {'Authorization': '***', 'Accept': 'application/json'}",
    "could not reach https://***@warehouse.example.test:8443/load",
)
MASKED_SOURCE = "https://***@jobs.example.com/v1/jobs/positions"


def credential_parts(*names: str) -> list[str]:
    """The credentials ``names`` (all by default), and each part of a password around its
    unencoded '/' and '@'."""
    parts = []
    for name in names or CREDENTIALS:
        value = CREDENTIALS[name]
        parts.append(value)
        parts.extend(piece for piece in re.split(r"[/@]", value) if piece != value)
    return parts


def gate_record(stack: AirflowStack, run: Run) -> dict[str, Any]:
    """The decision record the credentials DAG's gate published."""
    rows = stack.rows(
        "select value from xcom where dag_id=:d and run_id=:r and task_id='retry_gate'"
        " and key='return_value'",
        d=run.dag_id,
        r=run.run_id,
    )
    assert rows, f"no record of retry_gate\n{stack.log_tails()}"
    value = rows[0][0]
    return dict(json.loads(value) if isinstance(value, (str, bytes)) else value)


def test_a_failures_credentials_are_masked_where_the_policy_keeps_its_text(
    stack: AirflowStack, runs: dict[str, Run]
) -> None:
    run = runs["rw_sched_credentials"]
    assert finished(stack, run) == "failed"
    assert len(run.body_runs()) == 3
    assert task_instance(stack, run) == ("failed", 3)
    decisions = evidence(stack, run)["decisions"]
    assert [d["result"]["tasks"][0]["decision"] for d in decisions] == [
        "wait-backoff",
        "wait-backoff",
        "attempts-exhausted",
    ]
    for decision, masked in zip(decisions, MASKED_FAILURES, strict=True):
        assert masked in decision["reason"], decision["reason"]
    retry_reasons = [row[5] for row in history(stack, run)]
    assert len(retry_reasons) == 2
    for retry_reason, masked in zip(retry_reasons, MASKED_FAILURES[:2], strict=True):
        assert retry_reason.startswith("wait-backoff: ") and masked in retry_reason


def test_the_gate_record_masks_the_observation_source_and_the_unit_of_work(
    stack: AirflowStack, runs: dict[str, Run]
) -> None:
    run = runs["rw_sched_credentials"]
    finished(stack, run)
    record = gate_record(stack, run)
    (row,) = record["decisions"]
    assert (row["taskId"], row["source"]) == ("load", "observations")
    assert row["classification"] == f"explicit observation ({MASKED_SOURCE})"
    assert MASKED_SOURCE in row["reason"]
    assert record["workUnit"] == {"business_date": "2026-11-01", "delivery_token": "***"}
    assert "Unit of work: business_date=2026-11-01, delivery_token=***." in record["statusUpdate"]
    # the observation was taken: load retried on it and ran
    assert stack.task_states(run.dag_id, run.run_id)["load"] == ("success", 1)


#: Airflow's own log record of the exception a task raised, written before it asks the
#: retry policy: the exception's text as raised, masked by Airflow's masker only
AIRFLOWS_EXCEPTION_RECORD = "Task failed with exception"


def test_no_credential_is_stored_and_the_provider_logs_none(
    stack: AirflowStack, runs: dict[str, Run]
) -> None:
    all_finished(stack, runs)
    assert stored_anywhere(stack, credential_parts()) == []
    # what the gate was given reaches no task log line at all
    from_the_gate = credential_parts("source_password", "delivery_token")
    logged = [
        f"{path.relative_to(stack.home)}: {line[:400]}"
        for path, line, _ in task_log_lines(stack)
        if any(part in line for part in from_the_gate)
    ]
    assert logged == []
    # a failure's credentials only in Airflow's record of the raised exception, never in a
    # line of the provider (its decision, its evidence, the reason Airflow logs for it)
    in_failures = credential_parts("amz_credential", "amz_token", "amz_signature", "bearer")
    in_failures += credential_parts("url_password")
    logged_by = {
        (path.parent.name, event if event == AIRFLOWS_EXCEPTION_RECORD else line[:400])
        for path, line, event in task_log_lines(stack)
        if any(part in line for part in in_failures)
    }
    assert logged_by == {("task_id=leaks", AIRFLOWS_EXCEPTION_RECORD)}


#: what stays of each syntax once its credential is masked, two a try
MASKED_SYNTAXES = (
    "https://app.example.test/cb#access_token=***&state=s42",
    "bad settings {'user': 'etl', 'password': '***'}",
    "host=db.example.test user=etl password=*** dbname=wh",
    "AccountName=acct;AccountKey=***;EndpointSuffix=core.windows.net",
    "403 Forbidden, sent:\nX-Api-Key: ***\nAccept: application/json",
    "401, sent:\nCookie: ***\nAccept: text/html",
)


def text_cells(stack: AirflowStack) -> Iterator[tuple[str, str, object]]:
    """(table, column, value) of every text, JSON and binary column of every table,
    found by SQLAlchemy's inspection of the metadata DB."""
    inspector = sqlalchemy.inspect(stack.engine)
    kinds = (sqlalchemy.String, sqlalchemy.JSON, sqlalchemy.LargeBinary)
    for table in inspector.get_table_names():
        columns = [
            column["name"]
            for column in inspector.get_columns(table)
            if isinstance(column["type"], kinds)
        ]
        if not columns:
            continue
        listed = ", ".join(f'"{column}"' for column in columns)
        for row in stack.rows(f'select {listed} from "{table}"'):
            for column, value in row._mapping.items():
                yield table, column, value


def test_credentials_in_six_syntaxes_reach_no_table(
    stack: AirflowStack, runs: dict[str, Run]
) -> None:
    run = runs["rw_sched_credential_syntaxes"]
    assert finished(stack, run) == "failed"
    all_finished(stack, runs)
    assert task_instance(stack, run) == ("failed", 3)
    reasons = [d["reason"] for d in evidence(stack, run)["decisions"]]
    assert len(reasons) == 3
    # each text reached the places the policy keeps it, whole and masked
    for try_index, reason in enumerate(reasons[:3]):
        for masked in MASKED_SYNTAXES[2 * try_index : 2 * try_index + 2]:
            assert masked in reason, reason
    retry_reasons = [row[5] for row in history(stack, run)]
    assert [masked for masked in MASKED_SYNTAXES[:4] if masked not in "".join(retry_reasons)] == []

    cells = list(text_cells(stack))
    found = [
        f"{table}.{column}: {str(value)[:300]}"
        for table, column, value in cells
        if any(_holds(value, secret) for secret in SYNTAX_CREDENTIALS.values())
    ]
    assert found == []
    # the scan read the tables the failures' texts went to
    read = {table for table, _, value in cells if _holds(value, "AccountKey=***;")}
    assert {"task_state_store", "task_instance_history"} <= read
    # and no line the provider logs holds them (Airflow's own record of the exception
    # is masked by Airflow's masker only, which knows nothing of these)
    logged_by = {
        (path.parent.name, event if event == AIRFLOWS_EXCEPTION_RECORD else line[:400])
        for path, line, event in task_log_lines(stack)
        if any(secret in line for secret in SYNTAX_CREDENTIALS.values())
    }
    assert logged_by <= {("task_id=syntaxes", AIRFLOWS_EXCEPTION_RECORD)}


def _view(stack: AirflowStack, path: str) -> tuple[int, str]:
    """GET a page of the Retry window view as the admin user: (status, body)."""
    login = json.dumps({"username": ADMIN[0], "password": ADMIN[1]}).encode()
    asked = urllib.request.Request(
        f"{stack.url}/auth/token", login, {"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(asked, timeout=30) as answer:
        token = json.loads(answer.read())["access_token"]
    request = urllib.request.Request(stack.url + path, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _run_view(stack: AirflowStack, run: Run) -> tuple[int, str]:
    return _view(stack, f"/retry-window/dags/{run.dag_id}/runs/{quote(run.run_id, safe='')}")


def test_the_run_view_reads_a_run_holding_a_record_look_alike(
    stack: AirflowStack, runs: dict[str, Run]
) -> None:
    run = runs["rw_sched_credentials"]
    finished(stack, run)
    status, page = _run_view(stack, run)
    assert status == 200, page[:2000]
    # the policy's decisions and the gate's record, next to the look-alike
    assert page.count('data-task="leaks"') >= 3
    assert "Gate retry_gate" in page
    assert "delivery_token=***" in page
    assert not [part for part in credential_parts() if part in page]


def test_the_run_view_shows_a_record_look_alike_as_not_a_record(
    stack: AirflowStack, runs: dict[str, Run]
) -> None:
    run = runs["rw_sched_credentials"]
    finished(stack, run)
    status, page = _run_view(stack, run)
    assert status == 200
    assert "not a retry window record" in page
    assert "made-up-decision" not in page
