"""A blip of Airflow is not a verdict: decisions ride out what Airflow's own client rides out.

On a real scheduler with the LocalExecutor, the workers reach the API server
through a TCP proxy of the test's own (:mod:`tests.hooks.tcp_proxy`): one for the
execution API (the task SDK's client and the retry policy's clock read), one for
the gate's REST connection. Nothing else changes in the stack.

* A try fails, and the proxy cuts every connection for 4 s from the moment the
  policy reads the API server's clock: less than Airflow's own client rides out,
  less than ``[retry_window] clock_read_limit`` (6 s here). The model decides and
  the retry succeeds.
* The same with a cut longer than the limit: the decision is a recorded refusal
  that says how many tries were made, over how long.
* A gate whose first two REST requests are answered 502 (HAProxy's page without a
  Date, then one with it) decides, and its record shows the reads tried again.
* A gate whose API is cut for longer than it rides out (Airflow's 5 tries, within
  its ``gate_timeout``, 20 s here) fails closed, saying how many tries it made over
  how long; its guarded task never runs.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devstack.stack import ADMIN, AirflowStack, free_port, prepared_sqlite_db
from tests.hooks.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.airflow, pytest.mark.slow(minutes=1.3)]

DAGS = Path(__file__).with_name("outage_dags")
SERVICES = ("api-server", "scheduler", "dag-processor")
DAG_IDS = ("rw_outage_blip", "rw_outage_long", "rw_outage_gate", "rw_outage_gate_long")
EVIDENCE_KEY = "retry_window.evidence"
#: the policy's bound on its reads of Airflow, every try and wait included
CLOCK_READ_LIMIT = 6.0
#: the gates' bound on one whole decision, every read and try included
GATE_TIMEOUT = 20.0
#: the clock read that starts a cut: the policy's GET of the execution API's root
CLOCK_READ = "GET /execution/ "
RUN_TIMEOUT = 150
HOUR = 3600


class Proxies:
    """The stack's proxies: the execution API's and each gate's REST connection's."""

    def __init__(self, rest: int, execution: int) -> None:
        self.execution = TcpProxy(execution)
        self.rest = TcpProxy(rest)
        self.rest_long = TcpProxy(rest)

    def close(self) -> None:
        for each in (self.execution, self.rest, self.rest_long):
            each.close()


@pytest.fixture(scope="module")
def proxies() -> Iterator[Proxies]:
    both = Proxies(free_port(), free_port())
    try:
        yield both
    finally:
        both.close()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, proxies: Proxies) -> Iterator[AirflowStack]:
    """A SQLite stack whose workers reach the API server through the proxies."""
    home = tmp_path_factory.mktemp("api-outage")
    dags = home / "dags"
    shutil.copytree(DAGS, dags, ignore=shutil.ignore_patterns("__pycache__"))

    def connection(through: TcpProxy) -> str:
        fields = {"conn_type": "http", "host": through.url, "login": ADMIN[0]}
        return json.dumps({**fields, "password": ADMIN[1]})

    settings = {
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{proxies.execution.url}/execution/",
        "AIRFLOW_CONN_RW_OUTAGE_API": connection(proxies.rest),
        "AIRFLOW_CONN_RW_OUTAGE_API_LONG": connection(proxies.rest_long),
        "AIRFLOW__RETRY_WINDOW__CLOCK_READ_LIMIT": str(CLOCK_READ_LIMIT),
        "AIRFLOW__RETRY_WINDOW__GATE_TIMEOUT": str(GATE_TIMEOUT),
    }
    running = AirflowStack(
        home=home,
        database_url=f"sqlite:///{home}/airflow.db?timeout=30",
        dags_folder=dags,
        extra_env=settings,
        port=proxies.rest.upstream or 0,
        execution_port=proxies.execution.upstream or 0,
    )
    running.prepare_from(prepared_sqlite_db())
    try:
        running.start(*SERVICES)
        for dag_id in DAG_IDS:
            running.wait_for_dag(dag_id)
        yield running
    finally:
        running.stop()


def run(stack: AirflowStack, dag_id: str, label: str) -> tuple[str, Path]:
    """Trigger one run of ``dag_id`` and wait for its end; its run id and counter file."""
    counter = stack.home / f"{dag_id}-{label}.runs"
    conf = {"deadline_in": HOUR, "counter": str(counter)}
    run_id = stack.trigger(dag_id, conf=conf, logical_date="2026-11-01")
    stack.wait_for_run(dag_id, run_id, timeout=RUN_TIMEOUT)
    return run_id, counter


def body_runs(counter: Path) -> list[str]:
    return counter.read_text().splitlines() if counter.exists() else []


def evidence(stack: AirflowStack, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
    rows = stack.rows(
        "select value from task_state_store"
        " where dag_id=:d and run_id=:r and task_id=:t and key=:k",
        d=dag_id,
        r=run_id,
        t=task_id,
        k=EVIDENCE_KEY,
    )
    assert rows, f"no {EVIDENCE_KEY} for {dag_id}.{task_id}\n{stack.log_tails()}"
    return dict(json.loads(rows[0][0]))


def gate_record(stack: AirflowStack, dag_id: str, run_id: str) -> dict[str, Any]:
    rows = stack.rows(
        "select value from xcom where dag_id=:d and run_id=:r and task_id='gate'"
        " and key='return_value'",
        d=dag_id,
        r=run_id,
    )
    assert rows, f"the gate pushed no decision record\n{stack.log_tails()}"
    value = rows[0][0]
    decoded = json.loads(value) if isinstance(value, (str, bytes)) else value
    return json.loads(decoded) if isinstance(decoded, str) else decoded  # type: ignore[no-any-return]


def clock_reads(proxy: TcpProxy) -> int:
    return sum(1 for _, line in proxy.requests if line.startswith(CLOCK_READ))


def test_a_cut_shorter_than_the_bound_is_ridden_out_and_the_retry_succeeds(
    stack: AirflowStack, proxies: Proxies
) -> None:
    before = clock_reads(proxies.execution)
    proxies.execution.cut_on(CLOCK_READ, 4.0)
    run_id, counter = run(stack, "rw_outage_blip", "blip")
    assert proxies.execution.outages, "the policy never read the clock through the proxy"
    assert stack.task_states("rw_outage_blip", run_id)["load"] == ("success", 2)
    assert body_runs(counter) == ["load try 1", "load try 2"]
    latest = evidence(stack, "rw_outage_blip", run_id, "load")["latest"]
    # the model decided, after the tries that met the cut
    assert (latest["tryNumber"], latest["action"]) == (1, "retry")
    assert latest["result"]["tasks"][0]["decision"] == "wait-backoff"
    assert latest["clockRead"]["tries"] >= 2
    assert 3.5 <= latest["clockRead"]["seconds"] < CLOCK_READ_LIMIT
    assert clock_reads(proxies.execution) - before == latest["clockRead"]["tries"]


def test_a_cut_longer_than_the_bound_is_a_recorded_refusal_saying_how_many_tries(
    stack: AirflowStack, proxies: Proxies
) -> None:
    before = clock_reads(proxies.execution)
    proxies.execution.cut_on(CLOCK_READ, CLOCK_READ_LIMIT + 3)
    run_id, counter = run(stack, "rw_outage_long", "long")
    assert stack.task_states("rw_outage_long", run_id)["load"] == ("failed", 1)
    assert body_runs(counter) == ["load try 1"]
    latest = evidence(stack, "rw_outage_long", run_id, "load")["latest"]
    assert (latest["tryNumber"], latest["action"]) == (1, "fail")
    tries = latest["clockRead"]["tries"]
    assert clock_reads(proxies.execution) - before == tries
    assert tries >= 3
    seconds = latest["clockRead"]["seconds"]
    assert CLOCK_READ_LIMIT - 2 <= seconds <= CLOCK_READ_LIMIT + 1
    assert latest["reason"].startswith("gate-error: ClockError: the API server's clock")
    assert f"after {tries} tries over {seconds:.1f} s" in latest["reason"]


def test_a_gate_rides_out_502s_with_and_without_a_date_and_records_them(
    stack: AirflowStack, proxies: Proxies
) -> None:
    before = len(proxies.rest.requests)
    proxies.rest.bad_gateways(False, True)  # HAProxy's page, then one with a Date
    run_id, counter = run(stack, "rw_outage_gate", "gate")
    states = stack.task_states("rw_outage_gate", run_id)
    assert states["gate"] == ("success", 1) and states["load"] == ("success", 1)
    assert body_runs(counter) == ["load try 1"]
    record = gate_record(stack, "rw_outage_gate", run_id)
    assert record["retriedReads"] == {"retries": 2, "causes": ["HTTP 502", "HTTP 502"]}
    # each 502 closes its connection: the first three connections are the token's tries
    lines = [line for _, line in proxies.rest.requests[before:]]
    assert lines[:3] == ["POST /auth/token HTTP/1.1"] * 3
    # the three requests of a healthy read (the token, the run's task instances, the
    # pools: the later ones share the third connection) and the two tries again
    assert record["requests"] == 3 + 2
    assert [row["decision"] for row in record["decisions"]] == ["not-attempted"]


def gate_log_lines(stack: AirflowStack, dag_id: str) -> list[str]:
    """Every line of the gate's task logs in ``dag_id`` (JSON lines, as Airflow writes them)."""
    found = []
    for path in sorted((stack.home / "logs").glob(f"dag_id={dag_id}/**/task_id=gate/**/*.log")):
        found.extend(path.read_text(errors="replace").splitlines())
    return found


def test_a_gate_cut_off_longer_than_it_rides_out_fails_closed_saying_how_many_tries(
    stack: AirflowStack, proxies: Proxies
) -> None:
    proxies.rest_long.cut(GATE_TIMEOUT * 3)
    run_id, counter = run(stack, "rw_outage_gate_long", "gate-long")
    states = stack.task_states("rw_outage_gate_long", run_id)
    assert states["gate"] == ("failed", 1)
    assert states["load"][0] == "upstream_failed"
    assert body_runs(counter) == []
    tries = len(proxies.rest_long.requests)
    assert tries >= 3, "the gate never tried its API"
    said = [line for line in gate_log_lines(stack, "rw_outage_gate_long") if "tries over" in line]
    assert said, "the gate's failure does not say how many tries it made"
    match = re.search(r"after (\d+) tries over ([\d.]+) s", said[-1])
    assert match is not None
    # the tries ([workers] execution_api_retries, 5) ran out within the gate's timeout
    assert int(match[1]) == tries == 5
    assert 4 <= float(match[2]) < GATE_TIMEOUT
