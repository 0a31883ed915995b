"""The gate's stages one by one, on a snapshot or a reader made by hand: no server.

read (``read_snapshot``) -> observe (``observe_run``) -> decide (``decide``) ->
record (``build``); ``decide_run`` strings them together.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pendulum
import pytest

from airflow_retrywindow.breaker.settings import BreakerPools, BreakerSettings
from airflow_retrywindow.exceptions import ObservationError, RetryWindowGateError, TargetError
from airflow_retrywindow.gate import run as gate_run
from airflow_retrywindow.gate.breaker_hold import BreakerHold
from airflow_retrywindow.gate.decide import decide, group_by_policy
from airflow_retrywindow.gate.observe import observe_run, parse_observations
from airflow_retrywindow.gate.read import RunSnapshot, read_snapshot
from airflow_retrywindow.gate.record import build
from airflow_retrywindow.gate.targets import Target
from airflow_retrywindow.hooks.api_reader import PoolRow, TaskInstanceRow, XComKey
from airflow_retrywindow.labels import Instance
from airflow_retrywindow.model import evaluate
from airflow_retrywindow.model.bounds import MAX_ATTEMPTS, MAX_OBSERVATION_AGE, MAX_TASKS
from airflow_retrywindow.operators.arguments import observation_age_argument
from airflow_retrywindow.records.breaker_state import BreakerState
from airflow_retrywindow.timing.retry_settings import RetrySettings
from airflow_retrywindow.timing.work import Work
from airflow_retrywindow.verdicts import DEPENDENCY_HELD
from tests.breaker.states import opened, recovering
from tests.gate.fake_reader import FakeReader, pool_row

NOW = pendulum.datetime(2026, 3, 2, 5, 40, tz="UTC")
WORK = Work(duration=timedelta(minutes=5), validation=timedelta(minutes=1), safe_repeat=True)
STARTED = NOW.subtract(minutes=10)


def _target(task_id: str, *, gated: bool = False, retries: int = 2, pool: str = "db") -> Target:
    settings = RetrySettings(task_id, retries, 60, 1, 60)
    return Target(task_id, WORK, settings, gated, pool, 1)


def _row(
    task_id: str,
    state: str | None,
    try_number: int = 1,
    *,
    map_index: int = -1,
    pool: str = "db",
) -> TaskInstanceRow:
    return TaskInstanceRow(
        task_id=task_id, map_index=map_index, state=state, try_number=try_number, max_tries=2,
        start_date=STARTED, end_date=NOW.subtract(minutes=9), pool=pool, pool_slots=1,
        observed_at=NOW,
    )  # fmt: skip


def _key(task_id: str, key: str, *, at: pendulum.DateTime = NOW) -> XComKey:
    return XComKey(task_id, -1, key, at)


def _read(reader: FakeReader, *targets: Target) -> RunSnapshot:
    return read_snapshot(reader, "dag", "run", list(targets))


def _called(reader: FakeReader) -> list[str]:
    return [call[0] for call in reader.calls]


# -- read ------------------------------------------------------------------------------


def test_read_lists_instances_keys_and_pools_once_whatever_the_targets() -> None:
    targets = [_target(f"t{index}", gated=True) for index in range(30)]
    rows = [_row(target.task_id, "failed") for target in targets]
    keys = [_key(target.task_id, "retry_window.failure.unknown") for target in targets]
    reader = FakeReader(rows, keys=keys)
    snapshot = _read(reader, *targets)
    assert _called(reader) == ["task_instances", "xcom_keys", "pools"]
    assert reader.calls[0] == ("task_instances", "dag", "run", sorted(t.task_id for t in targets))
    assert reader.calls[1] == ("xcom_keys", "retry_window.")
    assert (snapshot.requests, snapshot.api) == (4, "http://api:8080")
    assert snapshot.latest_tries == {Instance(row.task_id): row for row in rows}
    assert snapshot.xcom_keys == tuple(keys)
    assert snapshot.pools == {"db": PoolRow("db", 2, 0, 0, 2, False)}


def test_read_lists_no_xcom_keys_when_nothing_failed() -> None:
    reader = FakeReader([_row("load", "success"), _row("report", "running")])
    snapshot = _read(reader, _target("load"), _target("report"), _target("fresh", pool="other"))
    assert _called(reader) == ["task_instances", "pools"]
    # a target with no task instance keeps its definition's pool
    assert reader.calls[-1] == ("pools", ["db", "other"])
    assert snapshot.latest_try(Instance("fresh")) is None
    assert snapshot.xcom_keys == () and snapshot.evidence == {}
    assert set(snapshot.pools) == {"db"}  # "other" does not exist


def test_read_takes_a_breaker_from_the_description_of_a_breaker_pool_it_names() -> None:
    pools = {
        "db": pool_row("db", breaker=opened("db")),
        "other": pool_row("other", breaker=opened("other")),  # no breaker pool
        "copied": pool_row("copied", breaker=opened("db")),  # carries another pool's line
        "plain": pool_row("plain"),  # a breaker pool no controller watched yet
    }
    targets = [_target(name, pool=name) for name in pools]
    reader = FakeReader([_row(name, "success", pool=name) for name in pools], pools=pools)
    named = BreakerPools.parse('{"db": {"round": 30}, "copied": {}, "plain": {}}', option="x")
    snapshot = read_snapshot(reader, "dag", "run", targets, breakers=named)
    assert _called(reader) == ["task_instances", "pools"]
    assert list(snapshot.breakers) == ["db"]
    assert snapshot.breakers["db"] == BreakerHold(opened("db"), BreakerSettings(round=30))
    assert read_snapshot(reader, "dag", "run", targets).breakers == {}  # none asked for


def test_read_fetches_the_earlier_tries_of_a_reset_target_only() -> None:
    tries = [_row("load", "failed", 1), _row("load", "up_for_retry", 2), _row("load", None, 3)]
    reader = FakeReader(
        [_row("load", None, 3), _row("fresh", None, 0), _row("report", "success")],
        tries={"load": tries},
    )
    snapshot = _read(reader, _target("load"), _target("fresh"), _target("report"))
    assert _called(reader) == ["task_instances", "task_tries", "xcom_keys", "pools"]
    assert reader.calls[1] == ("task_tries", "load", -1)
    assert snapshot.latest_try(Instance("load")) == tries[1]
    fresh = snapshot.latest_try(Instance("fresh"))
    assert fresh is not None and fresh.try_number == 0


def test_read_fetches_the_evidence_of_a_failure_without_a_class_key() -> None:
    keys = [
        _key("old", "retry_window.evidence"),  # an older policy: evidence only
        _key("new", "retry_window.evidence"),
        _key("new", "retry_window.failure.terminal"),
        # pushed before the latest try started: not this try's
        _key("stale", "retry_window.failure.unknown", at=STARTED.subtract(seconds=1)),
        _key("stale", "retry_window.evidence", at=STARTED.subtract(seconds=1)),
    ]
    reader = FakeReader(
        [_row("old", "failed"), _row("new", "failed"), _row("stale", "failed")],
        keys=keys,
        values={"old": {"tryNumber": 1, "failure": "unknown"}},
    )
    snapshot = _read(reader, _target("old"), _target("new"), _target("stale"))
    assert _called(reader) == ["task_instances", "xcom_keys", "xcom_value", "pools"]
    assert reader.calls[2] == ("xcom_value", "old", "retry_window.evidence", -1)
    assert snapshot.evidence == {Instance("old"): {"tryNumber": 1, "failure": "unknown"}}
    assert snapshot.keys_of_try(Instance("stale")) == []
    assert [key.key for key in snapshot.keys_of_try(Instance("new"))] == [
        "retry_window.evidence",
        "retry_window.failure.terminal",
    ]


def test_read_refuses_mapped_rows_of_an_unmapped_target_and_unknown_states_first() -> None:
    # the DAG does not map "load", but the run has map indexes of it: the DAG changed
    mapped = FakeReader([_row("load", "failed", map_index=0), _row("load", "failed", map_index=1)])
    with pytest.raises(TargetError, match="target 'load' is not mapped in the DAG"):
        _read(mapped, _target("load"))
    assert _called(mapped) == ["task_instances"]
    unknown = FakeReader([_row("load", "zombie", 2)])
    with pytest.raises(TargetError, match="the Airflow state 'zombie'"):
        _read(unknown, _target("load"))
    assert _called(unknown) == ["task_instances"]


# -- observe ---------------------------------------------------------------------------


def _snapshot(
    *rows: TaskInstanceRow, keys: tuple[XComKey, ...] = (), evidence: dict[str, Any] | None = None
) -> RunSnapshot:
    return RunSnapshot(
        latest_tries={Instance(row.task_id, row.map_index): row for row in rows},
        xcom_keys=keys,
        evidence={Instance(task_id): value for task_id, value in (evidence or {}).items()},
        pools={"db": PoolRow("db", 2, 0, 0, 2, False)},
        requests=3,
        api="http://reader:secret@api:8080",
    )


def test_observe_takes_the_class_the_latest_try_recorded() -> None:
    keys = (
        _key("load", "retry_window.failure.retryable", at=NOW.subtract(minutes=9)),
        _key("load", "retry_window.failure.terminal", at=NOW.subtract(minutes=8)),
        _key("early", "retry_window.failure.terminal", at=STARTED.subtract(seconds=1)),
    )
    snapshot = _snapshot(_row("load", "failed"), _row("early", "failed"), keys=keys)
    load, early = observe_run([_target("load", gated=True), _target("early")], snapshot, {})
    assert load.state == "terminal"
    assert load.classification.endswith("(XCom retry_window.failure.terminal of try 1)")
    # a key from before the try started is not this try's: no policy, so retryable
    assert early.state == "retryable"
    assert early.classification == "Airflow state failed; no RetryWindowPolicy on the task"


def test_observe_reads_an_older_policys_evidence_of_the_same_try_only() -> None:
    keys = (_key("load", "retry_window.evidence"), _key("other", "retry_window.evidence"))
    evidence = {
        "load": {"tryNumber": 1, "failure": "retryable"},
        "other": {"tryNumber": 7, "failure": "retryable"},  # another try's
    }
    snapshot = _snapshot(
        _row("load", "failed"), _row("other", "failed"), keys=keys, evidence=evidence
    )
    targets = [_target("load", gated=True), _target("other", gated=True)]
    load, other = observe_run(targets, snapshot, {})
    assert load.state == "retryable"
    assert load.classification.endswith("(XCom retry_window.evidence of try 1)")
    # a gated failure without a class of its own try may have reached the remote side
    assert other.state == "unknown"


def test_observe_lets_an_explicit_observation_override_airflow() -> None:
    snapshot = _snapshot(_row("load", "failed"), _row("report", "running"))
    observations = {
        "load": {
            "state": "unknown",
            "observed_at": "2026-03-02T05:39:00Z",
            "source": "job load-7: no answer",
        }
    }
    explicit = parse_observations(observations, ["load", "report"], as_of=NOW)
    load, report, fresh = observe_run(
        [_target("load"), _target("report"), _target("fresh")], snapshot, explicit
    )
    assert (load.source, load.state, load.airflow_state) == ("observations", "unknown", "failed")
    assert load.facts is not None and load.facts.attempts == 1  # Airflow's count
    assert (report.source, report.state) == ("airflow-api", "running")
    assert (fresh.state, fresh.try_number, fresh.pool) == ("not-attempted", 0, "db")
    running = parse_observations({"report": observations["load"]}, ["report"], as_of=NOW)
    with pytest.raises(ObservationError, match="cannot override a try in progress"):
        observe_run([_target("report")], snapshot, running)


# -- decide ----------------------------------------------------------------------------


def test_decide_answers_as_the_command_line_and_chunks_to_the_models_bound() -> None:
    targets = [_target(f"load_{index:02d}") for index in range(MAX_TASKS + 5)]
    snapshot = _snapshot(*(_row(target.task_id, "failed") for target in targets))
    observed = observe_run(targets, snapshot, {})
    assert [len(facts) for _, facts in group_by_policy(observed)] == [MAX_TASKS, 5]
    table = decide(
        observed, as_of=NOW, deadline=NOW.add(hours=6), max_observation_age=60,
        origin=NOW.subtract(days=1), pools=snapshot.pools,
    )  # fmt: skip
    assert len(table.fixtures) == 2
    for item in table.fixtures:
        # what `airflow-retrywindow evaluate` prints for the same fixture, exactly
        assert item["result"] == evaluate(json.loads(json.dumps(item["fixture"])))
    row = table.decision("load_00")
    assert (row.decision, row.fixture, row.numbers["attempts"]) == ("retry-eligible", 0, 1)
    assert row.capacity.verdict == "fits-now"


def test_decide_names_group_tasks_by_their_airflow_id() -> None:
    target = Target("group.load", WORK, RetrySettings("group.load", 2, 60, 1, 60), False, "db", 1)
    snapshot = _snapshot(_row("group.load", "failed"))
    table = decide(
        observe_run([target], snapshot, {}), as_of=NOW, deadline=NOW.add(hours=6),
        max_observation_age=60, origin=None, pools=snapshot.pools,
    )  # fmt: skip
    row = table.decision("group.load")
    assert row.numbers["modelId"].startswith("group_load-")
    assert row.status.startswith("group.load: confirmed attempt 1")
    assert table.fixtures[0]["taskIds"] == {row.numbers["modelId"]: "group.load"}


# -- record ----------------------------------------------------------------------------


def test_record_keeps_the_table_and_drops_url_credentials() -> None:
    snapshot = _snapshot(_row("load", "failed"))
    table = decide(
        observe_run([_target("load")], snapshot, {}), as_of=NOW, deadline=NOW.add(hours=6),
        max_observation_age=60, origin=None, pools=snapshot.pools,
    )  # fmt: skip
    guard = [{"taskId": "rerun", "targets": ["load"], "action": "run", "blockers": []}]
    record = build(
        table, requests=snapshot.requests, api=snapshot.api, gate="gate", dag_id="dag",
        run_id="run", try_number=1, deadline_rule="6 h after the data interval",
        work_unit={"business_date": "2026-03-01"}, guard=guard,
    )  # fmt: skip
    assert {key: record[key] for key in ("decisions", "fixtures", "budget")} == {
        key: table.as_dict()[key] for key in ("decisions", "fixtures", "budget")
    }
    assert (record["api"], record["requests"]) == ("http://api:8080", 3)
    assert record["statusUpdate"].splitlines()[1:3] == [
        "Unit of work: business_date=2026-03-01.",
        "May run: rerun. Held back: none.",
    ]
    json.dumps(record)  # JSON-ready as it is


def test_the_stages_run_without_airflow() -> None:
    code = textwrap.dedent(
        """
        import sys
        from datetime import timedelta
        import pendulum
        from airflow_retrywindow.hooks.api_reader import PoolRow
        from airflow_retrywindow.gate.decide import decide
        from airflow_retrywindow.labels import Instance
        from airflow_retrywindow.gate.observe import parse_observations
        from airflow_retrywindow.gate.observe import observe_run
        from airflow_retrywindow.gate.record import build
        from airflow_retrywindow.gate.read import RunSnapshot
        from airflow_retrywindow.gate.targets import Target
        from airflow_retrywindow.hooks.api_reader import TaskInstanceRow
        from airflow_retrywindow.timing.retry_settings import RetrySettings
        from airflow_retrywindow.timing.work import Work

        now = pendulum.datetime(2026, 3, 2, 5, 40, tz="UTC")
        work = Work(duration=timedelta(minutes=5), validation=timedelta(0), safe_repeat=True)
        target = Target("load", work, RetrySettings("load", 2, 60, 1, 60), False, "db", 1)
        row = TaskInstanceRow("load", -1, "failed", 1, 2, now.subtract(minutes=2),
                              now.subtract(minutes=1), "db", 1, now)
        snapshot = RunSnapshot(
            {Instance("load"): row}, pools={"db": PoolRow("db", 2, 0, 0, 2, False)}
        )
        explicit = parse_observations(None, ["load"], as_of=now)
        table = decide(observe_run([target], snapshot, explicit), as_of=now,
                       deadline=now.add(hours=1), max_observation_age=60, origin=None,
                       pools=snapshot.pools)
        record = build(table, requests=0, api="", gate="gate", dag_id="d", run_id="r",
                       try_number=1, deadline_rule="rule", work_unit=None)
        print(record["decisions"][0]["decision"])
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("airflow", "airflow_client")))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["retry-eligible", "[]"]


# -- the whole path --------------------------------------------------------------------


@pytest.fixture
def gate_dag() -> Any:
    from airflow.sdk import DAG, BaseOperator

    with DAG("rw_gate_pipeline", schedule=None, start_date=pendulum.datetime(2026, 1, 1)) as dag:
        BaseOperator(task_id="load", retries=2, retry_delay=timedelta(minutes=1), pool="db")
        BaseOperator(task_id="fresh", retries=2, retry_delay=timedelta(minutes=1), pool="db")
    return dag


def _settings() -> gate_run.GateSettings:
    from airflow_retrywindow import Deadline

    due = pendulum.now("UTC").add(hours=6)
    return gate_run.GateSettings(
        targets={"load": WORK, "fresh": WORK}, deadline=Deadline.at(due),
        max_observation_age=3600, conn_id="unused", page_size=100, timeout=5,
    )  # fmt: skip


def _failed_just_now() -> TaskInstanceRow:
    """``load``'s try 1, failed four minutes ago by this clock."""
    now = pendulum.now("UTC")
    return replace(
        _row("load", "failed"),
        start_date=now.subtract(minutes=5),
        end_date=now.subtract(minutes=4),
        observed_at=now,
    )


def test_decide_run_reads_once_then_decides(gate_dag: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    failed = _failed_just_now()
    reader = FakeReader([failed], pools={"db": pool_row(occupied=1)})
    monkeypatch.setattr(gate_run, "_client", lambda settings: reader)
    context = {"dag": gate_dag, "dag_run": SimpleNamespace(run_id="manual__1")}
    decided = gate_run.decide_run(_settings(), context)
    assert _called(reader) == ["task_instances", "xcom_keys", "pools"]
    assert reader.calls[0][1:3] == ("rw_gate_pipeline", "manual__1")
    assert (decided.requests, decided.api) == (4, "http://api:8080")
    assert {row.task_id: row.decision for row in decided.table.decisions} == {
        "load": "retry-eligible",
        "fresh": "not-attempted",
    }


@pytest.mark.parametrize(
    ("breaker", "decision"), [(opened, DEPENDENCY_HELD), (recovering, "retry-eligible")]
)
def test_a_breaker_pool_costs_no_request_more_and_only_an_open_breaker_holds_the_repeat(
    gate_dag: Any,
    monkeypatch: pytest.MonkeyPatch,
    breaker: Callable[[str], BreakerState],
    decision: str,
) -> None:
    failed = _failed_just_now()
    state = breaker("db")
    reader = FakeReader([failed], pools={"db": pool_row(breaker=state)})
    monkeypatch.setattr(gate_run, "_client", lambda settings: reader)
    monkeypatch.setenv("AIRFLOW__RETRY_WINDOW__BREAKER_POOLS", '{"db": {"round": 30}}')
    context = {"dag": gate_dag, "dag_run": SimpleNamespace(run_id="manual__1")}
    decided = gate_run.decide_run(_settings(), context)
    # the breaker comes with the pools the gate reads anyway
    assert _called(reader) == ["task_instances", "xcom_keys", "pools"]
    assert decided.requests == 4
    load = decided.table.decision("load")
    assert (load.decision, load.breaker) == (decision, state)
    # a task instance never tried runs into nothing: it keeps no breaker
    assert decided.table.decision("fresh").breaker is None


def test_decide_run_refuses_bad_observations_before_any_request(
    gate_dag: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader = FakeReader([_row("load", "failed")])
    monkeypatch.setattr(gate_run, "_client", lambda settings: reader)
    context = {"dag": gate_dag, "dag_run": SimpleNamespace(run_id="manual__1")}
    with pytest.raises(RetryWindowGateError, match=r"could not decide.*observations name 'laod'"):
        gate_run.decide_run(_settings(), context, observations={"laod": {}})
    assert reader.calls == []


# -- one source for every bound --------------------------------------------------------


def test_argument_bounds_are_the_models() -> None:
    assert observation_age_argument(MAX_OBSERVATION_AGE) == MAX_OBSERVATION_AGE
    with pytest.raises(ValueError, match="max_observation_age"):
        observation_age_argument(MAX_OBSERVATION_AGE + 1)
    observation = {"state": "unknown", "observed_at": "2026-03-02T05:39:00Z"}
    assert parse_observations(
        {"load": {**observation, "attempts": MAX_ATTEMPTS}}, ["load"], as_of=NOW
    )
    with pytest.raises(ObservationError, match=f"from 1 to {MAX_ATTEMPTS}"):
        parse_observations(
            {"load": {**observation, "attempts": MAX_ATTEMPTS + 1}}, ["load"], as_of=NOW
        )
