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

from airflow_retrywindow.records import decision_record, evidence
from airflow_retrywindow.records.override import OverrideEntry
from airflow_retrywindow.records.reconciliation import Reconciliation
from airflow_retrywindow.records.schema import VERSION_KEY
from airflow_retrywindow.records.stored_fixture import StoredFixture, record_item
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


@pytest.mark.parametrize("name", ["gate_record_guard.json", "sensor_record_run.json"])
def test_a_records_fixture_item_is_written_back_as_stored(name: str) -> None:
    for stored in _stored(name)["xcom"]["return_value"]["fixtures"]:
        written = record_item(
            origin=stored["origin"],
            fixture=stored["fixture"],
            result=stored["result"],
            task_ids=stored["taskIds"],
            map_indexes=stored["mapIndexes"],
        )
        assert json.dumps(written) == json.dumps(stored)
        assert StoredFixture.of(written).replays


def test_an_override_entry_is_written_back_as_stored() -> None:
    stored = _stored("gate_record_override.json")["xcom"]["return_value"]["override"]
    entry = OverrideEntry.of(stored)
    assert entry.applied
    assert json.dumps(entry.as_dict()) == json.dumps(stored)
    assert OverrideEntry.of(entry.as_dict()) == entry


def test_an_override_that_released_nothing_is_written_back_as_read() -> None:
    stored = {
        **_stored("gate_record_override.json")["xcom"]["return_value"]["override"],
        "applied": False,
        "approvedBy": None,
        "approvedAt": None,
        "reason": None,
        "targets": [],
        "overridden": [],
        "note": "the answer was Reject",
        "status": "no override: the answer was Reject",
    }
    entry = OverrideEntry.of(stored)
    assert (entry.approver, entry.wording) == (None, "")
    assert json.dumps(entry.as_dict()) == json.dumps(stored)


#: the keys the decision table writes into a gate's record, in order
TABLE_KEYS = (
    "asOf",
    "deadline",
    "deadlinePassed",
    "decisions",
    "budget",
    "fixtures",
    "jobsExecuted",
    "idempotencyProven",
    "completionGuaranteed",
    "productionApproval",
)
#: the keys the writer itself writes, around the table's and the extra ones
OWN_KEYS = frozenset(
    {"schemaVersion", "gate", "dagId", "runId", "tryNumber", "deadlineRule", "guard", "skipped"}
    | {"workUnit", "api", "requests", "claims", "capacityNote", "override", "statusUpdate"}
)


def _arguments(stored: dict[str, Any]) -> dict[str, Any]:
    """What the gate hands the writer, taken back out of a stored record."""
    return {
        "gate": stored["gate"],
        "dag_id": stored["dagId"],
        "run_id": stored["runId"],
        "try_number": stored["tryNumber"],
        "deadline_rule": stored["deadlineRule"],
        "table": {key: stored[key] for key in TABLE_KEYS},
        "guard": stored["guard"],
        "skipped": stored["skipped"],
        "work_unit": stored["workUnit"],
        "api": stored["api"],
        "requests": stored["requests"],
        "status_update": stored["statusUpdate"],
        "extra": {
            key: value
            for key, value in stored.items()
            if key not in OWN_KEYS and key not in TABLE_KEYS
        },
        "override": stored.get("override"),
    }


@pytest.mark.parametrize(
    "name",
    [
        "gate_record_guard.json",
        "gate_record_override.json",
        "sensor_record_run.json",
        "sensor_record_timeout.json",
    ],
)
def test_the_decision_record_writer_writes_a_stored_record_again_byte_for_byte(name: str) -> None:
    stored = _stored(name)["xcom"]["return_value"]
    assert json.dumps(decision_record.written(**_arguments(stored))) == json.dumps(stored)


def test_a_timed_out_sensor_record_is_its_record_with_the_timeout_as_its_action() -> None:
    stored = _stored("sensor_record_timeout.json")["xcom"]["return_value"]
    arguments = _arguments(stored)
    ran = decision_record.written(**{**arguments, "extra": {**arguments["extra"], "action": "run"}})
    assert ran["action"] == "run"
    assert json.dumps(decision_record.timed_out(ran)) == json.dumps(stored)
