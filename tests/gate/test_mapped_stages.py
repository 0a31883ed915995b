"""Mapped targets through the gate's stages, on snapshots and readers made by hand.

Every map index is a task instance of its own: read in the same listing as the
rest, observed and decided on its own under a model id of its own, listed in the
record, and a target lets its guarded tasks run only when every map index may.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

import pendulum
import pytest

from airflow_retrywindow.exceptions import ObservationError, TargetError
from airflow_retrywindow.gate.decide import MAX_NAMED_BLOCKERS, DecisionTable, decide
from airflow_retrywindow.gate.observe import observe_run, parse_observations
from airflow_retrywindow.gate.read import (
    RunSnapshot,
    instance_rows,
    model_id,
    model_ids,
    read_snapshot,
)
from airflow_retrywindow.gate.record import MAX_MAPPED_LINES, build
from airflow_retrywindow.gate.targets import Target
from airflow_retrywindow.hooks.api_reader import PoolRow, TaskInstanceRow, XComKey
from airflow_retrywindow.labels import Instance, parse_label
from airflow_retrywindow.model import evaluate
from airflow_retrywindow.model.bounds import MAX_TASKS, TASK_ID
from airflow_retrywindow.timing.retry_settings import RetrySettings
from airflow_retrywindow.timing.work import Work
from tests.gate.fake_reader import FakeReader

NOW = pendulum.datetime(2026, 3, 2, 5, 40, tz="UTC")
STARTED = NOW.subtract(minutes=10)
SAFE = Work(duration=timedelta(minutes=5), validation=timedelta(minutes=1), safe_repeat=True)
NOT_SAFE = replace(SAFE, safe_repeat=False)
POOLS = {"db": PoolRow("db", 2, 0, 0, 2, False)}


def _target(
    task_id: str = "load", *, mapped: bool = True, work: Work = SAFE, delay: int = 60
) -> Target:
    return Target(task_id, work, RetrySettings(task_id, 2, delay, 1, delay), True, "db", 1, mapped)


def _row(
    state: str | None,
    map_index: int,
    *,
    task_id: str = "load",
    try_number: int = 1,
    ended: pendulum.DateTime | None = None,
) -> TaskInstanceRow:
    return TaskInstanceRow(
        task_id=task_id, map_index=map_index, state=state, try_number=try_number, max_tries=2,
        start_date=STARTED, end_date=ended or NOW.subtract(minutes=9), pool="db", pool_slots=1,
        observed_at=NOW,
    )  # fmt: skip


def _failure(map_index: int, failure: str, task_id: str = "load") -> XComKey:
    return XComKey(task_id, map_index, f"retry_window.failure.{failure}", NOW)


def _table(
    targets: list[Target], *rows: TaskInstanceRow, keys: tuple[XComKey, ...] = ()
) -> DecisionTable:
    snapshot = RunSnapshot(
        {Instance(row.task_id, row.map_index): row for row in rows}, keys, pools=POOLS
    )
    observed = observe_run(targets, snapshot, {})
    return decide(
        observed, as_of=NOW, deadline=NOW.add(hours=6), max_observation_age=60,
        origin=NOW.subtract(days=1), pools=POOLS,
    )  # fmt: skip


# -- read ------------------------------------------------------------------------------


def test_every_map_index_comes_from_the_one_listing_with_its_own_failure_class() -> None:
    rows = [
        _row("success", 0),
        _row("failed", 1),
        _row("failed", 2),
        _row("failed", -1, task_id="x"),
    ]
    keys = [
        _failure(1, "unknown"),
        _failure(2, "retryable"),
        _failure(-1, "terminal"),  # the same task id at another map index: not theirs
    ]
    reader = FakeReader(rows, keys=keys)
    snapshot = read_snapshot(reader, "dag", "run", [_target()])
    assert [call[0] for call in reader.calls] == ["task_instances", "xcom_keys", "pools"]
    assert snapshot.instances("load") == [Instance("load", index) for index in (0, 1, 2)]
    assert [key.key for key in snapshot.keys_of_try(Instance("load", 1))] == [
        "retry_window.failure.unknown"
    ]
    assert [key.key for key in snapshot.keys_of_try(Instance("load", 2))] == [
        "retry_window.failure.retryable"
    ]


def test_a_cleared_map_index_has_its_own_earlier_tries_read() -> None:
    # map index 1 was cleared (state None, try 1 kept): its try 1 is read, nothing else
    earlier = [_row("failed", 1)]
    reader = FakeReader([_row("success", 0), _row(None, 1)], tries={"load": earlier})
    snapshot = read_snapshot(reader, "dag", "run", [_target()])
    assert ("task_tries", "load", 1) in reader.calls
    assert sum(call[0] == "task_tries" for call in reader.calls) == 1
    assert snapshot.latest_try(Instance("load", 1)) == earlier[0]


def test_an_older_policys_evidence_is_read_for_its_map_index() -> None:
    keys = [XComKey("load", 1, "retry_window.evidence", NOW)]
    values = {"load[1]": {"tryNumber": 1, "failure": "unknown"}}
    reader = FakeReader([_row("success", 0), _row("failed", 1)], keys=keys, values=values)
    snapshot = read_snapshot(reader, "dag", "run", [_target()])
    assert ("xcom_value", "load", "retry_window.evidence", 1) in reader.calls
    (index_1,) = [view for view in observe_run([_target()], snapshot, {}) if view.map_index == 1]
    assert index_1.state == "unknown"


@pytest.mark.parametrize(
    ("rows", "instances"),
    [
        # not expanded yet: the one task instance, never tried
        ([_row(None, -1, try_number=0)], [Instance("load")]),
        # no task instance at all yet
        ([], [Instance("load")]),
        # a map index removed by a smaller expansion has no next attempt
        ([_row("success", 0), _row("removed", 1), _row("failed", 2)],
         [Instance("load", 0), Instance("load", 2)]),
        # every map index removed: nothing is left to run again
        ([_row("removed", 0)], [Instance("load")]),
    ],
)  # fmt: skip
def test_the_instances_of_a_mapped_target(
    rows: list[TaskInstanceRow], instances: list[Instance]
) -> None:
    assert list(instance_rows(rows, [_target()])) == instances


@pytest.mark.parametrize(
    ("target", "rows", "message"),
    [
        (_target(), [_row("success", 0), _row("success", 2)], r"no task instance for load\[1\]"),
        (_target(), [_row("success", 0), _row("failed", 0)], r"listed load\[0\] twice"),
        (_target(), [_row(None, -1), _row("success", 0)], "both an unexpanded task instance"),
        (_target(mapped=False), [_row("failed", 0)], "'load' is not mapped in the DAG"),
    ],
)
def test_task_instances_the_gate_cannot_account_for_are_refused(
    target: Target, rows: list[TaskInstanceRow], message: str
) -> None:
    with pytest.raises(TargetError, match=message):
        instance_rows(rows, [target])


# -- model ids -------------------------------------------------------------------------


def test_model_ids_keep_the_task_id_and_the_map_index_within_the_models_rules() -> None:
    long_id = "extract_positions_of_every_fund_in_the_positions_database"
    instances = [
        Instance("load", 3),
        Instance("load-3"),  # a task that happens to be named like map index 3 of "load"
        Instance("grp.load", 12),
        Instance(long_id, 999),
        Instance("grp.load"),
    ]
    ids = model_ids(instances)
    assert ids[Instance("load-3")] == "load-3"
    assert ids[Instance("load", 3)].startswith("load-3-") and ids[Instance("load", 3)] != "load-3"
    assert ids[Instance("grp.load", 12)].startswith("grp_load-12-")
    assert ids[Instance(long_id, 999)].split("-")[1] == "999"
    assert len(set(ids.values())) == len(instances)
    assert all(TASK_ID.fullmatch(found) for found in ids.values())
    # the same instances, the same ids; without the clash map index 3 is plainly "load-3"
    assert model_ids(reversed(instances)) == ids
    assert model_id(Instance("load", 3)) == "load-3"
    assert parse_label("grp.load[12]") == Instance("grp.load", 12)
    assert parse_label("load") == Instance("load")


# -- observe and decide ----------------------------------------------------------------


def test_each_map_index_is_decided_on_its_own() -> None:
    table = _table(
        [_target(), _target("report", mapped=False)],
        _row("success", 0),
        _row("failed", 1),
        _row("failed", 2),
        _row("failed", -1, task_id="report"),
        keys=(_failure(1, "unknown"), _failure(2, "retryable"),
              _failure(-1, "retryable", "report")),
    )  # fmt: skip
    assert [(row.label, row.decision) for row in table.decisions] == [
        ("load[0]", "validate-output"),
        ("load[1]", "reconcile-remote"),
        ("load[2]", "retry-eligible"),
        ("report", "retry-eligible"),
    ]
    assert [row.numbers["modelId"] for row in table.decisions] == [
        "load-0", "load-1", "load-2", "report",
    ]  # fmt: skip
    assert table.decision("load", 2).status.startswith("load[2]: confirmed attempt 1")
    (fixture,) = table.fixtures
    assert fixture["taskIds"] == {"load-0": "load", "load-1": "load", "load-2": "load",
                                  "report": "report"}  # fmt: skip
    assert fixture["mapIndexes"] == {"load-0": 0, "load-1": 1, "load-2": 2, "report": -1}
    # the guarded tasks of "load" run only if every map index may
    assert table.blockers("report") == []
    blockers = table.blockers("load")
    assert [text.split(": ")[:2] for text in blockers] == [
        ["load[0]", "validate-output"],
        ["load[1]", "reconcile-remote"],
    ]


def test_a_failed_map_index_not_safe_to_repeat_holds_back_its_whole_target() -> None:
    target = _target(work=NOT_SAFE)
    table = _table(
        [target], _row(None, 0, try_number=0), _row("failed", 1), _row(None, 2, try_number=0),
        keys=(_failure(1, "retryable"),),
    )  # fmt: skip
    assert [row.decision for row in table.decisions] == [
        "not-attempted", "reconcile-effects", "not-attempted",
    ]  # fmt: skip
    assert [text.split(": ")[0] for text in table.blockers("load")] == ["load[1]"]
    record = build(
        table, requests=4, api="http://api:8080", gate="gate", dag_id="dag", run_id="run",
        try_number=1, deadline_rule="6 h after the data interval", work_unit=None,
        guard=[{"taskId": "reload", "targets": ["load"], "action": "skip",
                "blockers": table.blockers("load")}],
    )  # fmt: skip
    assert [(row["taskId"], row["mapIndex"], row["decision"]) for row in record["decisions"]] == [
        ("load", 0, "not-attempted"),
        ("load", 1, "reconcile-effects"),
        ("load", 2, "not-attempted"),
    ]
    lines = record["statusUpdate"].splitlines()
    assert "load: 3 map indexes: 2 not-attempted, 1 reconcile-effects." in lines
    assert next(line for line in lines if line.startswith("load[")).startswith("load[1]: ")
    json.dumps(record)


def test_a_thousand_map_indexes_make_fixtures_of_twenty_and_a_short_status() -> None:
    rows = [_row("failed", index) for index in range(1000)]
    keys = tuple(
        _failure(index, "unknown" if index % 100 == 7 else "retryable") for index in range(1000)
    )
    table = _table([_target()], *rows, keys=keys)
    assert len(table.fixtures) == 1000 // MAX_TASKS
    for item in table.fixtures[:2]:
        assert item["result"] == evaluate(json.loads(json.dumps(item["fixture"])))
    assert len(table.decisions) == 1000
    held = [row.label for row in table.decisions if row.decision == "reconcile-remote"]
    assert held == [f"load[{index}]" for index in range(7, 1000, 100)]
    # the blockers name the held map indexes; the status update stays short
    assert [text.split(": ")[0] for text in table.blockers("load")] == held
    record = build(
        table, requests=4, api="", gate="gate", dag_id="dag", run_id="run", try_number=1,
        deadline_rule="rule", work_unit=None,
    )  # fmt: skip
    lines = record["statusUpdate"].splitlines()
    assert "load: 1000 map indexes: 990 retry-eligible, 10 reconcile-remote." in lines
    assert sum(line.startswith("load[") for line in lines) == min(10, MAX_MAPPED_LINES)
    assert len(lines) < 20


def test_past_twenty_held_map_indexes_the_blockers_count_the_rest() -> None:
    rows = [_row("failed", index) for index in range(30)]
    table = _table([_target()], *rows, keys=tuple(_failure(i, "unknown") for i in range(30)))
    blockers = table.blockers("load")
    assert len(blockers) == MAX_NAMED_BLOCKERS + 1
    assert blockers[-1].startswith("and 10 more map indexes of load held back")


# -- observations of one map index ----------------------------------------------------


def test_an_observation_names_the_map_index_it_is_about() -> None:
    seen = {"state": "retryable", "observed_at": "2026-03-02T05:39:00Z",
            "finished_at": "2026-03-02T05:31:00Z", "source": "job load-1: FAILED"}  # fmt: skip
    explicit = parse_observations({"load[1]": seen}, ["load"], as_of=NOW, mapped=["load"])
    snapshot = RunSnapshot(
        {Instance("load", 0): _row("success", 0), Instance("load", 1): _row("failed", 1)},
        (_failure(1, "unknown"),),
        pools=POOLS,
    )
    index_0, index_1 = observe_run([_target()], snapshot, explicit)
    assert (index_0.source, index_1.source, index_1.state) == (
        "airflow-api", "observations", "retryable",
    )  # fmt: skip
    with pytest.raises(ObservationError, match=r"a mapped target: name the map index.*'load\[0\]'"):
        parse_observations({"load": seen}, ["load"], as_of=NOW, mapped=["load"])
    with pytest.raises(ObservationError, match=r"'report\[0\]', which is not a target"):
        parse_observations({"report[0]": seen}, ["report"], as_of=NOW)
    absent = parse_observations({"load[5]": seen}, ["load"], as_of=NOW, mapped=["load"])
    with pytest.raises(ObservationError, match=r"no such task instance.*load\[0\] to load\[1\]"):
        observe_run([_target()], snapshot, absent)


def test_a_gate_in_the_targets_mapped_group_observes_its_own_map_index_only() -> None:
    snapshot = RunSnapshot(
        {Instance("load", 0): _row("failed", 0), Instance("load", 1): _row("success", 1)},
        (_failure(0, "retryable"),),
        pools=POOLS,
    )
    (mine,) = observe_run([_target()], snapshot, {}, own_map_indexes={"load": 0})
    assert (mine.instance.label, mine.state) == ("load[0]", "retryable")
    # a map index not expanded yet has not been tried
    (ahead,) = observe_run([_target()], snapshot, {}, own_map_indexes={"load": 4})
    assert (ahead.instance.label, ahead.state) == ("load[4]", "not-attempted")
    seen = {"state": "unknown", "observed_at": "2026-03-02T05:39:00Z"}
    other = parse_observations({"load[1]": seen}, ["load"], as_of=NOW, mapped=["load"])
    with pytest.raises(ObservationError, match=r"decides only its own map index, load\[0\]"):
        observe_run([_target()], snapshot, other, own_map_indexes={"load": 0})


# -- the sensor's wait ------------------------------------------------------------------


def test_the_sensor_waits_for_the_map_index_whose_backoff_ends_last() -> None:
    rows = [_row("failed", index, ended=NOW.subtract(seconds=30 * index)) for index in range(3)]
    keys = tuple(_failure(index, "retryable") for index in range(3))
    table = _table([_target(delay=120)], *rows, keys=keys)
    assert [row.decision for row in table.decisions] == ["wait-backoff"] * 3
    longest = table.longest_wait("load")
    assert longest is not None and longest.label == "load[0]"  # ended last, waits longest
    assert longest.earliest_start == max(row.earliest_start for row in table.decisions)  # type: ignore[type-var]


def test_the_sensor_does_not_wait_when_a_map_index_is_refused_or_none_waits() -> None:
    rows = [_row("failed", 0, ended=NOW.subtract(seconds=10)), _row("failed", 1)]
    waiting_and_refused = _table(
        [_target(delay=120)], *rows, keys=(_failure(0, "retryable"), _failure(1, "terminal"))
    )
    assert [row.decision for row in waiting_and_refused.decisions] == [
        "wait-backoff", "repair-cause",
    ]  # fmt: skip
    assert waiting_and_refused.longest_wait("load") is None
    assert waiting_and_refused.blockers("load")  # so the sensor skips
    eligible = _table([_target()], _row("failed", 0), keys=(_failure(0, "retryable"),))
    assert eligible.longest_wait("load") is None and eligible.blockers("load") == []


# -- targets in the DAG ----------------------------------------------------------------


def test_mapped_tasks_and_tasks_in_mapped_groups_are_targets() -> None:
    from airflow.providers.standard.operators.bash import BashOperator
    from airflow.sdk import DAG, task, task_group

    from airflow_retrywindow.exceptions import RetryWindowGateError
    from airflow_retrywindow.gate.targets import resolve_targets

    @task
    def load(name: str) -> str:
        return name

    @task
    def listing() -> list[dict[str, int]]:
        return [{"retries": 0}, {"retries": 3}]

    with DAG("rw_gate_mapped_targets", schedule=None, start_date=NOW) as dag:

        @task_group
        def grp(name: str) -> None:
            load(name)

        load.expand(name=["a", "b"])
        grp.expand(name=["a"])
        load.override(task_id="plain")("c")
        kwargs = listing()
        copy = BashOperator.partial(task_id="copy", bash_command="true")
        copy.expand_kwargs(kwargs, strict=False)
        BashOperator.partial(task_id="strict", bash_command="true").expand_kwargs(kwargs)
    found = resolve_targets(dag, {"load": SAFE, "grp.load": SAFE, "plain": SAFE, "strict": SAFE})
    assert [(target.task_id, target.mapped) for target in found] == [
        ("load", True), ("grp.load", True), ("plain", False), ("strict", True),
    ]  # fmt: skip
    # mapped arguments that may override its retries per map index when it runs
    with pytest.raises(RetryWindowGateError, match=r"target 'copy' is mapped with expand_kwargs"):
        resolve_targets(dag, {"copy": SAFE})
