"""Every stored record says its shape; readers take every shape earlier releases wrote.

``tests/ui/stored_decisions.json`` holds records a real run wrote before records
carried a version (``on-time``, ``late``) and after the reconciliation was added
(``resumable``): all of them must keep reading. A record of a newer shape is
reported as such, never guessed at and never a crash.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from airflow_retrywindow.notifications.notice import from_evidence, from_gate_record
from airflow_retrywindow.plugins.decision_rows import gate_record, policy_rows
from airflow_retrywindow.records import evidence
from airflow_retrywindow.records.schema import SCHEMA_VERSION, VERSION_KEY, version_problem
from tests.notifications.stored import overridden_record
from tests.policy.resumable_jobs import Jobs, Store, context, job_operator, policy

STORED = json.loads((Path(__file__).parents[1] / "ui" / "stored_decisions.json").read_text())
DAYS = ("on-time", "late")


def earlier_records() -> list[tuple[str, str, Any]]:
    """(day, task, value) for every evidence value and decision record a run stored."""
    found = []
    for day in DAYS:
        found += [(day, task, value) for task, value in STORED[day]["evidence"].items()]
        found += [(day, task, value) for task, value in STORED[day]["records"].items()]
    return found


def test_earlier_releases_wrote_no_version_and_still_read_without_a_problem() -> None:
    for day, task, value in earlier_records():
        if "latest" in value:  # the policy's evidence: its decisions history
            for entry in value["decisions"]:
                assert VERSION_KEY not in entry, (day, task)
                assert version_problem(entry) is None
            rows = policy_rows(task, -1, value)
            assert rows and all(row.problem is None for row in rows), (day, task)
            from_evidence(value["latest"], task)  # reads
        else:
            assert VERSION_KEY not in value
            assert gate_record(task, -1, value).problem is None, (day, task)
            assert from_gate_record(value)


def test_the_policy_writes_this_releases_version() -> None:
    store = Store()
    task = job_operator(Jobs(), policy())
    task.retry_policy.evaluate(
        ConnectionError("reset"), 1, 3, context(task, try_number=1, store=store)
    )
    latest = store.values[evidence.EVIDENCE_KEY]["latest"]
    assert latest[VERSION_KEY] == SCHEMA_VERSION
    assert next(iter(latest)) == VERSION_KEY
    gate_error = evidence.gate_error(try_number=1, reason="x", action="fail")
    assert gate_error[VERSION_KEY] == SCHEMA_VERSION


def test_a_gate_writes_this_releases_version() -> None:
    record = overridden_record()
    assert record[VERSION_KEY] == SCHEMA_VERSION
    assert gate_record(record["gate"], -1, record).problem is None


def _newer(value: dict[str, Any]) -> dict[str, Any]:
    return {**copy.deepcopy(value), VERSION_KEY: SCHEMA_VERSION + 1}


def test_a_newer_shape_is_reported_by_the_view_not_guessed_at() -> None:
    stored = copy.deepcopy(STORED["late"]["evidence"]["report"])
    stored["decisions"][0] = _newer(stored["decisions"][0])
    (row,) = policy_rows("report", -1, stored)
    assert row.problem is not None and "newer than this release reads" in row.problem
    assert row.decision == "unreadable"
    record = _newer(STORED["late"]["records"]["retry_gate"])
    shown = gate_record("retry_gate", -1, record)
    assert shown.problem is not None and f"{VERSION_KEY} {SCHEMA_VERSION + 1}" in shown.problem
    assert shown.rows == ()


def test_a_newer_shape_is_refused_by_the_notifier_with_a_reason() -> None:
    latest = _newer(STORED["late"]["evidence"]["report"]["latest"])
    with pytest.raises(ValueError, match="not a shape this release reads"):
        from_evidence(latest, "report")
    with pytest.raises(ValueError, match="not a shape this release reads"):
        from_gate_record(_newer(STORED["late"]["records"]["retry_gate"]))


@pytest.mark.parametrize("version", ["1", -1, True, 1.5, None])
def test_a_version_that_is_not_a_number_is_reported(version: object) -> None:
    assert version_problem({VERSION_KEY: version}) is not None


def test_a_decision_of_a_shape_it_cannot_read_lets_no_retry_start() -> None:
    latest = {VERSION_KEY: SCHEMA_VERSION + 1, "tryNumber": 1, "action": "retry"}
    history = {"latest": latest, "decisions": [latest]}
    assert not evidence.allows_next_try(history, 2)
    assert evidence.start_permission(history, 2) == evidence.UNDECIDED
    assert evidence.allows_next_try({"latest": {**latest, VERSION_KEY: SCHEMA_VERSION}}, 2)
