"""The notifier reads stored values through ``records/``: what is not a record is said so.

A callback may find anything under the keys the provider writes (a user's task
returns anything as ``return_value``). Reading it never crashes with an error
that names no record: it says the value is not a retry window record, and a
record of a newer shape is reported as such.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_retrywindow.notifications.notice import from_evidence, from_gate_record
from airflow_retrywindow.records.decision_record import record_problem
from airflow_retrywindow.records.evidence_entry import entry_problem
from airflow_retrywindow.records.schema import NOT_A_RECORD

STORED = json.loads((Path(__file__).parents[1] / "ui" / "stored_decisions.json").read_text())
RECORD = STORED["late"]["records"]["retry_gate"]
ENTRY = STORED["late"]["evidence"]["report"]["latest"]


@pytest.mark.parametrize("value", [None, "garbage", 7, ["decisions"], True])
def test_a_value_that_is_not_a_record_is_said_to_be_none(value: Any) -> None:
    with pytest.raises(ValueError, match=NOT_A_RECORD):
        from_gate_record(value)
    with pytest.raises(ValueError, match=NOT_A_RECORD):
        from_evidence(value, "report")


def test_the_readers_tell_a_record_from_any_other_value() -> None:
    assert record_problem(RECORD) is None
    assert record_problem({"gate": "retry_gate", "decisions": []}) == NOT_A_RECORD
    assert "newer than this release reads" in str(record_problem({**RECORD, "schemaVersion": 9}))
    assert entry_problem(ENTRY) is None
    assert entry_problem(["tryNumber"]) == NOT_A_RECORD


def test_a_record_still_reads_to_the_same_notices() -> None:
    notices = from_gate_record(RECORD)
    assert [notice.task_id for notice in notices] == [row["taskId"] for row in RECORD["decisions"]]
    assert from_evidence(ENTRY, "report").decision == "deadline-infeasible"
