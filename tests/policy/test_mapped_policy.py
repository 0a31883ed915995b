"""RetryWindowPolicy on a mapped task: every map index decided on its own, with its own evidence.

Airflow 3.3 keeps the task state store and XCom per task instance, map index
included; the policy writes its evidence there, and the retry-start check of a
map index's next try reads that map index's evidence only.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.policy.airflow_runs import query, run_dag

pytestmark = [pytest.mark.airflow, pytest.mark.slow]
DAG_ID = "rw_mapped_policy"
PARTITIONS = ["ok", "flaky", "lost", "broken"]


@pytest.fixture(scope="module")
def run(airflow_db: Path) -> tuple[str, str]:
    for source in Path(__file__).with_name("mapped_dags").glob("*.py"):
        shutil.copy(source, airflow_db / "dags" / source.name)
    return run_dag(DAG_ID)


def _by_index(sql: str, run_id: str, *params: Any) -> dict[int, Any]:
    return {int(row[0]): row[1:] for row in query(sql, DAG_ID, run_id, *params)}


def test_each_map_index_is_decided_on_its_own(run: tuple[str, str]) -> None:
    run_id, output = run
    found = _by_index(
        "select map_index, state, try_number from task_instance "
        "where dag_id=? and run_id=? and task_id='load'",
        run_id,
    )
    assert [found[index] for index in range(4)] == [
        ("success", 1),  # ok
        ("success", 2),  # flaky: retried after the model's backoff
        ("failed", 1),  # lost: reconcile first, no retry
        ("failed", 1),  # broken: repair first, no retry
    ], output[-4000:]


def test_each_map_index_keeps_its_own_evidence(run: tuple[str, str]) -> None:
    run_id, _ = run
    stored = {
        index: json.loads(value)
        for index, (value,) in _by_index(
            "select map_index, value from task_state_store where dag_id=? and run_id=? "
            "and task_id='load' and key='retry_window.evidence'",
            run_id,
        ).items()
    }
    assert sorted(stored) == [1, 2, 3]  # "ok" never failed: no decision, no evidence

    def decided(index: int) -> list[tuple[int, str, str, str]]:
        return [
            (
                entry["tryNumber"],
                entry["failure"],
                entry["result"]["tasks"][0]["decision"],
                entry["action"],
            )
            for entry in stored[index]["decisions"]
        ]

    assert decided(1) == [(1, "retryable", "wait-backoff", "retry")]
    assert decided(2) == [(1, "unknown", "reconcile-remote", "fail")]
    assert decided(3) == [(1, "terminal", "repair-cause", "fail")]
    # each fixture is the map index's own: one task, its attempts of its own window
    for index in (1, 2, 3):
        latest = stored[index]["latest"]
        assert [task["attempts"] for task in latest["fixture"]["tasks"]] == [1]
    assert "ConnectionError: the database closed the connection" in stored[1]["latest"]["reason"]
    assert "OutcomeUnknown" in stored[2]["latest"]["reason"]


def test_the_failure_class_is_an_xcom_key_of_the_failed_map_index(run: tuple[str, str]) -> None:
    run_id, _ = run
    keys = query(
        "select map_index, key from xcom where dag_id=? and run_id=? and task_id='load' "
        "and key like 'retry_window.failure.%' order by map_index",
        DAG_ID,
        run_id,
    )
    # flaky's try 2 started afresh (Airflow clears a map index's XComs when a try
    # starts) and succeeded; the failed map indexes keep their class
    assert keys == [(2, "retry_window.failure.unknown"), (3, "retry_window.failure.terminal")]


def test_the_retry_start_check_reads_the_evidence_of_its_own_map_index(
    run: tuple[str, str],
) -> None:
    run_id, output = run
    # flaky's try 2 started after lost and broken had stored "fail" for their try 1;
    # it ran because the check read flaky's own decision ("retry" for try 1)
    starts = _by_index(
        "select map_index, start_date from task_instance where dag_id=? and run_id=? "
        "and task_id='load'",
        run_id,
    )
    ends = _by_index(
        "select map_index, end_date from task_instance where dag_id=? and run_id=? "
        "and task_id='load'",
        run_id,
    )
    assert starts[1][0] > max(ends[2][0], ends[3][0]), output[-4000:]
    flaky = query(
        "select value from task_state_store where dag_id=? and run_id=? and task_id='load' "
        "and map_index=1 and key='retry_window.evidence'",
        DAG_ID,
        run_id,
    )
    # no refusal of try 2 was recorded: the only decision is the policy's, for try 1
    checks = [(d["tryNumber"], d["check"]) for d in json.loads(flaky[0][0])["decisions"]]
    assert checks == [(1, "retry-policy")]
