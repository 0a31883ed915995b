"""Each stored shape's class in ``records/`` writes back exactly what an earlier release stored.

The writer and the reader of a shape are one class: what it reads from a stored
file of ``tests/records/stored/`` it writes again with the same keys, in the same
order, with the same values. A field added to a shape is added there, once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_retrywindow.records import evidence
from airflow_retrywindow.records.reconciliation import Reconciliation
from airflow_retrywindow.records.schema import VERSION_KEY
from airflow_retrywindow.records.try_start import TRY_START_KEY, TryStart

STORED = Path(__file__).parent / "stored"
#: the stored decision entry's keys -> the writer's argument for it
ARGUMENTS = {
    "tryNumber": "try_number",
    "failure": "failure",
    "action": "action",
    "reason": "reason",
    "origin": "origin",
    "fixture": "fixture",
    "result": "result",
    "taskIds": "task_ids",
    "deadline": "deadline",
    "deadlineAt": "deadline_at",
    "check": "check",
    "clock": "clock",
    "startCheck": "start_check",
    "clockRead": "clock_read",
    "jitter": "jitter",
    "reconciliation": "reconciliation",
    "lostTry": "lost_try",
}


def _stored(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((STORED / name).read_text(encoding="utf-8"))
    return loaded


def _entries() -> list[tuple[str, dict[str, Any]]]:
    """Every versioned decision entry of the stored files, with its file's name."""
    found = []
    for path in sorted(STORED.glob("*.json")):
        stored = _stored(path.name).get("taskStateStore", {}).get(evidence.EVIDENCE_KEY)
        for entry in stored["decisions"] if stored else []:
            if entry.get(VERSION_KEY) is not None:
                found.append((path.name, entry))
    return found


def _rebuilt(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry written again by the evidence's writer from what it holds."""
    if "fixture" not in entry:
        return evidence.gate_error(
            try_number=entry["tryNumber"],
            reason=entry["reason"].removeprefix("gate-error: "),
            action=entry["action"],
            clock_read=entry.get("clockRead"),
        )
    given = {ARGUMENTS[key]: value for key, value in entry.items() if key in ARGUMENTS}
    return evidence.record(**given)


@pytest.mark.parametrize(
    ("name", "entry"),
    [pytest.param(name, entry, id=f"{name}:{entry['tryNumber']}") for name, entry in _entries()],
)
def test_the_evidence_writer_writes_a_stored_entry_again_byte_for_byte(
    name: str, entry: dict[str, Any]
) -> None:
    rebuilt = _rebuilt(entry)
    assert json.dumps(rebuilt) == json.dumps(entry), name


def test_every_evidence_shape_of_the_stored_files_is_rebuilt() -> None:
    names = {name for name, _ in _entries()}
    assert {"policy_decision_retry.json", "policy_gate_error.json"} <= names
    assert "policy_reconciliation.json" in names


@pytest.mark.parametrize("name", ["policy_reconciliation.json", "retry_start_run.json"])
def test_the_try_start_marker_is_written_back_as_stored(name: str) -> None:
    stored = _stored(name)["taskStateStore"][TRY_START_KEY]
    marker = TryStart.of(stored)
    assert marker is not None
    written = marker.as_dict()
    # the earlier release's keys come first, as stored; its markers had no scope yet
    assert json.dumps(dict(list(written.items())[: len(stored)])) == json.dumps(stored)
    assert (written["scope"], written["jobScope"]) == (None, None)
    assert TryStart.of(written) == marker


@pytest.mark.parametrize("name", ["policy_reconciliation.json", "retry_start_run.json"])
def test_a_reconciliation_is_written_back_as_stored(name: str) -> None:
    latest = _stored(name)["taskStateStore"][evidence.EVIDENCE_KEY]["latest"]
    stored = latest["reconciliation"]
    assert json.dumps(Reconciliation.of(stored).as_dict()) == json.dumps(stored)
