"""The seed's six-task exercise and its boundary cases."""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import pytest

from airflow_retrywindow.model import Fixture, InvalidFixture, decide, evaluate
from tests.model.fixture_strategies import EXAMPLES, seed_case


def decisions(result: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    return {
        task["id"]: (
            task["decision"],
            task["backoff"],
            task["earliestStart"],
            task["estimatedFinish"],
        )
        for task in result["tasks"]
    }


SEED_DECISIONS = {
    "append": ("reconcile-remote", None, None, None),
    "archive": ("attempts-exhausted", None, None, None),
    "load": ("retry-eligible", 4, 100, 140),
    "monitor": ("refresh-observation", None, None, None),
    "report": ("wait-backoff", 8, 103, 128),
    "transform": ("validate-output", None, None, None),
}


def test_seed_exercise_gives_the_narrated_decisions() -> None:
    result = evaluate(seed_case())

    assert decisions(result) == SEED_DECISIONS
    assert [task["id"] for task in result["tasks"]] == sorted(SEED_DECISIONS)
    assert result["deadlinePassed"] is False
    for flag in ("jobsExecuted", "idempotencyProven", "completionGuaranteed", "productionApproval"):
        assert result[flag] is False


def test_seed_exercise_typed_path_agrees() -> None:
    payload = seed_case()

    assert decide(Fixture.from_dict(payload)).to_dict() == evaluate(payload)


def test_all_720_orders_of_the_six_tasks_give_one_result() -> None:
    payload = seed_case()
    expected = json.dumps(evaluate(payload), sort_keys=True)
    orders = list(itertools.permutations(payload["tasks"]))

    assert len(orders) == 720
    for order in orders:
        shuffled = dict(payload, tasks=list(order))
        assert json.dumps(evaluate(shuffled), sort_keys=True) == expected


# file -> the task whose decision moves, and its new (decision, backoff, start, finish)
BOUNDARIES: dict[str, dict[str, tuple[Any, ...]]] = {
    "deadline-139": {"load": ("deadline-infeasible", 4, 100, 140)},
    "as-of-101": {"load": ("deadline-infeasible", 4, 101, 141)},
    "as-of-103": {
        "report": ("retry-eligible", 8, 103, 128),
        "load": ("deadline-infeasible", 4, 103, 143),
    },
    "monitor-observed-at-90": {"monitor": ("observe-running", None, None, None)},
    "monitor-observed-at-89": {"monitor": ("refresh-observation", None, None, None)},
    "report-not-safe-to-repeat": {"report": ("reconcile-effects", None, None, None)},
}


@pytest.mark.parametrize("name", sorted(BOUNDARIES))
def test_boundary_changes_only_the_named_decision(name: str) -> None:
    payload = json.loads((EXAMPLES / "boundaries" / f"{name}.json").read_text())

    assert decisions(evaluate(payload)) == {**SEED_DECISIONS, **BOUNDARIES[name]}


@pytest.mark.parametrize("name", [*sorted(BOUNDARIES), "load-observed-in-future"])
def test_boundary_files_differ_from_the_case_in_one_value(name: str) -> None:
    changed = json.loads((EXAMPLES / "boundaries" / f"{name}.json").read_text())
    case = seed_case()
    differences: list[object] = [
        key for key in case if key != "tasks" and case[key] != changed[key]
    ]
    differences += [
        (task["id"], key)
        for task, other in zip(case["tasks"], changed["tasks"], strict=True)
        for key in task
        if task[key] != other[key]
    ]

    assert len(differences) == 1


def test_future_observation_is_rejected_not_fresher() -> None:
    payload = json.loads((EXAMPLES / "boundaries" / "load-observed-in-future.json").read_text())

    with pytest.raises(InvalidFixture, match=r"tasks\[1\] \(id 'load'\): observedAt .* got 101"):
        evaluate(payload)


def test_validation_time_is_never_dropped() -> None:
    payload = seed_case()
    payload["deadline"] = 139
    without_validation = copy.deepcopy(payload)
    without_validation["tasks"][1]["validation"] = 0

    assert decisions(evaluate(payload))["load"][0] == "deadline-infeasible"
    assert decisions(evaluate(without_validation))["load"] == ("retry-eligible", 4, 100, 135)


def test_unknown_outcome_is_reconciled_even_when_claimed_safe() -> None:
    payload = seed_case()
    append = payload["tasks"][2]

    assert append["state"] == "unknown" and append["safeRepeat"] is True
    assert decisions(evaluate(payload))["append"][0] == "reconcile-remote"


def test_deadline_passed_flag() -> None:
    payload = seed_case()
    payload["deadline"] = 99

    result = evaluate(payload)

    assert result["deadlinePassed"] is True
    assert decisions(result)["report"][0] == "deadline-infeasible"
