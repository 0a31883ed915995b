"""A breaker pool's outage is told once, not once per failing task, and a late start tells its
impact.

:func:`settle` is tested alone; then the notifier, on failures of a task of a breaker pool
whose breaker it reads from the pool's description through the REST API (the local
imitation of Airflow's, reached through the provider's default connection). The notice
Variable is a store in memory every task instance shares.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pendulum
import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_retrywindow import Deadline, RetryWindowNotifier, RetryWindowPolicy
from airflow_retrywindow.notifications.lookup import Found, find
from airflow_retrywindow.notifications.message import Message
from airflow_retrywindow.notifications.outage import NOTICE_VERSION, Outage, outage_of, settle
from airflow_retrywindow.records.breaker_state import LATE_START
from airflow_retrywindow.records.evidence import EVIDENCE_KEY, appended
from tests.breaker.states import OPENED, POOL, closed, opened, recovering
from tests.hooks.fake_api import FakeAirflowApi, Served, pool, serve
from tests.notifications.stored import TASK_ID, policy_entry
from tests.notifications.test_notifier import StateStore, TaskInstance

DAG_ID = TaskInstance.dag_id
#: one attempt (25 min) and its validation (5 min) before 14:30: the latest start is 14:00
DEADLINE = pendulum.datetime(2026, 12, 4, 14, 30, tz="UTC")
POLICY = RetryWindowPolicy(
    deadline=Deadline.at(DEADLINE),
    duration=timedelta(minutes=25),
    validation=timedelta(minutes=5),
    safe_repeat=True,
)
LATE = (
    f"deadline-infeasible: try 1 starts at 2026-12-04 14:03:03Z, {LATE_START} 2026-12-04 "
    f"14:00:00Z (its deadline 2026-12-04 14:30:00Z less 1800 s of work and validation); pool "
    f"{POOL}'s breaker may have held it there, and it cannot finish before its deadline"
)


# -- settle, alone ----------------------------------------------------------------------


def test_an_outage_is_told_by_its_first_failure_and_then_not_again() -> None:
    outage = Outage(opened())
    first = settle(None, outage, by="positions_delivery.load (run_0) try 1")
    assert first.send
    assert first.entry == {
        "version": NOTICE_VERSION, "pool": POOL, "outage": f"{POOL} since 2026-12-04 14:00:03Z",
        "deadlineTold": False, "by": "positions_delivery.load (run_0) try 1",
    }  # fmt: skip
    again = settle(first.entry, outage, by="positions_delivery.load (run_1) try 1")
    assert (again.send, again.entry) == (False, None)
    assert again.why == f"outage {outage.name} was told by positions_delivery.load (run_0) try 1"
    # the breaker's state moves on within the outage: still the same outage
    probed_later = replace(opened(), probes=5, slots=0, reason="probe 5 of the outage")
    assert not settle(first.entry, Outage(probed_later), by="x").send
    # and into recovering, as the law moves it: the outage keeps the name it opened with
    assert recovering().since != OPENED and recovering().held_since == OPENED
    assert not settle(first.entry, Outage(recovering()), by="x").send


def test_the_first_late_start_refusal_of_a_told_outage_is_told_again_once() -> None:
    told = settle(None, Outage(opened()), by="first").entry
    refused = settle(told, Outage(opened(), refused=True), by="late")
    assert refused.send and refused.entry == {**told, "deadlineTold": True}  # type: ignore[dict-item]
    assert refused.why == f"the first refusal in {POOL} since 2026-12-04 14:00:03Z"
    assert not settle(refused.entry, Outage(opened(), refused=True), by="later").send
    # an outage first told by a refusal has told its refusal already
    first = settle(None, Outage(opened(), refused=True), by="late").entry
    assert first is not None and first["deadlineTold"] is True
    assert not settle(first, Outage(opened(), refused=True), by="later").send


def test_a_breaker_that_opens_again_later_is_a_new_outage() -> None:
    told = settle(None, Outage(opened()), by="first").entry
    later = opened(since=OPENED.add(hours=1))
    again = settle(told, Outage(later), by="second")
    assert again.send and again.entry is not None
    assert again.entry["outage"] == f"{POOL} since 2026-12-04 15:00:03Z"


@pytest.mark.parametrize(
    "kept",
    [
        None,
        "not json",
        ["a", "list"],
        {"version": NOTICE_VERSION + 1, "outage": f"{POOL} since 2026-12-04 14:00:03Z"},
        {"version": NOTICE_VERSION - 1, "outage": f"{POOL} since 2026-12-04 14:00:03Z"},
        {"version": NOTICE_VERSION, "pool": POOL},
    ],
)
def test_an_unreadable_notice_entry_tells_the_outage(kept: object) -> None:
    settled = settle(kept, Outage(opened()), by="load")
    assert settled.send
    assert settled.entry is not None and settled.entry["version"] == NOTICE_VERSION


def test_only_a_breaker_that_holds_its_pool_is_an_outage() -> None:
    assert outage_of(None) is None
    assert outage_of(closed()) is None
    found = outage_of(recovering(), refused=True)
    assert found == Outage(recovering(), refused=True)
    outage = Outage(opened())
    assert outage.variable == f"retry_window_notice_{POOL}"
    assert outage.line() == (
        f"pool {POOL}'s breaker is open since 14:00:03Z, 0 of 24 slots; last probe 14:02:11Z "
        "started (3 calls refused, none served)"
    )


# -- through the notifier ---------------------------------------------------------------


@dataclass
class NoticeBoard:
    """The notice Variables of every pool, shared by all task instances."""

    entries: dict[str, Any] = field(default_factory=dict)
    broken: bool = False

    def read(self, pool_name: str) -> object:
        if self.broken:
            raise RuntimeError("variables unavailable")
        return self.entries.get(pool_name)

    def write(self, pool_name: str, entry: dict[str, Any]) -> None:
        if self.broken:
            raise RuntimeError("variables unavailable")
        self.entries[pool_name] = entry


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    api = FakeAirflowApi(pools=[pool(POOL, 0, description=opened().described("Positions"))])
    for served in serve(api):
        monkeypatch.setenv("AIRFLOW_CONN_AIRFLOW_API_DEFAULT", served.connection())
        monkeypatch.setenv("AIRFLOW__RETRY_WINDOW__BREAKER_POOLS", json.dumps({POOL: {}}))
        yield served


def _context(run: int, *, pool_name: str = POOL, error: Exception | None = None) -> dict[str, Any]:
    """The failure callback's context of ``run``'s try 1, decided ``wait-backoff``."""
    ti = TaskInstance(state="up_for_retry" if error is None else "failed")
    task = SimpleNamespace(
        task_id=TASK_ID, pool=pool_name, retry_policy=POLICY, on_failure_callback=None,
        on_retry_callback=None,
    )  # fmt: skip
    store = StateStore({EVIDENCE_KEY: appended(None, policy_entry("wait-backoff"))})
    run_ = SimpleNamespace(run_id=f"run_{run}", data_interval_start=None, data_interval_end=None)
    return {"ti": ti, "task": task, "dag_run": run_, "run_id": run_.run_id,
            "task_state_store": store, "exception": error}  # fmt: skip


def _notifier(board: NoticeBoard) -> tuple[list[Message], RetryWindowNotifier]:
    sent: list[Message] = []
    notifier = RetryWindowNotifier(
        lambda message, context: sent.append(message),
        affected="the 40 funds of the positions file",
        notices=board,
    )
    return sent, notifier


def _pool_reads(served: Served) -> int:
    return sum(1 for each in served.api.received if each.path == f"/api/v2/pools/{POOL}")


def test_failures_of_many_task_instances_in_one_outage_send_one_notice(server: Served) -> None:
    board = NoticeBoard()
    sent, notifier = _notifier(board)
    for run in range(12):
        notifier(_context(run))
    (message,) = sent
    assert message.decision == "wait-backoff"
    assert message.subject.startswith(
        f"[retry window] wait-backoff: pool {POOL}'s breaker open since 14:00:03Z, 0 of 24 "
        "slots; last probe 14:02:11Z started; "
    )
    assert (
        f"Outage: pool {POOL}'s breaker is open since 14:00:03Z, 0 of 24 slots; last probe "
        "14:02:11Z started (3 calls refused, none served)."
    ) in message.text
    assert f"Airflow Variable retry_window_notice_{POOL} names the outage told" in message.text
    assert board.entries[POOL]["by"] == f"{DAG_ID}.{TASK_ID} (run_0) try 1"
    assert _pool_reads(server) == 12  # one read of the pool per failure


def test_a_late_start_refusal_is_found_by_its_reason_and_told_as_the_outages_first(
    server: Served,
) -> None:
    board = NoticeBoard()
    sent, notifier = _notifier(board)
    notifier(_context(0))
    for run in range(1, 4):
        notifier(_context(run, error=AirflowFailException(LATE)))
    assert [message.decision for message in sent] == ["wait-backoff", "deadline-infeasible"]
    refusal = sent[1]
    assert "Reason: " + LATE in refusal.text
    assert "Deadline missed: this task can no longer finish" in refusal.text
    assert "Evidence: the refusal of the retry-start check, in the try's log." in refusal.text
    assert "Affected population: the 40 funds of the positions file" in refusal.text
    assert "run_1" in refusal.text


def test_the_late_start_is_found_even_where_no_breaker_can_be_read(server: Served) -> None:
    server.api.refuse_every_token = True
    context = _context(0, error=AirflowFailException(LATE))
    found = find(context)
    assert isinstance(found, Found) and found.outage is None
    (notice,) = found.notices
    assert (notice.decision, notice.refused, notice.reason) == ("deadline-infeasible", True, LATE)
    # a try that can never finish: the next attempt would end past the deadline
    assert notice.lateness is not None and notice.lateness.deadline == "2026-12-04 14:30:00Z"


def test_a_failure_outside_a_breaker_pool_reads_no_pool_and_is_no_outage(server: Served) -> None:
    found = find(_context(0, pool_name="warehouse"))
    assert isinstance(found, Found) and found.outage is None
    assert server.api.received == []
    # nor is one in a breaker pool whose breaker holds nothing
    server.api.pools = [pool(POOL, 24, description=closed().described(None))]
    closed_found = find(_context(0))
    assert isinstance(closed_found, Found) and closed_found.outage is None
    assert _pool_reads(server) == 1


def test_a_notice_variable_that_cannot_be_read_still_sends(server: Served) -> None:
    sent, notifier = _notifier(NoticeBoard(broken=True))
    notifier(_context(0))
    notifier(_context(1))
    # a duplicate is better than a silenced outage
    assert [message.decision for message in sent] == ["wait-backoff"] * 2
