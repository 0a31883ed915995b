"""Invariants of the decisions, on generated valid fixtures."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_retrywindow.model import Decision, InvalidFixture, evaluate
from tests.model.fixture_strategies import fixtures, json_values, shaped_junk

SETTINGS = settings(max_examples=150, deadline=None)
FLAGS = ("jobsExecuted", "idempotencyProven", "completionGuaranteed", "productionApproval")
SCHEDULED = {"deadline-infeasible", "wait-backoff", "retry-eligible"}
BY_STATE = {
    "running": "observe-running",
    "unknown": "reconcile-remote",
    "succeeded": "validate-output",
    "terminal": "repair-cause",
}


def expected_decision(payload: dict[str, Any], task: dict[str, Any]) -> str:
    """The precedence of the rules, restated from the contract."""
    if payload["asOf"] - task["observedAt"] > payload["maxObservationAge"]:
        return "refresh-observation"
    if task["state"] in BY_STATE:
        return BY_STATE[task["state"]]
    if task["attempts"] >= payload["policy"]["maxAttempts"]:
        return "attempts-exhausted"
    if not task["safeRepeat"]:
        return "reconcile-effects"
    return "scheduled"


@SETTINGS
@given(fixtures())
def test_decisions_follow_precedence(payload: dict[str, Any]) -> None:
    result = {task["id"]: task for task in evaluate(payload)["tasks"]}

    for task in payload["tasks"]:
        expected = expected_decision(payload, task)
        decision = result[task["id"]]["decision"]
        assert decision in SCHEDULED if expected == "scheduled" else decision == expected


@SETTINGS
@given(fixtures())
def test_output_shape_sorting_and_flags(payload: dict[str, Any]) -> None:
    result = evaluate(payload)

    ids = [task["id"] for task in result["tasks"]]
    assert ids == sorted(task["id"] for task in payload["tasks"])
    assert set(result) == {"tasks", "deadlinePassed", *FLAGS}
    assert all(result[flag] is False for flag in FLAGS)
    assert result["deadlinePassed"] is (payload["asOf"] > payload["deadline"])
    values = {decision.value for decision in Decision}
    for task in result["tasks"]:
        assert set(task) == {"id", "decision", "backoff", "earliestStart", "estimatedFinish"}
        assert task["decision"] in values


@SETTINGS
@given(fixtures())
def test_schedule_arithmetic(payload: dict[str, Any]) -> None:
    policy, as_of = payload["policy"], payload["asOf"]
    given_tasks = {task["id"]: task for task in payload["tasks"]}

    for result in evaluate(payload)["tasks"]:
        task = given_tasks[result["id"]]
        if result["decision"] not in SCHEDULED:
            assert result["backoff"] is result["earliestStart"] is result["estimatedFinish"] is None
            continue
        backoff, start, finish = (
            result["backoff"],
            result["earliestStart"],
            result["estimatedFinish"],
        )
        assert policy["initialDelay"] <= backoff <= policy["maxDelay"]
        expected_backoff = policy["initialDelay"] * policy["multiplier"] ** (task["attempts"] - 1)
        assert backoff == min(policy["maxDelay"], expected_backoff)
        assert start == max(as_of, task["lastFinishedAt"] + backoff) >= as_of
        assert finish == start + task["duration"] + task["validation"]
        if finish > payload["deadline"]:
            assert result["decision"] == "deadline-infeasible"
        elif start > as_of:
            assert result["decision"] == "wait-backoff"
        else:
            assert result["decision"] == "retry-eligible"


@SETTINGS
@given(fixtures(max_tasks=8), st.randoms(use_true_random=False))
def test_deterministic_and_order_independent(payload: dict[str, Any], random: Any) -> None:
    first = evaluate(copy.deepcopy(payload))
    shuffled = copy.deepcopy(payload)
    random.shuffle(shuffled["tasks"])

    assert evaluate(shuffled) == first
    assert evaluate(payload) == first


@SETTINGS
@given(fixtures(max_tasks=4))
def test_input_is_not_modified(payload: dict[str, Any]) -> None:
    before = copy.deepcopy(payload)

    evaluate(payload)

    assert payload == before


@settings(max_examples=150, deadline=None)
@given(st.one_of(json_values, shaped_junk()))
def test_only_invalid_fixture_escapes_on_any_json(payload: Any) -> None:
    try:
        evaluate(payload)
    except InvalidFixture as error:
        assert str(error) and "\n" not in str(error)


@pytest.mark.parametrize(
    "value",
    [object(), {1, 2}, (1, 2), b"bytes", 10**100_000, {("a",): 1}, float("nan"), type],
    ids=["object", "set", "tuple", "bytes", "huge-int", "tuple-key", "nan", "type"],
)
def test_non_json_values_are_rejected_cleanly(value: Any) -> None:
    with pytest.raises(InvalidFixture):
        evaluate(value)
    with pytest.raises(InvalidFixture):
        evaluate({"asOf": value, "deadline": 1, "maxObservationAge": 1, "policy": {}, "tasks": []})
