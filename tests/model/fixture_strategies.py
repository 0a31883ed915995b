"""Hypothesis strategies for fixtures: valid ones, near-valid ones, and junk."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from airflow_retrywindow.model.bounds import DURATION_LIMIT, TIME_LIMIT
from airflow_retrywindow.model.validation import FIXTURE_FIELDS, POLICY_FIELDS, TASK_FIELDS

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
STATES = ("running", "unknown", "succeeded", "retryable", "terminal")
ID_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"


def seed_case() -> dict[str, Any]:
    """The seed's six-task exercise, freshly loaded."""
    loaded: dict[str, Any] = json.loads((EXAMPLES / "case.json").read_text())
    return loaded


def _edgy(low: int, high: int, near: int = 60) -> st.SearchStrategy[int]:
    """Integers in [low, high], favouring both ends."""
    top = min(high, low + near)
    return st.one_of(st.integers(low, top), st.sampled_from(sorted({low, high, top})))


@st.composite
def tasks(draw: st.DrawFn, identifier: str, as_of: int) -> dict[str, Any]:
    """One valid task observed no later than ``as_of``."""
    state = draw(st.sampled_from(STATES))
    observed = draw(st.one_of(st.integers(max(0, as_of - 40), as_of), st.sampled_from([0, as_of])))
    finished = None
    if state not in ("running", "unknown"):
        finished = draw(st.one_of(st.integers(max(0, observed - 30), observed), st.just(0)))
    return {
        "id": identifier,
        "state": state,
        "safeRepeat": draw(st.booleans()),
        "attempts": draw(st.integers(1, 10)),
        "observedAt": observed,
        "lastFinishedAt": finished,
        "duration": draw(_edgy(1, DURATION_LIMIT, near=50)),
        "validation": draw(_edgy(0, DURATION_LIMIT, near=20)),
    }


@st.composite
def fixtures(draw: st.DrawFn, max_tasks: int = 20) -> dict[str, Any]:
    """A valid fixture, with values often at the edges of their ranges."""
    as_of = draw(st.one_of(st.integers(0, 300), st.sampled_from([0, TIME_LIMIT])))
    initial = draw(_edgy(1, DURATION_LIMIT, near=20))
    ids = draw(
        st.lists(
            st.text(ID_ALPHABET, min_size=1, max_size=48),
            min_size=1,
            max_size=max_tasks,
            unique=True,
        )
    )
    return {
        "asOf": as_of,
        "deadline": draw(
            st.one_of(st.integers(max(0, as_of - 20), min(as_of + 150, TIME_LIMIT)), st.just(0))
        ),
        "maxObservationAge": draw(_edgy(0, TIME_LIMIT, near=40)),
        "policy": {
            "maxAttempts": draw(st.integers(1, 10)),
            "initialDelay": initial,
            "maxDelay": draw(_edgy(initial, DURATION_LIMIT, near=60)),
            "multiplier": draw(st.integers(1, 5)),
        },
        "tasks": [draw(tasks(identifier, as_of)) for identifier in ids],
    }


_NUMBERS = (0, -1, 1, 10, 11, 21, 48, 49, 10**30, -(10**30), 0.5, 4.0, float("nan"), float("inf"))
_LIMITS = (TIME_LIMIT, TIME_LIMIT + 1, DURATION_LIMIT, DURATION_LIMIT + 1)
_TEXTS = ("", "4", "running", "RUNNING", "abc\n", "a b", "a" * 49, "\u00e9")
JUNK: tuple[Any, ...] = (None, True, False, *_NUMBERS, *_LIMITS, *_TEXTS, [], [1], {}, {"id": "x"})


def _replacements(value: Any) -> st.SearchStrategy[Any]:
    """Values a field might wrongly hold instead of ``value``."""
    options = [st.sampled_from(JUNK), st.text(max_size=5)]
    if type(value) is int:
        options.append(st.sampled_from([value - 1, value + 1, float(value), str(value)]))
    if type(value) is str:
        options.append(st.sampled_from([value + "\n", value.upper(), " " + value, [value]]))
    return st.one_of(options)


@st.composite
def near_valid(draw: st.DrawFn) -> dict[str, Any]:
    """A valid fixture with one to three things broken, or occasionally none."""
    payload = draw(fixtures(max_tasks=6))
    for _ in range(draw(st.integers(0, 3))):
        _break(draw, payload)
    return payload


def _break(draw: st.DrawFn, payload: Any) -> None:
    containers: list[tuple[Any, tuple[str, ...]]] = [(payload, FIXTURE_FIELDS)]
    if type(payload) is dict and type(payload.get("policy")) is dict:
        containers.append((payload["policy"], POLICY_FIELDS))
    task_list = payload.get("tasks") if type(payload) is dict else None
    if type(task_list) is list:
        containers += [(task, TASK_FIELDS) for task in task_list if type(task) is dict]
    target, names = draw(st.sampled_from(containers))
    action = draw(st.sampled_from(["replace", "replace", "replace", "delete", "add", "tasks"]))
    if action == "tasks" and type(task_list) is list:
        _break_tasks(draw, task_list)
    elif action == "delete" and target:
        del target[draw(st.sampled_from(sorted(target)))]
    elif action == "add":
        target[draw(st.sampled_from(["extra", "ID", *names]))] = draw(_replacements(0))
    else:
        name = draw(st.sampled_from(names))
        target[name] = draw(_replacements(target.get(name)))


def _break_tasks(draw: st.DrawFn, task_list: list[Any]) -> None:
    change = draw(st.sampled_from(["duplicate", "overflow", "empty", "junk", "time"]))
    if change == "duplicate" and task_list:
        task_list.append(copy.deepcopy(draw(st.sampled_from(task_list))))
    elif change == "overflow" and task_list:
        while len(task_list) < 21:
            task_list.append(copy.deepcopy(task_list[-1]))
            if type(task_list[-1]) is dict:
                task_list[-1]["id"] = f"extra{len(task_list)}"
    elif change == "empty":
        task_list.clear()
    elif change == "junk":
        task_list.insert(draw(st.integers(0, len(task_list))), draw(_replacements(None)))
    elif task_list and type(task_list[0]) is dict:
        # times near the cross-field bounds: observedAt vs asOf, lastFinishedAt vs observedAt
        task = task_list[0]
        field = draw(st.sampled_from(["observedAt", "lastFinishedAt"]))
        observed = task.get("observedAt")
        base = observed if type(observed) is int else 0
        task[field] = draw(st.sampled_from([base - 1, base, base + 1, None]))


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=10),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def shaped_junk(draw: st.DrawFn) -> dict[str, Any]:
    """Objects with the right field names and arbitrary JSON values, to reach deep checks."""
    task = {name: draw(json_values) for name in TASK_FIELDS}
    policy = {name: draw(json_values) for name in POLICY_FIELDS}
    payload = {name: draw(json_values) for name in FIXTURE_FIELDS}
    if draw(st.booleans()):
        payload["policy"] = policy
    if draw(st.booleans()):
        payload["tasks"] = [task]
    return payload
