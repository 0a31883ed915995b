"""The retry policy measures the API server's clock before it decides.

A real local server stands in for the execution API server; its ``Date`` header
comes from a clock running ahead of or behind this process's. The same checks
with this process's own clock skewed (faketime) against a real Airflow API server
are in ``tests/gate/test_gate_stack.py``.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pendulum
import pytest
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG

from airflow_retrywindow import RetryWindowPolicy
from airflow_retrywindow.policies.server_clock import NO_SERVER, execution_api_url
from airflow_retrywindow.records import evidence
from tests.hooks.fake_api import FakeAirflowApi, Served, serve
from tests.policy.resumable_jobs import Store, TaskInstance

START = pendulum.datetime(2026, 3, 1, tz="UTC")
URL_ENV = "AIRFLOW__CORE__EXECUTION_API_SERVER_URL"
TOLERANCE_ENV = "AIRFLOW__RETRY_WINDOW__CLOCK_SKEW_TOLERANCE"
#: the wait and one attempt with its validation: 30 s + 120 s + 60 s
NEEDED = 210


@pytest.fixture
def api() -> FakeAirflowApi:
    return FakeAirflowApi()


@pytest.fixture
def server(api: FakeAirflowApi, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    for served in serve(api):
        monkeypatch.setenv(URL_ENV, f"{served.url}/execution/")
        yield served


def decide(deadline: pendulum.DateTime, **arguments: Any) -> tuple[Any, dict[str, Any]]:
    """The policy's answer for a retryable failure of try 1 of 3, and its evidence."""
    gate = RetryWindowPolicy(
        deadline=deadline, duration=120, validation=60, safe_repeat=True, **arguments
    )
    with DAG("rw_server_clock", schedule=None, start_date=START):
        task = PythonOperator(
            task_id="load",
            python_callable=lambda: None,
            retries=2,
            retry_delay=timedelta(seconds=30),
            retry_policy=gate,
        )
    store = Store()
    now = pendulum.now("UTC")
    context = {
        "task": task,
        "ti": TaskInstance(1, 2),
        "task_state_store": store,
        "data_interval_start": now.subtract(minutes=5),
        "data_interval_end": now,
    }
    decision = gate.evaluate(ConnectionError("reset"), 1, 2, context)
    return decision, store.values[evidence.EVIDENCE_KEY]["latest"]


@pytest.mark.parametrize(
    ("shift", "ahead"),
    [
        (60.0, r"the API server's \(the Airflow API server at http://127\.0\.0\.1:\d+/execution/\) "
               r"clock runs about (60|61) s ahead of this worker's"),
        (-60.0, r"this worker's clock runs about (59|60) s ahead of the API server's"),
    ],
)  # fmt: skip
def test_a_clock_beyond_the_tolerance_refuses_the_retry_naming_the_clock(
    server: Served, api: FakeAirflowApi, shift: float, ahead: str
) -> None:
    api.clock_shift = shift
    decision, kept = decide(pendulum.now("UTC").add(hours=6))
    assert decision.action.value == "fail"
    assert decision.reason.startswith("gate-error:")
    assert pytest.approx(60, abs=1) == float(
        decision.reason.split("clock runs about ")[1].split(" s")[0]
    )
    assert re.search(ahead, decision.reason), decision.reason
    assert "tolerance of 5 s" in decision.reason
    assert kept["action"] == "fail"
    # this worker's clock found ahead is confirmed twice: a Date may be noted early
    asked = 1 if shift > 0 else 3
    assert [request.path for request in api.received] == ["/execution/"] * asked


def test_a_clock_beyond_the_tolerance_is_handed_to_airflow_with_on_error_default(
    server: Served, api: FakeAirflowApi
) -> None:
    api.clock_shift = 60.0
    decision, kept = decide(pendulum.now("UTC").add(hours=6), on_error="default")
    assert decision.action.value == "default"
    assert re.search(r"clock runs about (60|61) s ahead of this worker's", kept["reason"])


def test_within_the_tolerance_the_server_clock_decides_at_its_stricter_end(
    server: Served, api: FakeAirflowApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOLERANCE_ENV, "10")
    # on this worker's clock the retry fits with 4 s to spare
    deadline = pendulum.now("UTC").add(seconds=NEEDED + 4)
    decision, _ = decide(deadline)
    assert (decision.action.value, decision.reason.split(":")[0]) == ("retry", "wait-backoff")

    # the server's clock, which the deadline is on, runs 8 s ahead: it does not fit
    api.clock_shift = 8.0
    deadline = pendulum.now("UTC").add(seconds=NEEDED + 4)
    decision, kept = decide(deadline)
    assert (decision.action.value, decision.reason.split(":")[0]) == (
        "fail",
        "deadline-infeasible",
    )
    clock = kept["clock"]
    assert clock["offsetLow"] <= 8 <= clock["offsetHigh"]
    assert clock["offsetHigh"] - clock["offsetLow"] < 3


def test_a_date_noted_early_is_asked_again_before_this_worker_is_found_ahead(
    server: Served, api: FakeAirflowApi
) -> None:
    api.stale_answers = 1  # the server's event loop was busy: its Date is 10 s old
    decision, kept = decide(pendulum.now("UTC").add(hours=6))
    assert decision.action.value == "retry"
    assert [request.path for request in api.received] == ["/execution/"] * 2
    assert kept["clock"]["offsetLow"] <= 0 <= kept["clock"]["offsetHigh"]


def quick_retries(monkeypatch: pytest.MonkeyPatch, tries: int = 5) -> None:
    monkeypatch.setenv("AIRFLOW__RETRY_WINDOW__API_RETRIES", str(tries))
    monkeypatch.setenv("AIRFLOW__RETRY_WINDOW__API_RETRY_WAIT_MIN", "0.05")
    monkeypatch.setenv("AIRFLOW__RETRY_WINDOW__API_RETRY_WAIT_MAX", "0.1")


@pytest.mark.parametrize("dated", [False, True], ids=["no Date", "a Date"])
def test_error_answers_are_tried_again_and_the_evidence_says_how_often(
    server: Served, api: FakeAirflowApi, monkeypatch: pytest.MonkeyPatch, dated: bool
) -> None:
    quick_retries(monkeypatch)
    api.clock_shift = 3600.0  # an error answer's Date would refuse: only the last one counts
    api.error_answers = [(502, dated), (503, True)]
    api.clock_shift = 0.0
    decision, kept = decide(pendulum.now("UTC").add(hours=6))
    assert decision.action.value == "retry"
    assert api.paths() == ["/execution/"] * 3
    assert kept["clockRead"]["tries"] == 3
    assert 0 < kept["clockRead"]["seconds"] < 2
    assert kept["clock"]["offsetLow"] <= 0 <= kept["clock"]["offsetHigh"]


def test_an_outage_past_the_bound_refuses_saying_how_many_tries_over_how_long(
    server: Served, api: FakeAirflowApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    quick_retries(monkeypatch, tries=100)
    monkeypatch.setenv("AIRFLOW__RETRY_WINDOW__CLOCK_READ_LIMIT", "1.5")
    api.error_answers = [(502, False)] * 1000
    started = pendulum.now("UTC")
    decision, kept = decide(started.add(hours=6))
    took = (pendulum.now("UTC") - started).total_seconds()
    assert decision.action.value == "fail"
    tries = len(api.received)
    assert 5 <= tries < 100 and took < 3
    assert f"after {tries} tries over 1." in decision.reason
    assert kept["reason"].startswith("gate-error:")
    assert kept["clockRead"]["tries"] == tries
    # no try starts past the bound; the last one may end a moment after it
    assert 1.0 <= kept["clockRead"]["seconds"] <= 1.5 + 0.3


def test_a_clock_read_limit_the_heartbeat_would_not_tolerate_is_refused(
    server: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW__RETRY_WINDOW__CLOCK_READ_LIMIT", "10")
    decision, _ = decide(pendulum.now("UTC").add(hours=6))
    assert decision.action.value == "fail"
    assert "clock_read_limit = '10' is not valid" in decision.reason
    assert "below 10" in decision.reason


def test_an_unreachable_server_fails_closed_naming_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv(URL_ENV, f"http://probe:secret-pw@127.0.0.1:{port}/execution/")
    quick_retries(monkeypatch)
    decision, kept = decide(pendulum.now("UTC").add(hours=6))
    assert decision.action.value == "fail"
    assert f"could not be read at http://127.0.0.1:{port}/execution/" in decision.reason
    assert "after 5 tries over " in decision.reason
    assert kept["clockRead"]["tries"] == 5
    assert "secret-pw" not in decision.reason + repr(kept)
    handed, _ = decide(pendulum.now("UTC").add(hours=6), on_error="default")
    assert handed.action.value == "default"


def test_outside_a_task_run_without_a_server_url_the_process_clock_is_the_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(URL_ENV, raising=False)
    assert execution_api_url(in_task_run=False) is None
    decision, kept = decide(pendulum.now("UTC").add(hours=6))
    assert decision.action.value == "retry"
    assert kept["clock"] == {"source": NO_SERVER, "offsetLow": 0.0, "offsetHigh": 0.0}


def test_in_a_task_run_the_url_falls_back_as_the_executors_resolve_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(URL_ENV, raising=False)
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "https://airflow.example/")
    assert execution_api_url(in_task_run=True) == "https://airflow.example/execution/"
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "/airflow")
    assert execution_api_url(in_task_run=True) == "http://localhost:8080/airflow/execution/"
