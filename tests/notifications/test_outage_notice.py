"""A pool's outage is told once, not once per task, and a refusal for the deadline tells its impact.

The retry-start check's records are made by the dependency's own stages: a
read of the pool's counts, ``admit`` and the check's ``_keep``, exactly as
``dependency_verdict`` stores them. Held retries reach the notifier the way the
check hands them over (``held_retry.tell_hold``); refusals through the failure
callback. The notice Variable is a store in memory every task instance shares.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pendulum
import pytest

from airflow_retrywindow import Deadline, RetryWindowNotifier, RetryWindowPolicy
from airflow_retrywindow.dependency import check
from airflow_retrywindow.dependency.admission import Retry, admit, probes_of, round_of
from airflow_retrywindow.dependency.fleet import DependencyState, PoolTry, TaskKey
from airflow_retrywindow.dependency.settings import DependencySettings
from airflow_retrywindow.notifications.held_retry import tell_hold
from airflow_retrywindow.notifications.message import Message
from airflow_retrywindow.notifications.outage import NOTICE_VERSION, outage_of, settle
from airflow_retrywindow.records.dependency_state import DependencyRecord
from airflow_retrywindow.records.evidence import EVIDENCE_KEY, appended
from tests.gate.fake_reader import pool_state
from tests.notifications.stored import TASK_ID, policy_entry

POOL = "positions_api"
DAG_ID = "positions_delivery"
SETTINGS = DependencySettings()
#: the first outage: 12 task instances failed from 14:00:03 on
FIRST = pendulum.datetime(2026, 12, 4, 14, 0, 3, tz="UTC")
DEADLINE = pendulum.datetime(2026, 12, 4, 14, 30, tz="UTC")
#: one attempt (25 min) and its validation (5 min): the latest start is 14:00:00
POLICY = RetryWindowPolicy(
    deadline=Deadline.at(DEADLINE),
    duration=timedelta(minutes=25),
    validation=timedelta(minutes=5),
    safe_repeat=True,
)


@dataclass
class TaskInstance:
    """The parts of Airflow's runtime task instance the check and a callback use."""

    task_id: str
    run_id: str
    try_number: int = 2
    dag_id: str = DAG_ID
    map_index: int = -1
    state: str = "failed"
    xcoms: dict[str, Any] = field(default_factory=dict)

    def xcom_push(self, *, key: str, value: Any) -> None:
        self.xcoms[key] = value

    def xcom_pull(self, *, task_ids: str, key: str, map_indexes: int) -> Any:
        return self.xcoms.get(key)


@dataclass
class StateStore:
    """A task state store in memory."""

    values: dict[str, Any] = field(default_factory=dict)

    def get(self, key: str) -> Any:
        return self.values.get(key)

    def set(self, key: str, value: Any) -> None:
        self.values[key] = value


@dataclass
class NoticeBoard:
    """The notice Variables of every pool, shared by all task instances; counts the writes."""

    entries: dict[str, Any] = field(default_factory=dict)
    writes: int = 0
    broken: bool = False

    def read(self, pool: str) -> object:
        if self.broken:
            raise RuntimeError("variables unavailable")
        return self.entries.get(pool)

    def write(self, pool: str, entry: dict[str, Any]) -> None:
        if self.broken:
            raise RuntimeError("variables unavailable")
        self.writes += 1
        self.entries[pool] = entry


def _outage_read(
    since: pendulum.DateTime, read_at: pendulum.DateTime, runs: int = 12
) -> DependencyState:
    """The pool as read at ``read_at``: ``runs`` task instances whose retries are held since
    ``since`` on."""
    tries = [
        PoolTry(DAG_ID, f"run_{index}", TASK_ID, -1, "deferred", 2, 3,
                since + timedelta(seconds=index), None)
        for index in range(runs)
    ]  # fmt: skip
    return pool_state(POOL, read_at, tries, settings=SETTINGS)


def _decided(
    ti: TaskInstance,
    state: DependencyState,
    *,
    latest_start: pendulum.DateTime,
    attempts_left: int = 1,
) -> StateStore:
    """The check's record for ``ti``'s try, kept as ``dependency_verdict`` keeps it.

    With one attempt left a retry never probes, so the read holds or refuses it.
    """
    key: TaskKey = (ti.dag_id, ti.run_id, ti.task_id, ti.map_index)
    retry = Retry(key, ti.try_number, attempts_left, 60, latest_start)
    admission = admit(state, retry, SETTINGS)
    store = StateStore()
    context = {"ti": ti, "task": SimpleNamespace(pool=POOL), "task_state_store": store}
    check._keep(context, None, admission, state, SETTINGS, None, None)
    return store


def _context(ti: TaskInstance, store: StateStore, notifier: RetryWindowNotifier) -> dict[str, Any]:
    task = SimpleNamespace(
        task_id=ti.task_id,
        pool=POOL,
        retry_policy=POLICY,
        on_failure_callback=[notifier],
        on_retry_callback=None,
    )
    run = SimpleNamespace(run_id=ti.run_id, data_interval_start=None, data_interval_end=None)
    return {
        "ti": ti,
        "task": task,
        "dag_run": run,
        "run_id": ti.run_id,
        "task_state_store": store,
        "exception": None,
    }


def _notifier(board: NoticeBoard) -> tuple[list[Message], RetryWindowNotifier]:
    sent: list[Message] = []
    notifier = RetryWindowNotifier(
        lambda message, context: sent.append(message),
        affected="the 40 funds of the positions file",
        notices=board,
    )
    return sent, notifier


def _hold(notifier: RetryWindowNotifier, run: int, fleet: DependencyState) -> dict[str, Any]:
    ti = TaskInstance(TASK_ID, f"run_{run}")
    store = _decided(ti, fleet, latest_start=fleet.read_at + timedelta(hours=2))
    assert store.values[check.KEY]["action"] == "hold"
    context = _context(ti, store, notifier)
    tell_hold(context)  # what dependency_verdict does on a hold
    return context


def _refuse(notifier: RetryWindowNotifier, run: int, fleet: DependencyState) -> dict[str, Any]:
    ti = TaskInstance(TASK_ID, f"run_{run}")
    store = _decided(ti, fleet, latest_start=fleet.read_at - timedelta(seconds=1))
    assert store.values[check.KEY]["action"] == "refuse"
    context = _context(ti, store, notifier)
    notifier(context)  # the failure callback of the refused try
    return context


def test_holds_of_many_task_instances_in_one_outage_send_one_notice() -> None:
    board = NoticeBoard()
    sent, notifier = _notifier(board)
    for minute in range(5):
        fleet = _outage_read(FIRST, FIRST + timedelta(minutes=2, seconds=minute * 7))
        for run in range(12):
            _hold(notifier, run, fleet)
    assert len(sent) == 1
    assert sent[0].decision == "dependency-held"
    assert sent[0].subject.startswith(
        "[retry window] dependency-held: pool positions_api failing since 2026-12-04 14:00:03Z, "
        "12 task instances failing"
    )
    assert board.entries[POOL]["outage"] == "positions_api since 2026-12-04 14:00:00Z"
    assert board.entries[POOL]["by"] == f"{DAG_ID}.{TASK_ID} (run_0) try 2"


def test_refusals_of_many_task_instances_in_one_outage_send_one_notice() -> None:
    board = NoticeBoard()
    sent, notifier = _notifier(board)
    fleet = _outage_read(FIRST, FIRST + timedelta(minutes=3))
    for run in range(12):
        _refuse(notifier, run, fleet)
    assert [message.decision for message in sent] == ["deadline-infeasible"]


def test_an_outage_told_on_its_first_hold_tells_its_first_missed_deadline_once() -> None:
    board = NoticeBoard()
    sent, notifier = _notifier(board)
    fleet = _outage_read(FIRST, FIRST + timedelta(minutes=2))
    for run in range(12):
        _hold(notifier, run, fleet)
    later = _outage_read(FIRST, FIRST + timedelta(minutes=4))
    for run in range(12):
        _refuse(notifier, run, later)
    assert [message.decision for message in sent] == ["dependency-held", "deadline-infeasible"]
    assert "run_0" in sent[1].text


def test_a_later_outage_of_the_pool_is_told_again() -> None:
    board = NoticeBoard()
    sent, notifier = _notifier(board)
    _hold(notifier, 0, _outage_read(FIRST, FIRST + timedelta(minutes=2)))
    second = FIRST + timedelta(hours=1)
    for run in range(12):
        _hold(notifier, run, _outage_read(second, second + timedelta(minutes=2)))
    assert len(sent) == 2
    assert "failing since 2026-12-04 15:00:03Z" in sent[1].subject
    assert board.entries[POOL]["outage"] == "positions_api since 2026-12-04 15:00:00Z"


def test_a_long_outage_whose_start_moves_later_is_not_told_again() -> None:
    board = NoticeBoard()
    sent, notifier = _notifier(board)
    # the held retries' latest holds count as their failures: the start moves with them
    for step in range(30):
        since = FIRST + timedelta(minutes=step)
        _hold(notifier, step % 12, _outage_read(since, since + timedelta(minutes=1)))
    assert len(sent) == 1
    # seenAt moves on only once it is a round old: every other hold writes here, not each
    assert board.writes <= 15


def test_a_pool_forced_open_with_nothing_failing_is_told_once_while_it_is_read() -> None:
    board = NoticeBoard()
    sent, notifier = _notifier(board)
    start = FIRST
    for half_hours in range(7):  # held retries come back at least every hour
        read_at = start + timedelta(minutes=30 * half_hours)
        _hold(notifier, half_hours, pool_state(POOL, read_at, [], forced="open", settings=SETTINGS))
    assert len(sent) == 1
    assert "Outage: pool positions_api is forced open by on-call, failing since" in sent[0].text
    # nobody read it for more than the longest hold and a round: another outage
    again = start + timedelta(hours=4, seconds=61)
    _hold(notifier, 0, pool_state(POOL, again, [], forced="open", settings=SETTINGS))
    assert len(sent) == 2


def test_the_refusal_names_the_outage_and_the_deadline_it_missed() -> None:
    board = NoticeBoard()
    sent, notifier = _notifier(board)
    read_at = FIRST + timedelta(minutes=3)
    _refuse(notifier, 5, _outage_read(FIRST, read_at))
    (message,) = sent
    assert message.subject == (
        "[retry window] deadline-infeasible: pool positions_api failing since "
        "2026-12-04 14:00:03Z, 12 task instances failing, 12 held; "
        f"{DAG_ID}.{TASK_ID} try 2 retry refused"
    )
    text = message.text
    assert (
        "Outage: pool positions_api is open, failing since 2026-12-04 14:00:03Z: 12 task "
        "instances failing, 12 of them in a retry (held or under way), 0 successes since" in text
    )
    assert "Deadline missed: this task's retry was held past its latest start" in text
    # an attempt started at the refusal (14:03:03) would end at 14:33:03, 183 s late
    assert (
        f"Delivery at risk ({TASK_ID}): the next attempt would end, validation included, at "
        "2026-12-04 14:33:03Z, 183 s (3 min 3 s) after the 2026-12-04 14:30:00Z deadline."
    ) in text
    assert "Affected population: the 40 funds of the positions file" in text
    assert "Airflow Variable retry_window_notice_positions_api" in text
    assert "Reason: deadline-infeasible: pool positions_api is open" in text


def test_a_notice_variable_that_cannot_be_read_still_sends() -> None:
    board = NoticeBoard(broken=True)
    sent, notifier = _notifier(board)
    fleet = _outage_read(FIRST, FIRST + timedelta(minutes=3))
    _refuse(notifier, 0, fleet)
    _refuse(notifier, 1, fleet)
    # a duplicate is better than a silenced outage
    assert [message.decision for message in sent] == ["deadline-infeasible"] * 2


def test_a_hold_that_cannot_be_sent_never_raises_into_the_check() -> None:
    def broken(message: Message, context: Any) -> None:
        raise ConnectionError("smtp down")

    notifier = RetryWindowNotifier(broken, notices=NoticeBoard())
    fleet = _outage_read(FIRST, FIRST + timedelta(minutes=2))
    _hold(notifier, 0, fleet)  # does not raise


def test_the_notifier_is_found_among_the_retry_callbacks() -> None:
    board = NoticeBoard()
    sent, notifier = _notifier(board)
    ti = TaskInstance(TASK_ID, "run_0")
    store = _decided(ti, _outage_read(FIRST, FIRST + timedelta(minutes=2)), latest_start=DEADLINE)
    context = _context(ti, store, notifier)
    # a plain function on failure, the notifier alone (not in a list) on retry
    context["task"].on_failure_callback = print
    context["task"].on_retry_callback = notifier
    tell_hold(context)
    assert [message.decision for message in sent] == ["dependency-held"]
    # the held try's own context is left as it was: Airflow adds the notifier's fields
    # to the context a notifier is called with
    assert "affected" not in context
    context["task"].on_retry_callback = None
    tell_hold(context)  # no notifier: nothing is sent and nothing raises
    assert len(sent) == 1


def _failed_probe(notifier: RetryWindowNotifier, fleet: DependencyState) -> dict[str, Any]:
    """The round's probe ran as try 1 of its retry window, failed, and the policy decided."""
    state = fleet
    (canary,) = probes_of(state, round_of(fleet.read_at, SETTINGS), SETTINGS)
    ti = TaskInstance(TASK_ID, canary[1], try_number=1, state="up_for_retry")
    store = _decided(ti, fleet, latest_start=DEADLINE, attempts_left=3)
    assert store.values[check.KEY]["action"] == "probe"
    store.values[EVIDENCE_KEY] = appended(None, policy_entry("wait-backoff"))
    context = _context(ti, store, notifier)
    notifier(context)  # the retry callback of the failed probe
    return context


def test_a_failed_probe_belongs_to_its_outage() -> None:
    board = NoticeBoard()
    sent, notifier = _notifier(board)
    fleet = _outage_read(FIRST, FIRST + timedelta(minutes=2))
    _failed_probe(notifier, fleet)
    for run in range(12):
        _hold(notifier, run, fleet)
    _failed_probe(notifier, _outage_read(FIRST, FIRST + timedelta(minutes=3)))
    (message,) = sent
    assert message.decision == "wait-backoff"
    assert "This try probed the pool for the held retries and failed" in message.text
    assert "Outage: pool positions_api is open, failing since 2026-12-04 14:00:03Z" in message.text


def test_a_closed_pool_is_no_outage() -> None:
    ti = TaskInstance(TASK_ID, "run_0")
    fleet = _outage_read(FIRST, FIRST + timedelta(minutes=2), runs=2)  # below trip_tasks
    store = _decided(ti, fleet, latest_start=DEADLINE)
    assert store.values[check.KEY]["action"] == "run"
    assert outage_of(store.values[check.KEY], 2) is None


@pytest.mark.parametrize(
    "kept",
    [None, "not json", {"version": NOTICE_VERSION + 1}, {"version": NOTICE_VERSION, "pool": "x"}],
)
def test_an_unreadable_notice_entry_tells_the_outage(kept: object) -> None:
    ti = TaskInstance(TASK_ID, "run_0")
    fleet = _outage_read(FIRST, FIRST + timedelta(minutes=2))
    store = _decided(ti, fleet, latest_start=DEADLINE)
    outage = outage_of(store.values[check.KEY], 2)
    assert outage is not None
    settled = settle(kept, outage, by="load")
    assert settled.send
    assert settled.entry is not None
    assert settled.entry["failingSince"] == FIRST.isoformat()


def test_the_outage_is_read_through_the_records_one_reader() -> None:
    ti = TaskInstance(TASK_ID, "run_0")
    fleet = _outage_read(FIRST, FIRST + timedelta(minutes=2))
    stored = _decided(ti, fleet, latest_start=DEADLINE).values[check.KEY]
    record = DependencyRecord.of(stored)
    assert record is not None
    # the stored value and the record read from it tell the same outage
    assert outage_of(stored, 2) == outage_of(record, 2) is not None
    # a record of a shape this release does not read is no outage, nor is another try's
    assert outage_of({**stored, "version": DependencyRecord.VERSION + 1}, 2) is None
    assert outage_of({**stored, "readAt": "yesterday"}, 2) is None
    assert outage_of(record, 3) is None
