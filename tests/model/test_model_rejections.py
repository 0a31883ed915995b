"""Every way a fixture is rejected: the error names the field, the value and the rule."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from typing import Any

import pytest

from airflow_retrywindow.model import Fixture, InvalidFixture, evaluate
from tests.model.fixture_strategies import seed_case
from tests.model.oracle import reference_outcome

Edit = Callable[[dict[str, Any]], Any]


def top(name: str, value: Any) -> Edit:
    def edit(payload: dict[str, Any]) -> Any:
        payload[name] = value
        return payload

    return edit


def policy(name: str, value: Any) -> Edit:
    def edit(payload: dict[str, Any]) -> Any:
        payload["policy"][name] = value
        return payload

    return edit


def task(index: int, name: str, value: Any) -> Edit:
    def edit(payload: dict[str, Any]) -> Any:
        payload["tasks"][index][name] = value
        return payload

    return edit


def without(name: str, index: int | None = None) -> Edit:
    def edit(payload: dict[str, Any]) -> Any:
        target = payload if index is None else payload["tasks"][index]
        del target[name]
        return payload

    return edit


# (edit, fragments the message must contain)
CASES: dict[str, tuple[Edit, list[str]]] = {
    "payload not an object": (lambda p: [p], ["fixture", "a list of 1 item"]),
    "payload null": (lambda p: None, ["fixture", "got None"]),
    "payload extra field": (top("extra", 1), ["fixture", "unexpected 'extra'"]),
    "payload missing field": (without("tasks"), ["fixture", "missing 'tasks'"]),
    "asOf negative": (top("asOf", -1), ["asOf", "0 to 1000000000", "got -1"]),
    "asOf above limit": (top("asOf", 1_000_000_001), ["asOf", "got 1000000001"]),
    "asOf bool": (top("asOf", True), ["asOf", "got True"]),
    "asOf float": (top("asOf", 100.0), ["asOf", "got 100.0"]),
    "asOf huge": (top("asOf", 10**5000), ["asOf", "an integer of about"]),
    "deadline string": (top("deadline", "140"), ["deadline", "got '140'"]),
    "deadline null": (top("deadline", None), ["deadline", "got None"]),
    "maxObservationAge list": (top("maxObservationAge", [10]), ["maxObservationAge", "list"]),
    "policy not an object": (top("policy", [4, 4, 12, 2]), ["policy", "a list of 4 items"]),
    "policy extra field": (policy("jitter", 1), ["policy", "unexpected 'jitter'"]),
    "policy missing field": (
        lambda p: p["policy"].pop("multiplier") and p,
        ["policy", "missing 'multiplier'"],
    ),
    "maxAttempts zero": (policy("maxAttempts", 0), ["policy: maxAttempts", "1 to 10", "got 0"]),
    "maxAttempts eleven": (policy("maxAttempts", 11), ["maxAttempts", "got 11"]),
    "maxAttempts bool": (policy("maxAttempts", True), ["maxAttempts", "got True"]),
    "initialDelay zero": (policy("initialDelay", 0), ["initialDelay", "1 to 1000000", "got 0"]),
    "initialDelay above limit": (policy("initialDelay", 1_000_001), ["initialDelay", "1000001"]),
    "maxDelay below initialDelay": (
        policy("maxDelay", 3),
        ["maxDelay", "4 (initialDelay) to 1000000", "got 3"],
    ),
    "maxDelay above limit": (policy("maxDelay", 1_000_001), ["maxDelay", "got 1000001"]),
    "multiplier zero": (policy("multiplier", 0), ["multiplier", "1 to 5", "got 0"]),
    "multiplier six": (policy("multiplier", 6), ["multiplier", "got 6"]),
    "multiplier float": (policy("multiplier", 2.0), ["multiplier", "got 2.0"]),
    "tasks not a list": (top("tasks", {"id": "x"}), ["tasks", "1 to 20", "an object with 1 field"]),
    "tasks empty": (top("tasks", []), ["tasks", "a list of 0 items"]),
    "tasks over twenty": (
        lambda p: dict(p, tasks=[dict(p["tasks"][0], id=f"t{i}") for i in range(21)]),
        ["tasks", "a list of 21 items"],
    ),
    "task not an object": (
        lambda p: dict(p, tasks=[*p["tasks"], "load"]),
        ["tasks[6]", "must be an object", "got 'load'"],
    ),
    "task missing field": (without("validation", 1), ["tasks[1] (id 'load')", "'validation'"]),
    "task extra field": (task(1, "owner", "x"), ["tasks[1] (id 'load')", "unexpected 'owner'"]),
    "id empty": (task(0, "id", ""), ["tasks[0]", "id", "got ''"]),
    "id too long": (task(0, "id", "a" * 49), ["tasks[0]", "id", "1 to 48", "aaaa"]),
    "id trailing newline": (task(0, "id", "report\n"), ["tasks[0]", "id", r"'report\n'"]),
    "id with space": (task(0, "id", "re port"), ["tasks[0]", "id", "'re port'"]),
    "id not ascii": (task(0, "id", "r\u00e9port"), ["tasks[0]", "id", "'r\u00e9port'"]),
    "id number": (task(0, "id", 7), ["tasks[0]", "id", "got 7"]),
    "id null": (task(0, "id", None), ["tasks[0]", "id", "got None"]),
    "id duplicate": (task(3, "id", "report"), ["tasks[3] (id 'report')", "id", "tasks[0]"]),
    "state unknown name": (task(0, "state", "done"), ["tasks[0] (id 'report')", "state", "'done'"]),
    "state wrong case": (task(0, "state", "RUNNING"), ["state", "got 'RUNNING'"]),
    "state list": (task(0, "state", ["running"]), ["state", "a list of 1 item"]),
    "safeRepeat number": (task(0, "safeRepeat", 1), ["safeRepeat", "true or false", "got 1"]),
    "safeRepeat string": (task(0, "safeRepeat", "true"), ["safeRepeat", "got 'true'"]),
    "attempts zero": (task(0, "attempts", 0), ["tasks[0] (id 'report'): attempts", "got 0"]),
    "attempts eleven": (task(0, "attempts", 11), ["attempts", "1 to 10", "got 11"]),
    "attempts float": (task(0, "attempts", 2.0), ["attempts", "got 2.0"]),
    "attempts bool": (task(0, "attempts", True), ["attempts", "got True"]),
    "observedAt negative": (task(0, "observedAt", -1), ["observedAt", "got -1"]),
    "observedAt future": (task(0, "observedAt", 101), ["observedAt", "100 (asOf)", "got 101"]),
    "observedAt null": (task(0, "observedAt", None), ["observedAt", "got None"]),
    "duration zero": (task(0, "duration", 0), ["duration", "1 to 1000000", "got 0"]),
    "duration above limit": (task(0, "duration", 1_000_001), ["duration", "got 1000001"]),
    "validation negative": (task(0, "validation", -1), ["validation", "0 to 1000000", "got -1"]),
    "validation above limit": (task(0, "validation", 1_000_001), ["validation", "1000001"]),
    "lastFinishedAt set while running": (
        task(4, "lastFinishedAt", 80),
        ["tasks[4] (id 'monitor'): lastFinishedAt", "null", "running", "got 80"],
    ),
    "lastFinishedAt set while unknown": (
        task(2, "lastFinishedAt", 80),
        ["lastFinishedAt", "unknown", "got 80"],
    ),
    "lastFinishedAt missing after failure": (
        task(0, "lastFinishedAt", None),
        ["lastFinishedAt", "99 (observedAt)", "got None"],
    ),
    "lastFinishedAt missing after success": (task(5, "lastFinishedAt", None), ["lastFinishedAt"]),
    "lastFinishedAt after observation": (
        task(0, "lastFinishedAt", 100),
        ["lastFinishedAt", "0 to 99 (observedAt)", "got 100"],
    ),
    "lastFinishedAt negative": (task(0, "lastFinishedAt", -1), ["lastFinishedAt", "got -1"]),
    "lastFinishedAt float": (task(0, "lastFinishedAt", 95.0), ["lastFinishedAt", "got 95.0"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_rejection_names_field_and_value(name: str) -> None:
    edit, fragments = CASES[name]
    payload = edit(seed_case())

    assert reference_outcome(copy.deepcopy(payload))[0] == "rejected"
    with pytest.raises(InvalidFixture) as raised:
        evaluate(payload)
    message = str(raised.value)
    for fragment in fragments:
        assert fragment in message
    assert "\n" not in message and len(message) < 300


@pytest.mark.parametrize("name", sorted(CASES))
def test_typed_reading_rejects_the_same(name: str) -> None:
    edit, _ = CASES[name]

    with pytest.raises(InvalidFixture):
        Fixture.from_dict(edit(seed_case()))


def test_long_string_values_are_shortened() -> None:
    payload = task(0, "state", "x" * 10_000)(seed_case())

    with pytest.raises(InvalidFixture) as raised:
        evaluate(payload)

    assert "..." in str(raised.value) and len(str(raised.value)) < 300


def test_error_carries_field_and_location_and_survives_pickling() -> None:
    with pytest.raises(InvalidFixture) as raised:
        evaluate(task(2, "attempts", 0)(seed_case()))
    error = raised.value

    assert error.field == "attempts"
    assert error.location == "tasks[2] (id 'append')"
    assert str(error) == "tasks[2] (id 'append'): attempts must be an integer from 1 to 10, got 0"
    copied = pickle.loads(pickle.dumps(error))
    assert isinstance(copied, InvalidFixture) and str(copied) == str(error)
    assert isinstance(error, ValueError)


def test_first_invalid_task_in_order_is_reported() -> None:
    payload = task(4, "attempts", 0)(task(1, "duration", 0)(seed_case()))

    with pytest.raises(InvalidFixture, match=r"^tasks\[1\]"):
        evaluate(payload)
