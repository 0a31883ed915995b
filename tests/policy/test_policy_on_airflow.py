"""RetryWindowPolicy on a real Airflow: real task failures, real retries, real metadata DB."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.policy.airflow_runs import evidence, install_dags, query, run_dag, tries

pytestmark = [pytest.mark.airflow, pytest.mark.slow(minutes=5.5)]
HOUR = 3600
#: a DAG of tasks each refused a retry in its own way, run once for the module
REFUSALS = "rw_refusals"


@pytest.fixture(scope="module", autouse=True)
def dags(airflow_db: Path) -> None:
    install_dags(airflow_db)


@pytest.fixture(scope="module")
def backoff_run(dags: None) -> str:
    """The run of ``rw_backoff``: its task fails twice, then succeeds."""
    run_id, _ = run_dag("rw_backoff", deadline_in=HOUR)
    return run_id


def test_retryable_failure_waits_exactly_the_model_backoff(backoff_run: str) -> None:
    run_id = backoff_run
    history = tries("rw_backoff", run_id, "flaky")
    assert [t.state for t in history] == ["failed", "failed", "success"]
    # the model's delays (2 s, then 2 * 2), not Airflow's jittered ones
    assert [t.delay for t in history[:2]] == [2.0, 4.0]
    for before, after in itertools.pairwise(history):
        assert before.end and after.start and before.delay
        assert (after.start - before.end).total_seconds() >= before.delay
    assert history[0].reason and history[0].reason.startswith("wait-backoff: attempt 2 of 4")
    assert history[1].reason and "after a 4 s backoff" in history[1].reason


def test_evidence_replays_byte_for_byte_offline(backoff_run: str) -> None:
    run_id = backoff_run
    stored = evidence("rw_backoff", run_id, "flaky")
    assert stored is not None
    assert [d["tryNumber"] for d in stored["decisions"]] == [1, 2]
    latest = stored["latest"]
    assert latest["fixture"]["tasks"][0]["attempts"] == 2
    replay = subprocess.run(
        [sys.executable, "-m", "airflow_retrywindow", "evaluate"],
        input=json.dumps(latest["fixture"]),
        capture_output=True,
        text=True,
        check=True,
    )
    assert replay.stdout == json.dumps(latest["result"], sort_keys=True) + "\n"


@pytest.fixture(scope="module")
def refusals(dags: None) -> tuple[str, str]:
    """The run of ``rw_refusals``, each of whose tasks is refused a retry: run id, output."""
    return run_dag(REFUSALS, deadline_in=HOUR)


@pytest.mark.parametrize(
    ("task_id", "decision"),
    [
        ("append", "reconcile-remote"),
        ("submit", "reconcile-remote"),
        ("write_append", "reconcile-effects"),
    ],
)
def test_refused_after_one_try(refusals: tuple[str, str], task_id: str, decision: str) -> None:
    run_id, output = refusals
    history = tries(REFUSALS, run_id, task_id)
    assert [t.state for t in history] == ["failed"]
    stored = evidence(REFUSALS, run_id, task_id)
    assert stored is not None
    assert stored["latest"]["result"]["tasks"][0]["decision"] == decision
    assert stored["latest"]["action"] == "fail"
    assert f"reason='{decision}: " in output or f'reason="{decision}: ' in output


def test_next_attempt_past_the_deadline_is_refused() -> None:
    run_id, output = run_dag("rw_deadline", deadline_in=60)
    assert [t.state for t in tries("rw_deadline", run_id, "long_load")] == ["failed"]
    stored = evidence("rw_deadline", run_id, "long_load")
    assert stored is not None
    latest = stored["latest"]
    result = latest["result"]["tasks"][0]
    assert result["decision"] == "deadline-infeasible"
    assert result["estimatedFinish"] > latest["fixture"]["deadline"]
    assert "deadline-infeasible: next attempt would start" in output


def test_attempts_run_out_at_retries_plus_one(refusals: tuple[str, str]) -> None:
    run_id, _ = refusals
    history = tries(REFUSALS, run_id, "archive")
    assert [t.state for t in history] == ["failed", "failed"]
    stored = evidence(REFUSALS, run_id, "archive")
    assert stored is not None
    decisions = [d["result"]["tasks"][0]["decision"] for d in stored["decisions"]]
    assert decisions == ["wait-backoff", "attempts-exhausted"]
    assert stored["latest"]["fixture"]["policy"]["maxAttempts"] == 2


def test_broken_deadline_fails_closed(refusals: tuple[str, str]) -> None:
    run_id, output = refusals
    assert [t.state for t in tries(REFUSALS, run_id, "report")] == ["failed"]
    assert "gate-error: the retry window could not be evaluated" in output
    assert "KeyError: 'deadline_table'" in output
    # kept like any decision, without a fixture: there was nothing the model could see
    stored = evidence(REFUSALS, run_id, "report")
    assert stored is not None
    latest = stored["latest"]
    assert (latest["action"], latest["failure"]) == ("fail", None)
    assert "fixture" not in latest
    assert latest["reason"] == "gate-error: KeyError: 'deadline_table'"


@pytest.mark.parametrize("task_id", ["slow_submit", "wrapped_submit"])
def test_timeouts_are_unknown_outcomes(refusals: tuple[str, str], task_id: str) -> None:
    run_id, _ = refusals
    assert [t.state for t in tries(REFUSALS, run_id, task_id)] == ["failed"]
    stored = evidence(REFUSALS, run_id, task_id)
    assert stored is not None
    latest = stored["latest"]
    assert (latest["failure"], latest["action"]) == ("unknown", "fail")
    assert latest["result"]["tasks"][0]["decision"] == "reconcile-remote"


def test_mapped_instances_retry_through_the_start_check() -> None:
    run_id, output = run_dag("rw_mapped", deadline_in=HOUR)
    rows = query(
        "select map_index, state, try_number from task_instance where dag_id=? and run_id=? "
        "order by map_index",
        "rw_mapped",
        run_id,
    )
    assert rows == [(0, "success", 2), (1, "success", 2)], output[-3000:]
