"""A whole gate decision against a real local server imitating Airflow's API: its
clock measured against the server's, its answers capped in size, and the whole
decision bounded in time.

The server here lies about its clock (its ``Date``); the same with this process's
own clock skewed (faketime) against a real Airflow is in ``test_gate_stack.py``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pendulum
import pytest
from airflow.sdk import DAG, BaseOperator

from airflow_retrywindow import Deadline
from airflow_retrywindow.exceptions import RetryWindowGateError
from airflow_retrywindow.gate import run as gate_run
from airflow_retrywindow.gate.decide import DecisionTable
from airflow_retrywindow.hooks.connection_type import CONN_TYPE
from airflow_retrywindow.timing.work import Work
from tests.hooks.fake_api import FakeAirflowApi, Served, pool, serve, stamp, task_instance

WORK = Work(duration=timedelta(minutes=2), validation=timedelta(seconds=30), safe_repeat=True)
CONN_ID = "rw_gate_bounds"
SECTION = "AIRFLOW__RETRY_WINDOW__"


@pytest.fixture
def api() -> FakeAirflowApi:
    return FakeAirflowApi(pools=[pool("default_pool", 128)])


@pytest.fixture
def server(api: FakeAirflowApi, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    for served in serve(api):
        connection = {"conn_type": CONN_TYPE, "host": served.url, "login": "reader",
                      "password": "reader-pw"}  # fmt: skip
        monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", json.dumps(connection))
        yield served


def failed_load(
    api: FakeAirflowApi, *, ended_ago: float, server_shift: float = 0.0
) -> pendulum.DateTime:
    """``load`` failed ``ended_ago`` seconds before now on the server's clock; its end."""
    ended = pendulum.now("UTC").add(seconds=server_shift - ended_ago)
    row = task_instance("load")
    row.update(max_tries=2, start_date=stamp(ended.subtract(minutes=1)), end_date=stamp(ended))
    api.task_instances = [row]
    return ended


def decide_load(*, deadline_in: timedelta = timedelta(hours=6)) -> DecisionTable:
    with DAG("etl", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
        BaseOperator(task_id="load", retries=2, retry_delay=timedelta(seconds=30))
    settings = gate_run.GateSettings(
        targets={"load": WORK}, deadline=Deadline.at(pendulum.now("UTC") + deadline_in),
        max_observation_age=3600, conn_id=CONN_ID, page_size=100, timeout=30,
    )  # fmt: skip
    context: dict[str, Any] = {"dag": dag, "dag_run": SimpleNamespace(run_id="run_1")}
    return gate_run.decide_run(settings, context).table


# -- one clock ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shift", "words"),
    [(60.0, "the API server's (the Airflow REST API at http://127.0.0.1:"),
     (-60.0, "this worker's clock runs about")],
)  # fmt: skip
def test_a_server_clock_beyond_the_tolerance_refuses_naming_the_clock(
    server: Served, api: FakeAirflowApi, shift: float, words: str
) -> None:
    api.clock_shift = shift
    failed_load(api, ended_ago=600, server_shift=shift)
    with pytest.raises(RetryWindowGateError) as refused:
        decide_load()
    text = str(refused.value)
    assert words in text and re.search(r"clock runs about (59|60|61) s ahead", text), text
    assert "tolerance of 5 s" in text


def test_within_the_tolerance_a_backoff_runs_on_the_servers_clock(
    server: Served, api: FakeAirflowApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(f"{SECTION}CLOCK_SKEW_TOLERANCE", "10")
    # on the server's clock, 8 s behind this worker's, the 30 s backoff has 5 s to run;
    # on this worker's clock it ended 3 s ago
    api.clock_shift = -8.0
    ended = failed_load(api, ended_ago=25, server_shift=-8.0)
    row = decide_load().decision("load")
    assert row.decision == "wait-backoff"
    assert row.earliest_start is not None
    # the backoff's end on the server's clock, rounded up by the model's whole seconds
    backoff_ends = ended.add(seconds=30)
    assert backoff_ends <= row.earliest_start <= backoff_ends.add(seconds=2)

    # the same end on a server whose clock agrees with this worker's: the backoff is over
    api.clock_shift = 0.0
    failed_load(api, ended_ago=33)
    assert decide_load().decision("load").decision == "retry-eligible"


def test_within_the_tolerance_the_deadline_is_met_on_the_servers_clock(
    server: Served, api: FakeAirflowApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(f"{SECTION}CLOCK_SKEW_TOLERANCE", "10")
    failed_load(api, ended_ago=600)
    fits = timedelta(seconds=150 + 4)  # one attempt and its validation, 4 s to spare
    assert decide_load(deadline_in=fits).decision("load").decision == "retry-eligible"
    api.clock_shift = 8.0  # the deadline's clock runs 8 s ahead of this worker's
    failed_load(api, ended_ago=600, server_shift=8.0)
    assert decide_load(deadline_in=fits).decision("load").decision == "deadline-infeasible"


# -- bounded in size and time ------------------------------------------------------------------


def test_an_oversized_answer_refuses_naming_the_address_and_the_limit(
    server: Served, api: FakeAirflowApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(f"{SECTION}API_MAX_RESPONSE_BYTES", "4096")
    failed_load(api, ended_ago=600)
    api.padding = 8192
    with pytest.raises(RetryWindowGateError) as refused:
        decide_load()
    text = str(refused.value)
    assert f"the answer to POST {server.url}/auth/token declares" in text
    assert "more than the 4096 bytes a gate reads ([retry_window] api_max_response_bytes)" in text


def test_a_decision_that_outlasts_the_gate_timeout_refuses_and_says_so(
    server: Served, api: FakeAirflowApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(f"{SECTION}GATE_TIMEOUT", "1")
    failed_load(api, ended_ago=600)
    api.delay = 0.4  # the token, the task instances, XCom keys, pools: 1.6 s in all
    started = time.monotonic()
    with pytest.raises(RetryWindowGateError, match=r"ran out of its 1 s \(\[retry_window\] gate_"):
        decide_load()
    assert time.monotonic() - started < 3
    api.delay = 0.0
    assert decide_load().decision("load").decision == "retry-eligible"


def test_a_try_that_just_ended_on_a_server_clock_ahead_within_the_tolerance_is_decided(
    server: Served, api: FakeAirflowApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(f"{SECTION}CLOCK_SKEW_TOLERANCE", "10")
    # the end is 7 s after this worker's "now": an API time ahead, but no more than
    # the server's clock is, so the read is consistent and the backoff just began
    api.clock_shift = 8.0
    ended = failed_load(api, ended_ago=1, server_shift=8.0)
    row = decide_load().decision("load")
    assert row.decision == "wait-backoff"
    assert row.earliest_start is not None and row.earliest_start >= ended.add(seconds=30)


def test_a_busy_servers_late_date_is_asked_again_before_a_backoff_is_found_running(
    server: Served, api: FakeAirflowApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(f"{SECTION}CLOCK_SKEW_TOLERANCE", "30")
    # the 30 s backoff ended 5 s ago, on both clocks
    failed_load(api, ended_ago=600)
    decide_load()
    reads = len(api.paths())
    failed_load(api, ended_ago=35)
    # a busy server: every answer of the reads carries a Date 10 s old, within the
    # tolerance; deciding at both ends of that measurement would find 5 s of backoff left
    # and skip the retry (a gate does not wait). The gate asks again.
    api.stale_answers = reads
    assert decide_load().decision("load").decision == "retry-eligible"
    assert api.paths()[-1] == "/api/v2/version"  # the fresh answer
    # a server really 8 s behind, within the tolerance, still has 3 s of backoff to run
    api.clock_shift = -8.0
    failed_load(api, ended_ago=27, server_shift=-8.0)
    assert decide_load().decision("load").decision == "wait-backoff"


def test_a_busy_servers_late_date_is_asked_again_before_this_worker_is_found_ahead(
    server: Served, api: FakeAirflowApi
) -> None:
    failed_load(api, ended_ago=600)
    assert decide_load().decision("load").decision == "retry-eligible"
    reads = len(api.paths())
    # a busy server: every answer of the reads carries a Date 10 s old (uvicorn renews it
    # from its event loop), as if this worker's clock ran 10 s ahead; the gate asks again
    api.stale_answers = reads
    assert decide_load().decision("load").decision == "retry-eligible"
    assert api.paths()[-1] == "/api/v2/version"  # the fresh answer
    # a clock that is really behind stays behind however often it is asked
    api.clock_shift = -10.0
    failed_load(api, ended_ago=600, server_shift=-10.0)
    with pytest.raises(RetryWindowGateError, match=r"worker.s clock runs about (9|10|11) s ahead"):
        decide_load()
