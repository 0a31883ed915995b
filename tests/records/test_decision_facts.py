"""The facts of one stored decision, read from every shape the provider stores.

The view, the notifier and ``explain`` tell a stored decision from these facts;
here each kept shape (``stored/``, written by the provider's own code) is read:
the policy's evidence entries, as the task state store and XCom keep them, and
every target of a gate's and a sensor's decision record.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pendulum
import pytest

from airflow_retrywindow.exceptions import RecordError
from airflow_retrywindow.records.breaker_state import KEY as BREAKER_KEY
from airflow_retrywindow.records.decision_facts import POLICY, DecisionFacts
from airflow_retrywindow.records.evidence import EVIDENCE_KEY
from airflow_retrywindow.redaction import safe_text
from tests.breaker.states import opened

STORED = Path(__file__).with_name("stored")
#: the task every policy fixture is about
TASK = "load"
#: per policy fixture: try, check, action, failure, decision, the reconciled job's outcome
POLICY_FACTS = {
    "policy_decision_retry": (1, "retry-policy", "retry", "retryable", "wait-backoff", None),
    "policy_decision_refused": (1, "retry-policy", "fail", "terminal", "repair-cause", None),
    "policy_gate_error": (1, "retry-policy", "fail", None, "gate-error", None),
    "policy_gate_error_handed_over": (1, "retry-policy", "default", None, "gate-error", None),
    "retry_start_refused": (2, "retry-start", "fail", "unknown", "reconcile-remote", None),
    "policy_reconciliation": (1, "retry-policy", "retry", "unknown", "observe-running", "active"),
    "retry_start_run": (2, "retry-start", "run", "unknown", "observe-running", "active"),
}
#: per record fixture: who decided, and (task, map index, try, decision) of each target
RECORD_FACTS = {
    "gate_record_guard": ("retry_gate", [
        ("load", 0, 1, "reconcile-effects"), ("load", 1, 1, "reconcile-remote"),
        ("report", -1, 2, "retry-eligible"),
    ]),
    "gate_record_override": ("retry_gate", [
        ("load", 0, 1, "reconcile-effects"), ("load", 1, 1, "reconcile-effects"),
        ("report", -1, 3, "attempts-exhausted"),
    ]),
    "sensor_record_run": ("wait_for_window", [("load", -1, 1, "retry-eligible")]),
    "sensor_record_timeout": ("wait_for_window", [("load", -1, 1, "wait-backoff")]),
}  # fmt: skip


def stored(name: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads((STORED / f"{name}.json").read_text(encoding="utf-8"))
    return value


def test_every_stored_shape_is_read_here() -> None:
    assert {path.stem for path in STORED.glob("*.json")} == set(POLICY_FACTS) | set(RECORD_FACTS)


@pytest.mark.parametrize("where", ["taskStateStore", "xcom"])
@pytest.mark.parametrize("name", sorted(POLICY_FACTS))
def test_a_policy_decision_reads_from_the_store_and_from_xcom(name: str, where: str) -> None:
    kept = stored(name)[where][EVIDENCE_KEY]
    entry = kept.get("latest", kept)  # the store keeps a history, XCom the latest entry
    try_number, check, action, failure, decision, job = POLICY_FACTS[name]
    facts = DecisionFacts.of_evidence(entry, task_id=TASK, map_index=3)
    assert (facts.task_id, facts.map_index, facts.decided_by) == (TASK, 3, POLICY)
    assert (facts.try_number, facts.check, facts.action) == (try_number, check, action)
    assert (facts.failure, facts.decision) == (failure, decision)
    assert facts.reason == entry["reason"] and facts.reason.startswith(decision)
    assert facts.problem is None
    assert (facts.job.outcome if facts.job else None) == job
    if decision == "gate-error":  # decided without the model: nothing to replay or to time
        assert facts.model is None and facts.decided_at is None and facts.attempts is None
        return
    assert facts.model is not None and facts.model.mismatch() is None
    assert facts.model.task.decision.value == decision
    assert facts.decided_at is not None and facts.decided_at > pendulum.parse(entry["origin"])
    deadline_at = pendulum.parse(entry["deadlineAt"])
    assert facts.deadline is not None and abs((facts.deadline - deadline_at).total_seconds()) < 1
    assert facts.deadline_rule == entry["deadline"]
    assert facts.attempts is not None and facts.max_attempts is not None
    assert 1 <= facts.attempts <= facts.max_attempts
    assert facts.model.status(TASK).startswith(f"{TASK}: confirmed attempt ")


@pytest.mark.parametrize("name", sorted(RECORD_FACTS))
def test_every_target_of_a_record_reads_and_replays(name: str) -> None:
    record = stored(name)["xcom"]["return_value"]
    gate, targets = RECORD_FACTS[name]
    read = [
        DecisionFacts.of_target(row, decided_by=gate).replayed(row, record["fixtures"])
        for row in record["decisions"]
    ]
    assert [(f.task_id, f.map_index, f.try_number, f.decision) for f in read] == targets
    for facts in read:
        assert facts.decided_by == gate and facts.problem is None
        assert facts.attempts == facts.try_number and facts.max_attempts in {3, 4}
        assert facts.failure is not None
        assert facts.failure.split(": ")[0] in {"retryable", "unknown"}
        assert facts.estimate is not None and facts.estimate.line()
        assert facts.model is not None and facts.fixture_index == 0
        assert facts.model.stored_decision == facts.decision
        assert facts.model.mismatch() is None


def test_unreadable_parts_are_problems_naming_the_field_or_raised_when_strict() -> None:
    entry = copy.deepcopy(stored("policy_reconciliation")["xcom"][EVIDENCE_KEY])
    entry["reconciliation"] = {"job": 7}
    entry["origin"] = "soon"
    facts = DecisionFacts.of_evidence(entry, task_id=TASK)
    assert facts.job is None and facts.job_problem is not None
    assert facts.model is None and facts.decision == "unreadable"
    assert facts.problem is not None and facts.problem.startswith(facts.job_problem)
    assert "origin must be an ISO 8601 time with an offset, got 'soon'" in facts.problem
    with pytest.raises(RecordError, match="origin must be an ISO 8601 time"):
        DecisionFacts.of_evidence(entry, task_id=TASK, strict=True)

    row = copy.deepcopy(stored("sensor_record_run")["xcom"]["return_value"]["decisions"][0])
    row["estimateSource"] = "the policy"
    facts = DecisionFacts.of_target(row, decided_by="wait_for_window")
    assert facts.estimate is None and "estimateSource" in (facts.problem or "")
    with pytest.raises(RecordError, match="estimateSource"):
        DecisionFacts.of_target(row, decided_by="wait_for_window", strict=True)
    with pytest.raises(RecordError, match="fixture"):
        facts.replayed({**row, "fixture": 5}, [])


def test_stored_text_passes_through_the_readers_mask() -> None:
    secret = "https://ops:hunter2@jobs.example.com/run"
    entry = copy.deepcopy(stored("policy_decision_refused")["xcom"][EVIDENCE_KEY])
    entry["reason"] = f"repair-cause: see {secret}"
    entry["failure"] = f"terminal {secret}"
    masked = DecisionFacts.of_evidence(entry, task_id=TASK, mask=safe_text)
    assert "hunter2" not in masked.reason and "hunter2" not in (masked.failure or "")
    as_stored = DecisionFacts.of_evidence(entry, task_id=TASK)
    assert "hunter2" in as_stored.reason  # a reader that writes it out masks it itself


def test_a_gate_target_held_on_its_pool_carries_the_pools_breaker() -> None:
    row = {"taskId": "load", "decision": "dependency-held", BREAKER_KEY: opened().as_dict()}
    facts = DecisionFacts.of_target(row, decided_by="load_gate")
    assert facts.breaker == opened() and facts.breaker_problem is None
    broken = DecisionFacts.of_target(
        {**row, BREAKER_KEY: {**opened().as_dict(), "since": "nope"}}, decided_by="load_gate"
    )
    assert broken.breaker is None
    assert broken.breaker_problem is not None
    assert broken.breaker_problem.startswith(f"{BREAKER_KEY} = {{")
    assert broken.breaker_problem.endswith("is not a breaker's state")
    # a credential in what cannot be read passes through the reader's mask
    secret = {**row, BREAKER_KEY: "https://ops:hunter2@status.example/"}
    masked = DecisionFacts.of_target(secret, decided_by="load_gate", mask=safe_text)
    assert masked.breaker_problem is not None and "hunter2" not in masked.breaker_problem
    assert DecisionFacts.of_target({"taskId": "load"}, decided_by="g").breaker_problem is None
