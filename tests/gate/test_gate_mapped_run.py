"""Mapped targets on a real DAG run, read through a real API server.

``rw_gate_mapped`` runs once (``airflow dags test``): mapped loads really succeed
and fail under their retry policy, mapped appends really fail; then the gates
and sensors read every map index through ``/api/v2`` and decide each on its own.
Every assertion reads the metadata DB. The run is on its test's clock
(``tests/gate/run_clock.py``): the appends stop it as they fail, and the sensor's line that
says until when it waits sets it running from there.
"""

from __future__ import annotations

from typing import Any

import pendulum
import pytest

from tests.gate.gate_runs import ApiServer, dags_test, gate_env, on_run_clock, query, xcom

pytestmark = [pytest.mark.airflow, pytest.mark.slow]
DAG_ID = "rw_gate_mapped"


#: append's backoff in the DAG (rw_gate_mapped.py)
BACKOFF = 10


@pytest.fixture(scope="module")
def run(api_server: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    with on_run_clock(api_server, tmp_path_factory.mktemp("mapped-run")) as (clock, server):
        return dags_test(DAG_ID, gate_env(server), clock=clock)


def _instances(run_id: str, task_id: str) -> list[tuple[int, str | None, int]]:
    """(map index, state, try number) of every task instance of ``task_id``."""
    rows = query(
        "select map_index, state, try_number from task_instance "
        "where dag_id=? and run_id=? and task_id=? order by map_index",
        DAG_ID, run_id, task_id,
    )  # fmt: skip
    return [(int(index), state, int(tries)) for index, state, tries in rows]


def _record(run: tuple[str, str], task_id: str) -> dict[str, Any]:
    run_id, output = run
    found = xcom(DAG_ID, run_id, task_id)
    assert isinstance(found, dict), f"{task_id} pushed no decision record:\n{output[-4000:]}"
    return found


def _decisions(record: dict[str, Any]) -> list[tuple[str, int, str]]:
    return [(row["taskId"], row["mapIndex"], row["decision"]) for row in record["decisions"]]


def _ends(run_id: str, task_id: str) -> list[pendulum.DateTime]:
    rows = query(
        "select end_date from task_instance where dag_id=? and run_id=? and task_id=? "
        "order by map_index",
        DAG_ID, run_id, task_id,
    )  # fmt: skip
    return [pendulum.parse(row[0], tz="UTC") for row in rows]  # type: ignore[misc]


def _starts(run_id: str, task_id: str) -> list[pendulum.DateTime]:
    rows = query(
        "select start_date from task_instance where dag_id=? and run_id=? and task_id=? "
        "order by map_index",
        DAG_ID, run_id, task_id,
    )  # fmt: skip
    return [pendulum.parse(row[0], tz="UTC") for row in rows]  # type: ignore[misc]


@pytest.mark.parametrize(
    ("gate", "target", "repeat"),
    [
        ("mapped_gate", "load", "reload"),
        ("group_gate", "per_partition.load_part", "repeat.reload_part"),
    ],
)
def test_a_failed_map_index_not_safe_to_repeat_is_decided_on_its_own_and_holds_the_repeat(
    run: tuple[str, str], gate: str, target: str, repeat: str
) -> None:
    run_id, output = run
    assert _instances(run_id, target) == [(0, "success", 1), (1, "failed", 1), (2, "success", 1)]
    record = _record(run, gate)
    assert _decisions(record) == [
        (target, 0, "validate-output"),
        (target, 1, "reconcile-effects"),  # its policy's class, read from its own XCom key
        (target, 2, "validate-output"),
    ], output[-4000:]
    rows = record["decisions"]
    assert rows[1]["classification"].endswith("(XCom retry_window.failure.retryable of try 1)")
    assert rows[1]["reason"].startswith("reconcile-effects: ")
    # every map index under an id of its own, all in one fixture
    assert [row["fixture"] for row in rows] == [0, 0, 0]
    assert sorted(record["fixtures"][0]["mapIndexes"].values()) == [0, 1, 2]
    assert len({row["modelId"] for row in rows}) == 3
    # the repeat, mapped itself, is skipped (expanded yet or not) before any map index ran
    repeated = _instances(run_id, repeat)
    assert repeated and {(state, tries) for _, state, tries in repeated} == {("skipped", 0)}
    (guarded,) = record["guard"]
    assert (guarded["taskId"], guarded["action"]) == (repeat, "skip")
    assert any(text.startswith(f"{target}[1]: reconcile-effects") for text in guarded["blockers"])
    assert record["skipped"] == [repeat]
    assert (
        f"{target}: 3 map indexes: 2 validate-output, 1 reconcile-effects."
        in (record["statusUpdate"])
    )
    # one listing of the task instances, one of the XCom keys, one of the pools, the token
    assert record["requests"] == 4


def test_the_sensor_waits_for_the_backoff_that_ends_last(run: tuple[str, str]) -> None:
    run_id, output = run
    assert [state for _, state, _ in _instances(run_id, "append")] == ["failed", "failed"]
    ends = _ends(run_id, "append")
    last = max(range(2), key=lambda index: ends[index])
    assert abs((ends[1] - ends[0]).total_seconds()) >= 3  # one ran after the other
    record = _record(run, "wait_append")
    assert record["action"] == "run", output[-4000:]
    assert _decisions(record) == [("append", 0, "retry-eligible"), ("append", 1, "retry-eligible")]
    (waited,) = record["waits"]
    # the wait was for the map index that failed last: its backoff ends last
    assert waited["reason"].startswith(f"append[{last}]: wait-backoff: attempt 2 of 2")
    assert pendulum.parse(waited["until"]) >= ends[last].add(seconds=BACKOFF).start_of("second")
    starts = _starts(run_id, "retry_append")
    assert [state for _, state, _ in _instances(run_id, "retry_append")] == ["success"] * 2
    assert min(starts) >= ends[last].add(seconds=BACKOFF)
    # the gate after the wait: both map indexes may run, so its mapped repeat runs
    gate = _record(run, "append_gate")
    assert [row[2] for row in _decisions(gate)] == ["retry-eligible", "retry-eligible"]
    assert [state for _, state, _ in _instances(run_id, "rerun")] == ["success"] * 2


def test_a_gate_in_a_mapped_task_group_decides_its_own_map_index(
    run: tuple[str, str],
) -> None:
    run_id, output = run
    fetch, gate, repeat = "by_partition.fetch", "by_partition.gate_here", "by_partition.refetch"
    assert _instances(run_id, fetch) == [(0, "failed", 1), (1, "success", 1)], output[-4000:]
    records = {index: xcom(DAG_ID, run_id, gate, map_index=index) for index in (0, 1)}
    assert _decisions(records[0]) == [(fetch, 0, "retry-eligible")], output[-4000:]
    assert _decisions(records[1]) == [(fetch, 1, "validate-output")]
    # each map index guards its own repeat: one runs, the other is skipped; in a
    # mapped task group the gate holds back by skipping itself (Airflow 3.3.2 skips
    # no other task of one map index for it)
    assert _instances(run_id, repeat) == [(0, "success", 1), (1, "skipped", 0)]
    assert _instances(run_id, gate) == [(0, "success", 1), (1, "skipped", 1)]
    assert records[0]["skipped"] == [] and records[1]["skipped"] == [repeat]


def test_the_sensor_skips_when_any_map_index_is_refused(run: tuple[str, str]) -> None:
    run_id, output = run
    record = _record(run, "wait_settle")
    assert record["action"] == "skip", output[-4000:]
    assert record["waits"] == []  # it did not wait for settle[0]'s backoff
    assert _decisions(record) == [("settle", 0, "wait-backoff"), ("settle", 1, "reconcile-remote")]
    assert record["decisions"][1]["source"] == "observations"
    assert record["skipped"] == ["retry_settle"]
    assert [(state, tries) for _, state, tries in _instances(run_id, "retry_settle")] == [
        ("skipped", 0)
    ] * 2
