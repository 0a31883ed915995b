"""RetryWindowGateOperator on a real DAG run, reading a real API server.

``rw_gate_table`` runs once (``airflow dags test``): its tasks really succeed,
fail, fail terminally and lose their outcome; then the gates read the run
through ``/api/v2`` and decide. Every assertion reads the metadata DB. The run is on a
clock of its own (``tests/gate/run_clock.py``), which its reconcile task stops and its
settle task moves past the 1 s backoffs: the gates decide at that instant, with monitor's
observation seconds old, however long a busy machine takes to start them.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from devstack.stack import free_port
from tests.gate.gate_runs import (
    ApiServer,
    dags_test,
    decisions,
    gate_env,
    on_run_clock,
    query,
    states,
    xcom,
)

pytestmark = [pytest.mark.airflow, pytest.mark.slow(minutes=3)]
DAG_ID = "rw_gate_table"


class Run:
    """One run of a test DAG and what it left behind."""

    def __init__(
        self, dag_id: str, run_id: str, output: str, audit: Path | None = None, api_port: int = 0
    ) -> None:
        self.dag_id, self.run_id, self.output, self.audit = dag_id, run_id, output, audit
        self.api_port = api_port  # the API server's, as the run reached it

    def record(self, task_id: str) -> dict[str, Any]:
        found = xcom(self.dag_id, self.run_id, task_id)
        assert isinstance(found, dict), (
            f"{task_id} pushed no decision record:\n{self.output[-4000:]}"
        )
        return found

    @property
    def states(self) -> dict[str, str | None]:
        return states(self.dag_id, self.run_id)


@pytest.fixture(scope="module")
def table(api_server: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> Run:
    folder = tmp_path_factory.mktemp("table")
    audit = folder / "sockets.log"
    with on_run_clock(api_server, folder) as (clock, server):
        run_id, output = dags_test(DAG_ID, gate_env(server), audit=audit, clock=clock)
    return Run(DAG_ID, run_id, output, audit, server.port)


#: the decisions of table_gate's targets under a RetryWindowPolicy (Airflow 3.3 and later)
UNDER_A_POLICY = {
    "load": "reconcile-remote",  # OutcomeUnknown, classified by its retry policy
    "repair": "repair-cause",  # TerminalFailure, classified by its retry policy
}


def test_every_target_gets_the_models_decision(table: Run, retry_policies: bool) -> None:
    assert decisions(table.record("table_gate")) == {
        "extract": "validate-output",  # DONE is not success: validate first
        **(UNDER_A_POLICY if retry_policies else {}),
        "archive": "attempts-exhausted",  # retries=0: one run, used up
        "append": "wait-backoff",  # retry_delay of an hour
        "publish": "reconcile-effects",  # not claimed safe to repeat
        "transform": "deadline-infeasible",  # 7 h of work, 6 h to the deadline
        "report": "retry-eligible",
        "monitor": "observe-running",  # an explicit observation overrides Airflow
        "lookup": "refresh-observation",  # an explicit observation two hours old
        "fresh_light": "not-attempted",
        "fresh_heavy": "not-attempted",
        "huge": "not-attempted",
    }


def test_numbers_are_real_times_and_attempts_count_the_window(table: Run) -> None:
    rows = {row["taskId"]: row for row in table.record("table_gate")["decisions"]}
    append = rows["append"]
    assert (append["attempts"], append["maxAttempts"], append["backoffSeconds"]) == (1, 3, 3600)
    ended = query(
        "select end_date from task_instance where dag_id=? and run_id=? and task_id='append'",
        DAG_ID, table.run_id,
    )[0][0]  # fmt: skip
    assert append["lastFinishedAt"][:19] >= str(ended).replace(" ", "T")[:19]
    assert append["earliestStart"] > append["lastFinishedAt"]
    assert append["reason"].startswith("wait-backoff: attempt 2 of 3 may start at")
    assert (
        rows["archive"]["classification"]
        == "Airflow state failed; no RetryWindowPolicy on the task"
    )
    assert rows["monitor"]["source"] == "observations"
    assert "monitor-7 still running" in rows["monitor"]["classification"]
    assert rows["transform"]["slackSeconds"] < 0
    assert rows["report"]["slackSeconds"] > 0


def test_guarded_tasks_run_or_are_skipped_like_a_short_circuit(table: Run) -> None:
    found = table.states
    assert found["table_gate"] == "success"
    assert found["fresh_light"] == "success"  # first runs are not retries
    assert found["fresh_heavy"] == "success"  # wait-capacity queues; it does not block
    assert found["rerun_report"] == "success"  # guarded by report: retry-eligible
    assert found["rerun_append"] == "skipped"  # guarded by append: still in its backoff
    assert found["huge"] == "skipped"  # 3 slots of a 2-slot pool: never
    assert found["after_huge"] == "skipped"  # ignore_downstream_trigger_rules=True
    record = table.record("table_gate")
    assert record["skipped"] == ["after_huge", "huge", "rerun_append"]
    actions = {item["taskId"]: item["action"] for item in record["guard"]}
    assert actions == {
        "fresh_light": "run",
        "fresh_heavy": "run",
        "huge": "skip",
        "rerun_report": "run",
        "rerun_append": "skip",
    }
    # the record was pushed before the skip, next to what SkipMixin keeps for a clear
    assert xcom(DAG_ID, table.run_id, "table_gate", "skipmixin_key") == {
        "skipped": ["after_huge", "huge", "rerun_append"]
    }


def test_without_ignoring_trigger_rules_only_the_guarded_task_is_skipped(table: Run) -> None:
    found = table.states
    assert found["rerun_append_narrow"] == "skipped"
    assert found["after_narrow"] == "success"  # trigger_rule none_failed: it still runs
    assert table.record("narrow_gate")["skipped"] == ["rerun_append_narrow"]


def test_capacity_verdicts_for_a_pool_of_two(table: Run) -> None:
    rows = {row["taskId"]: row["capacity"] for row in table.record("table_gate")["decisions"]}
    # the gate itself holds 1 of the 2 slots while it looks
    assert {task: rows[task]["verdict"] for task in ("fresh_light", "fresh_heavy", "huge")} == {
        "fresh_light": "fits-now",
        "fresh_heavy": "wait-capacity",
        "huge": "capacity-infeasible",
    }
    heavy = rows["fresh_heavy"]
    assert (heavy["pool"], heavy["slots"], heavy["occupied"], heavy["open"]) == (
        "rw_gate_positions", 2, 1, 1,
    )  # fmt: skip
    assert heavy["poolSlots"] == 2
    assert rows["huge"]["reason"].startswith(
        "capacity-infeasible: needs 3 slots of pool 'rw_gate_positions', which has only 2"
    )


def test_an_estimate_over_budget_blocks_the_repeat(table: Run) -> None:
    record = table.record("budget_gate")
    assert decisions(record) == {"report": "retry-eligible"}
    assert record["budget"] == {
        "verdict": "budget-exceeded",
        "reason": "budget-exceeded: review the plan or get the budget changed; estimate 260 GB "
        "is over the approved 200 GB",
        "limit": 200,
        "estimate": 260,
        "unit": "GB",
        "estimateIsUpperBound": False,
    }
    assert table.states["rerun_report_budget"] == "skipped"
    assert record["guard"][0]["blockers"] == [record["budget"]["reason"]]


def _given(record: dict[str, Any]) -> dict[str, tuple[int, int, bool]]:
    """task id -> (duration, validation, safeRepeat) as the model was given them."""
    return {
        item["taskIds"][task["id"]]: (task["duration"], task["validation"], task["safeRepeat"])
        for item in record["fixtures"]
        for task in item["fixture"]["tasks"]
    }


@pytest.mark.requires_airflow_3_3
def test_a_policy_classifies_the_failure_its_gate_decides_on(table: Run) -> None:
    record = table.record("table_gate")
    rows = {row["taskId"]: row for row in record["decisions"]}
    assert rows["load"]["classification"].endswith("(XCom retry_window.failure.unknown of try 1)")
    assert any(
        line.startswith("load: confirmed attempt 1 submitted, outcome unknown")
        for line in record["statusUpdate"].splitlines()
    )


@pytest.mark.requires_airflow_3_3
def test_a_gate_listing_its_targets_decides_on_their_policies(table: Run) -> None:
    record = table.record("policy_gate")
    assert decisions(record) == {
        "load": "reconcile-remote",
        "repair": "repair-cause",
        "rebuild": "deadline-infeasible",  # only its policy says it takes seven hours
    }
    assert table.states["rebuild"] == "failed"  # its policy refused the retry as well
    assert _given(record) == {
        "load": (60, 30, True),
        "repair": (60, 30, True),
        "rebuild": (7 * 3600, 20 * 60, True),
    }
    assert record["deadlineRule"] == "data_interval_end + 6:00:00"
    from_policy = dict.fromkeys(("duration", "validation", "safeRepeat", "deadline"), "policy")
    assert [row["estimateSource"] for row in record["decisions"]] == [from_policy] * 3
    # the gate that states the policy's own values says both did
    sources = {
        row["taskId"]: row["estimateSource"] for row in table.record("table_gate")["decisions"]
    }
    assert set(sources["load"].values()) == {"gate and policy"}
    assert set(sources["extract"].values()) == {"gate"}  # no policy: the gate's alone


def test_the_record_replays_offline_byte_for_byte(table: Run, retry_policies: bool) -> None:
    record = table.record("table_gate")
    fixtures = record["fixtures"]
    # grouped by Airflow's retry settings: five among the decided targets (four without
    # load and repair, which alone retry twice after 2 s)
    settings = 5 if retry_policies else 4
    assert len(fixtures) == settings
    policies = [json.dumps(item["fixture"]["policy"], sort_keys=True) for item in fixtures]
    assert len(set(policies)) == settings
    for item in fixtures:
        assert 1 <= len(item["fixture"]["tasks"]) <= 20
        replay = subprocess.run(
            [sys.executable, "-m", "airflow_retrywindow", "evaluate"],
            input=json.dumps(item["fixture"]),
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert json.loads(replay.stdout) == item["result"]
        assert item["origin"].endswith("Z")


def test_the_record_carries_the_unit_of_work_and_a_status_update(table: Run) -> None:
    record = table.record("table_gate")
    assert record["workUnit"]["business_date"] == record["asOf"][:10]
    assert record["workUnit"]["input_partition"] == "positions/" + record["asOf"][:10].replace(
        "-", ""
    )
    lines = record["statusUpdate"].splitlines()
    assert (
        lines[2]
        == "May run: fresh_light, fresh_heavy, rerun_report. Held back: huge, rerun_append."
    )
    assert any("Held back by its pool: capacity-infeasible" in line for line in lines)
    for flag in ("jobsExecuted", "idempotencyProven", "completionGuaranteed", "productionApproval"):
        assert record[flag] is False


def test_requests_do_not_grow_with_targets(table: Run) -> None:
    # 13 targets (11 before Airflow 3.3): a token, one page of task instances, one of XCom
    # keys, one of pools (a breaker pool's breaker would come in its description: none is)
    assert table.record("table_gate")["requests"] == 4


def test_the_gate_opens_no_connection_but_the_airflow_api(table: Run) -> None:
    assert table.audit is not None
    events = [line.split(" ", 1) for line in table.audit.read_text().splitlines()]
    connects = [ast.literal_eval(target) for event, target in events if event == "socket.connect"]
    assert connects, "the audit hook saw no connection at all"
    assert set(connects) == {("127.0.0.1", table.api_port)}


@pytest.fixture(scope="module")
def fail_closed(api_server: ApiServer) -> Run:
    closed = f"http://127.0.0.1:{free_port()}"
    env = gate_env(
        api_server,
        AIRFLOW_CONN_RW_GATE_UNREACHABLE=json.dumps(
            {"conn_type": "http", "host": closed, "login": "a", "password": "b"}
        ),
    )
    run_id, output = dags_test("rw_gate_fail_closed", env)
    return Run("rw_gate_fail_closed", run_id, output)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "no_connection",
            "the Airflow connection 'rw_gate_missing' for the REST API could not be read",
        ),
        ("unreachable", "could not be reached to get a token"),
        ("naive", "must be timezone-aware, got the naive datetime 2026-01-01T00:00:00"),
    ],
)
def test_a_gate_that_cannot_decide_fails_closed(fail_closed: Run, name: str, message: str) -> None:
    found = fail_closed.states
    assert found[f"gate_{name}"] == "failed"
    assert found[f"guarded_{name}"] == "upstream_failed"  # the guarded work did not run
    assert "the retry window gate could not decide, so the guarded work does not run" in (
        fail_closed.output
    )
    assert message in fail_closed.output
