"""A try Airflow's scheduler failed by its reschedule race is decided by the model.

The scheduler of Airflow 3.3.2 fails a try whose trigger fired, or whose
reschedule date came, before it took in the exit of the process that handed the
try back, and writes ``state mismatch`` to the event log. The retry-start check
of the next try recognises it from that entry and our stored decisions, and the
model decides, instead of refusing the try as one whose process was lost. The
real policy, cluster policy and operator run in-process; the event log is read
from a stand-in of the REST API served on 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any

import pendulum
import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_retrywindow.policies import lost_try as lost_try_module
from airflow_retrywindow.policies.lost_try import (
    DEFERRED,
    RESCHEDULED,
    STATE_MISMATCH,
    lost_try,
    may_be_lost,
    read_mismatches,
)
from airflow_retrywindow.records import evidence
from airflow_retrywindow.timing.time_limit import TimeLimit
from tests.hooks.fake_api import FakeAirflowApi, Served, serve, stamp
from tests.policy.resumable_jobs import Store
from tests.policy.test_failure_paths import _installed, context, policy

FAILED_AT = datetime(2026, 3, 2, 5, 0, 7, tzinfo=timezone.utc)


def message(executor_state: str = "success", found: str = "queued") -> str:
    """What the scheduler of Airflow 3.3.2 writes, word for word but for the names."""
    return (
        "Executor LocalExecutor(parallelism=32) reported that the task instance "
        f"<TaskInstance: rw.load run_1 [{found}]> finished with state {executor_state}, "
        f"but the task instance's state attribute is {found}. Learn more: "
        "https://airflow.apache.org/docs/apache-airflow/stable/troubleshooting.html"
        "#task-state-changed-externally"
    )


def mismatch(try_number: int = 1, **kwargs: str) -> dict[str, Any]:
    """One event log entry as the REST reader returns it."""
    return {
        "event": STATE_MISMATCH,
        "tryNumber": try_number,
        "mapIndex": -1,
        "extra": message(**kwargs),
        "when": FAILED_AT,
    }


def handed_over(try_number: int) -> dict[str, Any]:
    """A history whose latest decision handed try ``try_number`` back to Airflow."""
    entry = evidence.record(
        fixture={}, origin="2026-03-02T05:00:00Z", result={}, task_ids={}, try_number=try_number,
        failure=evidence.RETRYABLE, reason="wait-backoff", action="retry",
    )  # fmt: skip
    return evidence.appended(None, {**entry, "check": "retry-policy"})


def rescheduled(try_number: int) -> dict[str, Any]:
    """A history whose latest decision rescheduled try ``try_number`` at its start."""
    entry = evidence.record(
        fixture={}, origin="2026-03-02T05:00:00Z", result={}, task_ids={}, try_number=try_number,
        failure=evidence.RETRYABLE, reason="wait-backoff", action="reschedule",
    )  # fmt: skip
    return evidence.appended(None, {**entry, "check": "retry-start"})


# -- recognising it ---------------------------------------------------------------


def test_a_try_rescheduled_at_its_start_and_failed_by_the_scheduler_is_recognised() -> None:
    found = lost_try(rescheduled(2), 2, [mismatch(2)], first_of_window=False)
    assert found is not None
    assert (found.try_number, found.how, found.failure) == (2, RESCHEDULED, "retryable")
    assert found.ended_at == FAILED_AT
    # it ran nothing: a resumable job is read for the try its reschedule was decided on
    assert found.job_try == 1
    assert found.as_dict()["foundState"] == "queued"
    assert "apache/airflow#67287" in found.subject()


@pytest.mark.parametrize("found_state", ["scheduled", "queued"])
def test_a_try_let_start_that_deferred_is_recognised(found_state: str) -> None:
    # try 2 started because the policy handed try 1 back; it deferred and was failed
    found = lost_try(handed_over(1), 2, [mismatch(2, found=found_state)], first_of_window=False)
    assert found is not None
    assert (found.how, found.failure) == (DEFERRED, "retryable")
    assert found.job_try == 2
    # a window's first try needs no decision to start
    assert lost_try(None, 1, [mismatch(1, found=found_state)], first_of_window=True) is not None


@pytest.mark.parametrize(
    ("history", "previous", "entries", "first"),
    [
        # nothing in Airflow's event log: a killed process, a lost heartbeat
        (handed_over(1), 2, [], False),
        # the executor saw the process fail: killed, not handed back
        (handed_over(1), 2, [mismatch(2, executor_state="failed")], False),
        # the task instance was not waiting again
        (handed_over(1), 2, [mismatch(2, found="up_for_retry")], False),
        # a killed task process is reported finished with success too, while it runs
        (handed_over(1), 2, [mismatch(2, found="running")], False),
        (rescheduled(2), 2, [mismatch(2, found="running")], False),
        # a mismatch of another try
        (handed_over(1), 2, [mismatch(1)], False),
        # nothing of ours let try 2 start: it is not ours to excuse
        (handed_over(0), 2, [mismatch(2)], False),
        (None, 2, [mismatch(2)], False),
        # another event, or an entry of no known shape
        (handed_over(1), 2, [{**mismatch(2), "event": "heartbeat timeout"}], False),
        (handed_over(1), 2, [{**mismatch(2), "extra": None}], False),
        (handed_over(1), 2, [{**mismatch(2), "when": "2026-03-02"}], False),
    ],
)
def test_anything_else_is_not_recognised(
    history: Any, previous: int, entries: list[dict[str, Any]], first: bool
) -> None:
    assert lost_try(history, previous, entries, first_of_window=first) is None


def test_the_event_log_is_read_only_when_our_decisions_say_the_try_could_be_lost() -> None:
    assert may_be_lost(rescheduled(2), 2, first_of_window=False) == RESCHEDULED
    assert may_be_lost(handed_over(1), 2, first_of_window=False) == DEFERRED
    assert may_be_lost(None, 1, first_of_window=True) == DEFERRED
    assert may_be_lost(None, 2, first_of_window=False) is None
    assert may_be_lost(handed_over(0), 2, first_of_window=False) is None
    # try 2 was rescheduled at its start and starts again: try 1 was decided then
    assert may_be_lost(rescheduled(2), 1, first_of_window=True) is None


# -- the retry-start check decides it -------------------------------------------------


class EventLog:
    """What the check reads of Airflow's event log, and which tries it read it for."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []
        self.reads: list[int] = []
        self.limits: list[TimeLimit | None] = []

    def read(
        self, ti: Any, try_number: int, limit: TimeLimit | None = None
    ) -> list[dict[str, Any]]:
        self.reads.append(try_number)
        self.limits.append(limit)
        return list(self.entries)


@pytest.fixture
def event_log(monkeypatch: pytest.MonkeyPatch) -> EventLog:
    log = EventLog()
    monkeypatch.setattr(lost_try_module, "read_mismatches", log.read)
    return log


def _recent_mismatch(try_number: int) -> dict[str, Any]:
    # the scheduler failed it a minute ago: Airflow's own retry delay has passed since
    return {**mismatch(try_number), "when": pendulum.now("UTC").subtract(minutes=1)}


def test_the_next_try_after_a_lost_first_try_is_decided_by_the_model(
    event_log: EventLog,
) -> None:
    task = _installed(policy())
    store = Store()
    event_log.entries.append(_recent_mismatch(1))
    # try 1 (its window's first) deferred and the scheduler failed it; try 2 starts
    task._pre_execute_hook(context(task, try_number=2, max_tries=2, store=store))  # runs
    latest = store.values[evidence.EVIDENCE_KEY]["latest"]
    assert (latest["tryNumber"], latest["check"], latest["action"]) == (2, "retry-start", "run")
    assert latest["failure"] == "retryable"
    assert latest["result"]["tasks"][0]["decision"] == "retry-eligible"
    assert latest["lostTry"]["tryNumber"] == 1 and latest["lostTry"]["how"] == DEFERRED
    assert "Airflow's scheduler failed it" in latest["reason"]
    assert event_log.reads == [1]
    # read within the start check's one time limit, which every read of it shares
    (limit,) = event_log.limits
    assert limit is not None and limit.what == "the retry-start check"
    assert limit.option == "clock_read_limit" and 0 < limit.left() <= limit.seconds


def test_the_model_still_refuses_a_repeat_nobody_said_is_safe(
    event_log: EventLog,
) -> None:
    task = _installed(policy(safe_repeat=False))
    store = Store()
    event_log.entries.append(_recent_mismatch(1))
    with pytest.raises(AirflowFailException, match=r"^reconcile-effects"):
        task._pre_execute_hook(context(task, try_number=2, max_tries=2, store=store))
    latest = store.values[evidence.EVIDENCE_KEY]["latest"]
    assert latest["result"]["tasks"][0]["decision"] == "reconcile-effects"
    assert latest["lostTry"]["tryNumber"] == 1


def test_without_airflows_record_the_try_is_refused_as_before(
    event_log: EventLog,
) -> None:
    task = _installed(policy())
    store = Store()
    with pytest.raises(AirflowFailException, match=r"^reconcile-remote: the outcome of attempt 1"):
        task._pre_execute_hook(context(task, try_number=2, max_tries=2, store=store))
    latest = store.values[evidence.EVIDENCE_KEY]["latest"]
    assert "lostTry" not in latest
    assert "try 1 ended without a retry decision" in latest["reason"]


def test_a_try_rescheduled_at_its_start_and_lost_waits_a_backoff_from_its_loss(
    event_log: EventLog,
) -> None:
    task = _installed(policy())
    store = Store()
    store.set(evidence.EVIDENCE_KEY, rescheduled(2))
    event_log.entries.append({**mismatch(2), "when": pendulum.now("UTC")})
    # the scheduler failed try 2 just now: a backoff from then, the same try rescheduled
    ctx = context(task, try_number=3, max_tries=3, store=store)
    verdict = task._pre_execute_hook.verdict(ctx)
    assert verdict is not None and verdict.action == "reschedule"
    assert verdict.start_at is not None and verdict.start_at > pendulum.now("UTC")
    latest = store.values[evidence.EVIDENCE_KEY]["latest"]
    assert latest["lostTry"]["how"] == RESCHEDULED
    assert latest["result"]["tasks"][0]["decision"] == "wait-backoff"


# -- reading Airflow's event log --------------------------------------------------------


@pytest.fixture
def api_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    api = FakeAirflowApi()
    for number, (try_number, event) in enumerate(
        [(1, STATE_MISMATCH), (2, STATE_MISMATCH), (1, "heartbeat timeout")]
    ):
        api.event_logs.append(
            {
                "event_log_id": number, "event": event, "when": stamp(FAILED_AT),
                "dag_id": "rw", "task_id": "load", "run_id": "run_1", "map_index": -1,
                "try_number": try_number, "extra": message(),
            }
        )  # fmt: skip
    served = serve(api)
    running = next(served)
    monkeypatch.setenv(
        "AIRFLOW_CONN_AIRFLOW_API_DEFAULT",
        f'{{"conn_type": "http", "host": "{running.url}", "login": "reader", '
        '"password": "reader-pw"}',
    )
    yield running
    served.close()


def test_the_mismatches_are_read_through_the_gates_rest_connection(api_server: Served) -> None:
    ti = SimpleNamespace(dag_id="rw", run_id="run_1", task_id="load", map_index=-1)
    (entry,) = read_mismatches(ti, 1)
    assert entry["event"] == STATE_MISMATCH and entry["tryNumber"] == 1
    assert entry["when"] == FAILED_AT
    assert lost_try(None, 1, [entry], first_of_window=True) is not None
    (request,) = [r for r in api_server.api.received if r.path == "/api/v2/eventLogs"]
    assert request.query["event"] == [STATE_MISMATCH]
    assert (request.query["try_number"], request.query["run_id"]) == (["1"], ["run_1"])


def test_an_event_log_that_cannot_be_read_recognises_nothing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_AIRFLOW_API_DEFAULT", '{"conn_type": "http", "host": "http://127.0.0.1:9"}'
    )
    monkeypatch.setenv("AIRFLOW__RETRY_WINDOW__API_TIMEOUT", "2")
    ti = SimpleNamespace(dag_id="rw", run_id="run_1", task_id="load", map_index=-1)
    assert read_mismatches(ti, 1) == []
    assert "Could not read Airflow's event log" in caplog.text
