"""The typed core: enums, frozen values, their constructors, and decide()."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given, settings

from airflow_retrywindow.model import (
    Decision,
    Fixture,
    InvalidFixture,
    Observation,
    Policy,
    TaskDecision,
    TaskState,
    Verdict,
    backoff,
    decide,
    evaluate,
)
from tests.model.fixture_strategies import fixtures, seed_case


def test_decision_and_state_values() -> None:
    assert [decision.value for decision in Decision] == [
        "refresh-observation",
        "observe-running",
        "reconcile-remote",
        "validate-output",
        "repair-cause",
        "attempts-exhausted",
        "reconcile-effects",
        "deadline-infeasible",
        "wait-backoff",
        "retry-eligible",
    ]
    assert [state.value for state in TaskState] == [
        "running",
        "unknown",
        "succeeded",
        "retryable",
        "terminal",
    ]
    assert str(Decision.WAIT_BACKOFF) == "wait-backoff" and Decision("retry-eligible").allows_retry
    assert {d for d in Decision if d.scheduled} == {
        Decision.DEADLINE_INFEASIBLE,
        Decision.WAIT_BACKOFF,
        Decision.RETRY_ELIGIBLE,
    }
    assert {d for d in Decision if d.allows_retry} == {
        Decision.WAIT_BACKOFF,
        Decision.RETRY_ELIGIBLE,
    }


def test_backoff_is_capped_exponential() -> None:
    policy = Policy(max_attempts=4, initial_delay=4, max_delay=12, multiplier=2)

    assert [backoff(policy, attempts) for attempts in range(1, 6)] == [4, 8, 12, 12, 12]
    assert backoff(Policy(10, 1, 1_000_000, 5), 9) == 5**8
    assert backoff(Policy(10, 1, 1_000_000, 5), 10) == 1_000_000


@settings(max_examples=100, deadline=None)
@given(fixtures())
def test_typed_round_trip_and_decide_agree_with_evaluate(payload: dict[str, Any]) -> None:
    fixture = Fixture.from_dict(payload)

    assert fixture.to_dict() == payload
    assert Fixture.from_dict(json.loads(json.dumps(fixture.to_dict()))) == fixture
    verdict = decide(fixture)
    assert verdict.to_dict() == evaluate(payload)
    assert Verdict.of(fixture) == verdict


def test_values_are_frozen_and_hashable() -> None:
    fixture = Fixture.from_dict(seed_case())

    with pytest.raises(dataclasses.FrozenInstanceError):
        fixture.as_of = 1  # type: ignore[misc]
    assert hash(fixture) == hash(Fixture.from_dict(seed_case()))
    assert fixture.task("load").state is TaskState.RETRYABLE
    with pytest.raises(KeyError):
        fixture.task("nope")


def test_verdict_accessors() -> None:
    verdict = decide(Fixture.from_dict(seed_case()))
    report = verdict.task("report")

    assert report == TaskDecision("report", Decision.WAIT_BACKOFF, 8, 103, 128)
    assert report.slack(140) == 12
    assert verdict.task("append").slack(140) is None
    assert not (verdict.jobs_executed or verdict.idempotency_proven)
    assert not (verdict.completion_guaranteed or verdict.production_approval)
    assert verdict.deadline_passed is False


def test_observation_accepts_a_plain_state_name() -> None:
    task = Observation("load", "retryable", True, 1, 99, 90, 35, 5)  # type: ignore[arg-type]

    assert task.state is TaskState.RETRYABLE
    assert task.age(100) == 1


@pytest.mark.parametrize(
    ("build", "fragment"),
    [
        (lambda: Policy(0, 4, 12, 2), "policy: maxAttempts"),
        (lambda: Policy(4, 4, 3, 2), "maxDelay must be an integer from 4 (initialDelay)"),
        (lambda: Observation("a b", TaskState.RUNNING, True, 1, 1, None, 1, 0), "task: id"),
        (
            lambda: Observation("x", TaskState.RUNNING, True, 1, 1, 0, 1, 0),
            "task 'x': lastFinished",
        ),
        (lambda: Observation("x", "done", True, 1, 1, None, 1, 0), "state"),  # type: ignore[arg-type]
        (lambda: Observation.from_dict([]), "task must be an object"),
    ],
)
def test_direct_construction_is_validated(build: Any, fragment: str) -> None:
    with pytest.raises(InvalidFixture) as raised:
        build()

    assert fragment in str(raised.value)


def test_fixture_checks_across_tasks() -> None:
    policy = Policy(4, 4, 12, 2)
    task = Observation("load", TaskState.RETRYABLE, True, 1, 99, 90, 35, 5)

    with pytest.raises(InvalidFixture, match=r"tasks\[1\] \(id 'load'\): id is already used"):
        Fixture(100, 140, 10, policy, (task, task))
    with pytest.raises(
        InvalidFixture, match=r"observedAt must be an integer from 0 to 98 \(asOf\)"
    ):
        Fixture(98, 140, 10, policy, (task,))
    with pytest.raises(InvalidFixture, match="tasks must be a tuple of 1 to 20"):
        Fixture(100, 140, 10, policy, ())
    with pytest.raises(InvalidFixture, match="tasks must be a tuple"):
        Fixture(100, 140, 10, policy, [task])  # type: ignore[arg-type]
    with pytest.raises(InvalidFixture, match="policy must be a Policy"):
        Fixture(100, 140, 10, policy.to_dict(), (task,))  # type: ignore[arg-type]
    with pytest.raises(InvalidFixture, match=r"tasks\[0\] must be an Observation"):
        Fixture(100, 140, 10, policy, (task.to_dict(),))  # type: ignore[arg-type]


def test_unknown_names_are_not_exported() -> None:
    from airflow_retrywindow import model

    with pytest.raises(AttributeError):
        model.Nothing  # noqa: B018
    assert "Fixture" in dir(model)
