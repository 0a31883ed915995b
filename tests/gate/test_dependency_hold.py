"""A target's pool, a shared dependency, that is failing holds the guarded repeat.

Each stage on its own, without a server: the read (a :class:`FakeReader` answering
the pool's task instances), decide (a pool's state made by hand), the approval, the
record, and ``decide_run`` strung together.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pendulum
import pytest

from airflow_retrywindow.dependency.admission import repeat_held_until
from airflow_retrywindow.dependency.fleet import PoolTry
from airflow_retrywindow.dependency.settings import DependencySettings, PoolSettings
from airflow_retrywindow.exceptions import AirflowApiError, RetryWindowGateError
from airflow_retrywindow.gate import run as gate_run
from airflow_retrywindow.gate.approve import approvable, judge
from airflow_retrywindow.gate.decide import DecisionTable, decide
from airflow_retrywindow.gate.observe import observe_run
from airflow_retrywindow.gate.pool_dependency import PoolDependency
from airflow_retrywindow.gate.read import RunSnapshot, read_snapshot
from airflow_retrywindow.gate.record import build
from airflow_retrywindow.gate.targets import Target
from airflow_retrywindow.hooks.api_reader import ApprovalRow, TaskInstanceRow
from airflow_retrywindow.labels import Instance
from airflow_retrywindow.records.dependency_state import (
    CLOSED,
    OPEN,
    RECOVERING,
    DependencyRecord,
    dependency_of,
)
from airflow_retrywindow.timing.retry_settings import RetrySettings
from airflow_retrywindow.timing.work import Work
from airflow_retrywindow.verdicts import DEPENDENCY_HELD
from tests.gate.fake_reader import FakeReader, pool_row, pool_state

NOW = pendulum.datetime(2026, 3, 2, 5, 40, 10, tz="UTC")
WORK = Work(duration=timedelta(minutes=5), validation=timedelta(minutes=1), safe_repeat=True)
SETTINGS = DependencySettings()  # rounds of 60 s, 3 task instances trip, a 300 s window
POOLS = PoolSettings(SETTINGS, {"legacy": DependencySettings(enabled=False)})
#: the next round after NOW: what a held repeat waits for
NEXT_ROUND = pendulum.datetime(2026, 3, 2, 5, 41, tz="UTC")
#: the held target's task instance, as the gate spreads its hold
LOAD = ("", "", "load", -1)
ENDED = NOW.subtract(minutes=9)  # the end of the target's failed try


def _target(
    task_id: str = "load", *, retries: int = 2, pool: str = "db", delay: int = 60
) -> Target:
    return Target(task_id, WORK, RetrySettings(task_id, retries, delay, 1, delay), False, pool, 1)


def _row(
    task_id: str = "load",
    state: str = "failed",
    *,
    pool: str = "db",
    max_tries: int = 2,
) -> TaskInstanceRow:
    return TaskInstanceRow(
        task_id=task_id, map_index=-1, state=state, try_number=1, max_tries=max_tries,
        start_date=ENDED.subtract(minutes=1), end_date=ENDED, pool=pool, pool_slots=1,
        observed_at=NOW,
    )  # fmt: skip


def _try(task_id: str, state: str, ended: pendulum.DateTime, *, dag_id: str = "other") -> PoolTry:
    """A try of another DAG's task in the pool."""
    return PoolTry(dag_id, "r1", task_id, -1, state, 1, 3, ended.subtract(seconds=30), ended)


def _failing(at: pendulum.DateTime, count: int = 3) -> list[PoolTry]:
    """``count`` task instances of the pool, each failed and waiting for its retry."""
    return [
        _try(f"feed_{n}", "up_for_retry", at.subtract(seconds=100 - 10 * n)) for n in range(count)
    ]


def _dependency(tries: list[PoolTry], *, forced: str | None = None) -> PoolDependency:
    return PoolDependency(pool_state("db", NOW, tries, forced=forced, settings=SETTINGS), SETTINGS)


def _table(
    dependency: PoolDependency | None,
    *rows: tuple[Target, TaskInstanceRow | None],
) -> DecisionTable:
    targets = [target for target, _ in rows]
    latest = {Instance(target.task_id): row for target, row in rows}
    snapshot = RunSnapshot(latest, pools={"db": pool_row()})
    return decide(
        observe_run(targets, snapshot, {}), as_of=NOW, deadline=NOW.add(hours=6),
        max_observation_age=3600, origin=None, pools=snapshot.pools,
        dependencies={"db": dependency} if dependency else {},
    )  # fmt: skip


def _held(dependency: PoolDependency | None) -> DecisionTable:
    """One target whose try failed 9 minutes ago: the model lets it run now."""
    return _table(dependency, (_target(), _row()))


# -- read ------------------------------------------------------------------------------


def test_the_read_reads_each_pool_that_is_a_dependency_and_no_other() -> None:
    now = pendulum.now("UTC")
    reader = FakeReader(
        [_row("load"), _row("fresh", pool="default_pool"), _row("old", pool="legacy")],
        pools={"db": pool_row(), "default_pool": pool_row("default_pool", 128)},
        pool_tries={"db": _failing(now)},
    )
    targets = [
        _target("load"),
        _target("fresh", pool="default_pool"),
        _target("old", pool="legacy"),
    ]
    snapshot = read_snapshot(reader, "dag", "run", targets, dependencies=POOLS)
    # default_pool is nobody's dependency; "legacy" is switched off
    assert [call for call in reader.calls if call[0] == "pool_listing"] == [
        ("pool_listing", "db", ["up_for_retry"]),
        ("pool_listing", "db", sorted(["up_for_reschedule", "scheduled", "queued", "running",
                                       "deferred", "restarting"])),
        ("pool_listing", "db", ["success"]),
    ]  # fmt: skip
    assert set(snapshot.dependencies) == {"db"}
    state = snapshot.dependencies["db"].state
    assert (state.state, state.failing) == (OPEN, 3)
    # the token, the run's task instances, its XCom keys, the pools; the pool's three reads
    assert snapshot.requests == 1 + 3 + 3


def test_a_try_refused_for_good_or_failed_for_its_own_bug_does_not_count() -> None:
    ended = pendulum.now("UTC").subtract(seconds=30)
    tries = [_try(f"feed_{n}", "failed", ended) for n in range(5)]
    reader = FakeReader([_row()], pool_tries={"db": tries})
    snapshot = read_snapshot(reader, "dag", "run", [_target()], dependencies=POOLS)
    state = snapshot.dependencies["db"].state
    assert (state.state, state.failing) == (CLOSED, 0)


def test_a_pool_that_cannot_be_read_refuses_and_names_the_pool() -> None:
    reader = FakeReader(
        [_row()], pool_tries={"db": AirflowApiError("GET /taskInstances/list: 503 busy")}
    )
    with pytest.raises(RetryWindowGateError, match=r"pool 'db'.*could not be read.*503 busy"):
        read_snapshot(reader, "dag", "run", [_target()], dependencies=POOLS)


def test_the_forced_state_comes_from_the_lookup_the_read_is_given() -> None:
    reader = FakeReader([_row()])
    snapshot = read_snapshot(
        reader, "dag", "run", [_target()], dependencies=POOLS,
        forced=lambda pool: "open" if pool == "db" else None,
    )  # fmt: skip
    state = snapshot.dependencies["db"].state
    assert (state.state, state.forced, state.failing) == (OPEN, "open", 0)


def test_without_dependency_settings_the_read_reads_no_pool_as_a_dependency() -> None:
    reader = FakeReader([_row()], pool_tries={"db": _failing(NOW)})
    snapshot = read_snapshot(reader, "dag", "run", [_target()])
    assert snapshot.dependencies == {}
    assert all(call[0] != "pool_listing" for call in reader.calls)


# -- decide ----------------------------------------------------------------------------


def _until() -> pendulum.DateTime:
    """When the held repeat of ``load`` is decided again: after the next round, as long
    again as the pool has been failing, spread by the task instance."""
    dependency = _dependency(_failing(NOW))
    return repeat_held_until(dependency.state, LOAD, dependency.settings)


def test_an_open_pool_holds_the_repeat_until_it_is_decided_again() -> None:
    row = _held(_dependency(_failing(NOW))).decision("load")
    assert row.decision == DEPENDENCY_HELD
    until = _until()
    assert row.reason == (
        "dependency-held: pool db is failing since 05:38:50Z (3 task instances failing, "
        f"no success since); held until {until.format('HH:mm:ss')}Z, when it is decided again"
    )
    # the failing began 80 s ago: held as long again, spread over a round
    assert NEXT_ROUND <= NOW.add(seconds=80) <= until <= NOW.add(seconds=80 + 60)
    assert row.earliest_start == until
    assert row.blockers() == [row.reason]
    assert row.waits  # a hold with an end: a sensor waits it out
    assert row.status.startswith("load: confirmed attempt 1 failed with a retryable error")
    assert "unknown: when pool db recovers; attempt 2 would fail the same way" in row.status


def test_the_held_rows_record_is_the_dependency_state_as_read() -> None:
    row = _held(_dependency(_failing(NOW))).decision("load")
    kept = dependency_of(row.as_dict())
    assert kept is not None and kept == row.dependency
    assert (kept.pool, kept.state, kept.forced, kept.action, kept.decision) == (
        "db", OPEN, None, "hold", DEPENDENCY_HELD,
    )  # fmt: skip
    assert (kept.failing_tasks, kept.successes, kept.try_number) == (3, 0, 2)
    assert (kept.read_at, kept.hold_until, kept.window_seconds) == (NOW, _until(), 300)
    assert kept.reason == row.reason
    assert DependencyRecord.of(kept.as_dict()) == kept  # it reads back as stored


def test_a_backoff_that_ends_after_the_hold_holds_until_the_backoff_ends() -> None:
    target = _target(delay=900)  # a 15-minute backoff; the try ended 9 minutes ago
    row = _table(_dependency(_failing(NOW)), (target, _row())).decision("load")
    assert row.decision == DEPENDENCY_HELD
    assert row.earliest_start == ENDED.add(minutes=15) > _until()
    assert "held until 05:46:10Z" in row.reason


def test_a_pool_forced_open_by_on_call_holds_and_says_who_forced_it() -> None:
    row = _held(_dependency([], forced="open")).decision("load")
    assert row.decision == DEPENDENCY_HELD
    assert row.reason.startswith("dependency-held: pool db is failing since 05:40:10Z (0 task")
    assert row.reason.endswith(
        "(forced open by on-call with the Variable retry_window_dependency_db)"
    )
    assert row.dependency is not None and row.dependency.forced == "open"


@pytest.mark.parametrize(
    ("tries", "state"),
    [
        # a success after the latest failure: the pool is coming back
        ([*_failing(NOW), _try("feed_ok", "success", NOW.subtract(seconds=5))], RECOVERING),
        (_failing(NOW, count=2), CLOSED),  # below the three that trip it
        ([], CLOSED),
    ],
)
def test_a_recovering_or_closed_pool_holds_nothing(tries: list[PoolTry], state: str) -> None:
    row = _held(_dependency(tries)).decision("load")
    assert row.decision == "retry-eligible"
    assert row.blockers() == []
    assert row.dependency is not None
    assert (row.dependency.state, row.dependency.action, row.dependency.hold_until) == (
        state, "run", None,
    )  # fmt: skip


def test_a_pool_forced_closed_holds_nothing() -> None:
    row = _held(_dependency(_failing(NOW), forced="closed")).decision("load")
    assert row.decision == "retry-eligible"


def test_a_refusal_of_the_model_stays_a_refusal_in_an_open_pool() -> None:
    exhausted = _target(retries=0)  # its one try is used up
    table = _table(_dependency(_failing(NOW)), (exhausted, _row(max_tries=0)))
    row = table.decision("load")
    assert row.decision == "attempts-exhausted"
    assert row.dependency is not None
    assert (row.dependency.state, row.dependency.action) == (OPEN, "refuse")


def test_a_first_run_is_not_held_by_an_open_pool() -> None:
    row = _table(_dependency(_failing(NOW)), (_target(), None)).decision("load")
    assert row.decision == "not-attempted"
    assert row.dependency is None


def test_a_sensor_waits_out_the_hold_like_a_backoff() -> None:
    table = _held(_dependency(_failing(NOW)))
    waiting = table.longest_wait("load")
    assert waiting is not None and waiting.decision == DEPENDENCY_HELD
    assert waiting.earliest_start == _until()


def test_the_record_and_its_status_update_carry_the_verdict_and_the_pools_state() -> None:
    table = _held(_dependency(_failing(NOW)))
    record = build(
        table, requests=7, api="http://api:8080", gate="wait_load", dag_id="dag",
        run_id="run", try_number=1, deadline_rule="fixed", work_unit=None,
    )  # fmt: skip
    (row,) = record["decisions"]
    assert row["decision"] == DEPENDENCY_HELD
    kept = dependency_of(row)
    assert kept is not None and (kept.pool, kept.state) == ("db", OPEN)
    assert "pool db" in record["statusUpdate"]


# -- approve ---------------------------------------------------------------------------


def test_an_approval_does_not_release_a_repeat_its_failing_pool_holds() -> None:
    table = _held(_dependency(_failing(NOW)))
    assert not approvable(table, ["load"], ["load"])
    answer = ApprovalRow(
        task_id="approve_repeat", map_index=-1, state="success", try_number=1,
        options=("Approve", "Reject"), chosen=("Approve",), user_id="ops_lead",
        user_name="ops_lead", responded_at=NOW.subtract(minutes=1),
        params_input={"reason": "the feed is back"}, asked_at=NOW.subtract(minutes=5),
        observed_at=NOW,
    )  # fmt: skip
    override = judge(
        table, answer, approval="approve_repeat", allowed=["load"], previous_decision=None
    )
    assert override.released == ()
    assert override.note.startswith(
        "load: dependency-held stands: its pool, a shared dependency, is failing"
    )


# -- the whole path --------------------------------------------------------------------


@pytest.fixture
def gate_dag() -> Any:
    from airflow.sdk import DAG, BaseOperator

    with DAG("rw_gate_dependency", schedule=None, start_date=pendulum.datetime(2026, 1, 1)) as dag:
        BaseOperator(task_id="load", retries=2, retry_delay=timedelta(minutes=1), pool="db")
    return dag


def _decide_run(gate_dag: Any, reader: FakeReader, monkeypatch: pytest.MonkeyPatch) -> Any:
    from airflow_retrywindow import Deadline

    monkeypatch.setattr(gate_run, "_client", lambda settings: reader)
    monkeypatch.setattr(gate_run, "forced_state", lambda pool: None)
    settings = gate_run.GateSettings(
        targets={"load": WORK}, deadline=Deadline.at(pendulum.now("UTC").add(hours=6)),
        max_observation_age=3600, conn_id="unused", page_size=100, timeout=5,
    )  # fmt: skip
    context = {"dag": gate_dag, "dag_run": SimpleNamespace(run_id="manual__1")}
    return gate_run.decide_run(settings, context)


def _failed_now() -> TaskInstanceRow:
    now = pendulum.now("UTC")
    return replace(
        _row(), start_date=now.subtract(minutes=5), end_date=now.subtract(minutes=4),
        observed_at=now,
    )  # fmt: skip


def test_decide_run_holds_the_repeat_in_an_open_pool(
    gate_dag: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader = FakeReader([_failed_now()], pool_tries={"db": _failing(pendulum.now("UTC"))})
    decided = _decide_run(gate_dag, reader, monkeypatch)
    row = decided.table.decision("load")
    assert row.decision == DEPENDENCY_HELD
    assert row.dependency is not None and row.dependency.state == OPEN


def test_decide_run_refuses_when_the_pool_cannot_be_read(
    gate_dag: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader = FakeReader([_failed_now()], pool_tries={"db": AirflowApiError("timed out")})
    with pytest.raises(RetryWindowGateError, match=r"pool 'db'.*could not be read.*timed out"):
        _decide_run(gate_dag, reader, monkeypatch)


class _Ti:
    """The deciding task instance: what the sensor pushes is kept."""

    try_number, map_index = 1, -1

    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


def test_the_sensor_keeps_waiting_while_the_pool_is_open(
    gate_dag: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_retrywindow import Deadline, RetryWindowSensor

    with gate_dag:
        sensor = RetryWindowSensor(
            task_id="wait_load", target="load", work=WORK, deferrable=False,
            deadline=Deadline.at(pendulum.now("UTC").add(hours=6)),
        )  # fmt: skip
    now = pendulum.now("UTC")
    reader = FakeReader([_failed_now()], pool_tries={"db": _failing(now)})
    monkeypatch.setattr(gate_run, "_client", lambda settings: reader)
    monkeypatch.setattr(gate_run, "forced_state", lambda pool: None)
    ti = _Ti()
    context = {"dag": gate_dag, "dag_run": SimpleNamespace(run_id="manual__1"), "ti": ti}
    before = pendulum.now("UTC")
    assert sensor.poke(context) is False  # not done: it pokes again
    after = pendulum.now("UTC")
    record = ti.pushed["return_value"]
    assert record["action"] == "wait"
    (row,) = record["decisions"]
    assert row["decision"] == DEPENDENCY_HELD
    kept = dependency_of(row)
    assert kept is not None and (kept.state, kept.action) == (OPEN, "hold")
    assert "unknown: when pool db recovers" in record["statusUpdate"]
    # it pokes again at the pool's next round, not at a fixed interval
    assert kept.hold_until is not None
    until = (kept.hold_until - after).total_seconds(), (kept.hold_until - before).total_seconds()
    assert until[0] <= sensor.poke_interval <= until[1]
