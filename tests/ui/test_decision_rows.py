"""Stored evidence and decision records become the view's rows; bad values say what is wrong.

``stored_decisions.json`` holds what a real run of the example DAG stored: the
policy's task state store values and the gate's and sensor's records. Records with
estimate sources and an approved override are built by the gate's own stages
(``tests/notifications/stored.py``).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from airflow_retrywindow.exceptions import RecordError
from airflow_retrywindow.plugins.decision_rows import (
    gate_record,
    is_decision_record,
    override_sentence,
    policy_rows,
    stored_fixture,
)
from tests.notifications.stored import approval, overridden_record

STORED = json.loads((Path(__file__).with_name("stored_decisions.json")).read_text())
LATE, ON_TIME = STORED["late"], STORED["on-time"]


def evidence(day: dict[str, Any], task_id: str) -> dict[str, Any]:
    return copy.deepcopy(day["evidence"][task_id])


def test_a_refusal_by_the_policy_reads_with_its_numbers_and_replay() -> None:
    (row,) = policy_rows("report", -1, evidence(LATE, "report"))
    assert row.decision == "deadline-infeasible"
    assert row.reason.startswith("deadline-infeasible: next attempt would start 17:35:09Z")
    assert (row.try_number, row.attempts, row.max_attempts) == (1, 1, 4)
    assert (row.failure, row.told, row.check) == ("retryable", "fail", "retry-policy")
    assert row.deadline_rule == "computed by delivery_deadline"
    assert row.deadline is not None and row.deadline.isoformat() == "2026-12-02T17:35:05+00:00"
    assert row.decided_at == row.deadline  # decided at the deadline: one more try cannot fit
    assert row.status is not None and row.status.startswith("report: confirmed attempt 1 failed")
    assert row.timeline is not None and row.timeline.slack == -29
    assert row.problem is None
    replay = row.replay
    assert replay is not None and replay.replays
    assert (replay.owner, replay.name, replay.filename) == (
        "report",
        "policy-0",
        "report-try-1.json",
    )
    assert replay.commands() == (
        "airflow-retrywindow explain --origin 2026-12-02T17:34:55Z report-try-1.json",
        "airflow-retrywindow evaluate report-try-1.json",
    )
    assert replay.fixture == evidence(LATE, "report")["decisions"][0]["fixture"]


def test_every_stored_policy_decision_replays() -> None:
    for day in (LATE, ON_TIME):
        for task_id, stored in day["evidence"].items():
            for row in policy_rows(task_id, -1, stored):
                assert row.replay is not None and row.replay.replays, (task_id, row)
                assert row.timeline is not None and row.timeline.decision == row.decision


def test_a_retry_then_a_refusal_keep_their_order() -> None:
    rows = policy_rows("archive", -1, evidence(ON_TIME, "archive"))
    assert [(row.try_number, row.decision, row.told) for row in rows] == [
        (1, "wait-backoff", "retry"),
        (2, "attempts-exhausted", "fail"),
    ]
    assert [row.replay.filename for row in rows if row.replay] == [
        "archive-try-1.json",
        "archive-try-2.json",
    ]


def test_a_result_the_fixture_does_not_give_is_flagged() -> None:
    stored = evidence(LATE, "report")
    stored["decisions"][0]["result"]["tasks"][0]["decision"] = "retry-eligible"
    (row,) = policy_rows("report", -1, stored)
    assert row.decision == "retry-eligible"  # what was stored, shown as stored
    assert row.problem is not None and "replayed: deadline-infeasible" in row.problem
    assert row.replay is not None and not row.replay.replays
    assert row.timeline is not None and row.timeline.decision == "deadline-infeasible"


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda entry: entry.update(origin=42), ["origin", "42"]),
        (lambda entry: entry.update(origin="yesterday"), ["origin", "'yesterday'"]),
        (lambda entry: entry.update(origin="2026-12-02T17:34:55"), ["origin", "offset"]),
        (lambda entry: entry["fixture"]["policy"].update(maxAttempts=0), ["maxAttempts", "0"]),
        (lambda entry: entry.update(result="none"), ["result", "'none'"]),
        (lambda entry: entry["result"].update(tasks=[]), ["result.tasks", "report"]),
    ],
    ids=["origin", "origin text", "naive origin", "fixture", "result", "missing decision"],
)
def test_an_unreadable_decision_names_the_field_and_value(change: Any, named: list[str]) -> None:
    stored = evidence(LATE, "report")
    change(stored["decisions"][0])
    (row,) = policy_rows("report", -1, stored)
    assert row.decision == "unreadable"
    assert row.problem is not None
    assert all(text in row.problem for text in named), row.problem
    assert row.replay is None and row.timeline is None
    assert row.reason.startswith("deadline-infeasible")  # the stored reason is still shown


def test_stored_values_that_are_not_evidence_are_reported() -> None:
    (row,) = policy_rows("report", 2, "garbage")
    assert row.problem == "the stored evidence holds no decisions list, got 'garbage'"
    assert row.map_index == 2


def test_a_decision_taken_without_the_model_has_no_replay() -> None:
    entry = {
        "tryNumber": 3, "failure": None, "action": "fail", "check": "retry-policy",
        "reason": "gate-error: DeadlineError: the deadline callable raised",
    }  # fmt: skip
    (row,) = policy_rows("report", -1, entry)  # as kept in XCom: one decision
    assert (row.decision, row.try_number, row.told) == ("gate-error", 3, "fail")
    assert row.replay is None and row.timeline is None and row.problem is None


def test_credentials_in_stored_text_are_not_shown() -> None:
    stored = evidence(LATE, "report")
    stored["decisions"][0]["reason"] = "ConnectionError: https://loader:s3cret@db.example/x"
    (row,) = policy_rows("report", -1, stored)
    assert "s3cret" not in row.reason and "https://***@db.example/x" in row.reason


def test_the_gate_record_reads_with_a_row_per_target() -> None:
    record = LATE["records"]["retry_gate"]
    assert is_decision_record("retry_gate", record)
    read = gate_record("retry_gate", -1, record)
    assert read.kind == "gate" and read.try_number == 1 and read.problem is None
    assert read.work_unit is not None and "business_date=2026-12-02" in read.work_unit
    assert read.status_update is not None and read.status_update.startswith("Retry window gate")
    assert read.guard and read.guard[0].startswith(
        "rerun_everything held back: deadline-infeasible"
    )
    rows = {row.task_id: row for row in read.rows}
    assert {name: row.decision for name, row in rows.items()} == {
        "report": "deadline-infeasible",
        "load": "deadline-infeasible",
        "append": "reconcile-remote",
        "archive": "deadline-infeasible",
        "monitor": "refresh-observation",
        "transform": "validate-output",
    }
    report = rows["report"]
    assert report.capacity is not None and report.capacity.startswith("fits-now")
    assert report.told == "rerun_everything held back"
    assert report.failure is not None and report.failure.startswith(
        "retryable: Airflow state failed"
    )
    assert report.replay is not None and report.replay.replays
    assert (report.replay.owner, report.replay.filename) == (
        "retry_gate",
        "retry_gate-fixture-0.json",
    )
    for row in read.rows:
        assert row.timeline is not None and row.timeline.decision == row.decision
        assert row.problem is None


def test_the_sensor_record_is_a_sensor_and_a_budget_verdict_is_kept() -> None:
    record = copy.deepcopy(LATE["records"]["load_retry_window"])
    record["budget"] = {
        "verdict": "budget-exceeded",
        "reason": "budget-exceeded: 250 GB over 200 GB",
    }
    read = gate_record("load_retry_window", -1, record)
    assert read.kind == "sensor"
    assert read.budget == "budget-exceeded: 250 GB over 200 GB"
    assert [row.decision for row in read.rows] == ["deadline-infeasible"]


def test_a_record_whose_decision_contradicts_its_fixture_is_flagged() -> None:
    record = copy.deepcopy(LATE["records"]["load_retry_window"])
    record["decisions"][0]["decision"] = "retry-eligible"
    (row,) = gate_record("load_retry_window", -1, record).rows
    assert (
        row.problem == "the record says retry-eligible but its fixture decides deadline-infeasible"
    )


def test_a_record_with_broken_parts_still_shows_what_it_can() -> None:
    record = copy.deepcopy(LATE["records"]["load_retry_window"])
    record["asOf"] = "yesterday"
    record["decisions"][0]["fixture"] = 7
    read = gate_record("load_retry_window", -1, record)
    assert read.problem is not None and "asOf" in read.problem and "'yesterday'" in read.problem
    (row,) = read.rows
    assert row.problem is not None and "fixture" in row.problem and "7" in row.problem
    assert row.reason.startswith("deadline-infeasible")


def test_only_a_record_published_by_that_task_is_a_record() -> None:
    record = LATE["records"]["retry_gate"]
    assert not is_decision_record("load_retry_window", record)
    assert not is_decision_record("retry_gate", {"gate": "retry_gate"})
    assert not is_decision_record("retry_gate", "text")


def test_stored_fixtures_are_found_by_their_view_name() -> None:
    report = evidence(LATE, "report")
    record = LATE["records"]["retry_gate"]
    found = stored_fixture("policy-0", task_id="report", map_index=-1, evidence=report, record=None)
    assert found == ("report-try-1.json", report["decisions"][0]["fixture"])
    found = stored_fixture(
        "record-0", task_id="retry_gate", map_index=3, evidence=None, record=record
    )
    assert found == ("retry_gate-map-3-fixture-0.json", record["fixtures"][0]["fixture"])
    assert (
        stored_fixture("policy-5", task_id="report", map_index=-1, evidence=report, record=None)
        is None
    )
    with pytest.raises(
        RecordError, match=r"fixture name must be policy-<n> or record-<n>, got '\.\./x'"
    ):
        stored_fixture("../x", task_id="report", map_index=-1, evidence=report, record=None)


def test_a_mapped_target_keeps_its_map_index() -> None:
    record = copy.deepcopy(LATE["records"]["load_retry_window"])
    record["decisions"][0]["mapIndex"] = 2
    (row,) = gate_record("load_retry_window", -1, record).rows
    assert (row.task_id, row.map_index) == ("load", 2)


# -- estimate sources and an approved override -----------------------------------------

LOAD_ESTIMATE = (
    "duration, validation, deadline from load's policy; safe repeat: gate override — "
    "INC-4211: the vendor confirmed the load replaces, not appends"
)


def test_each_decision_says_where_its_estimate_came_from() -> None:
    rows = {row.task_id: row for row in gate_record("retry_gate", -1, overridden_record()).rows}
    assert rows["load"].estimate == LOAD_ESTIMATE
    assert rows["report"].estimate == (
        "duration, validation, safe repeat, deadline from retry_gate and report's policy (the same)"
    )
    assert all(row.problem is None for row in rows.values())


@pytest.mark.parametrize(
    ("stored", "line"),
    [
        ({"duration": "gate", "validation": "gate", "safeRepeat": "gate",
          "deadline": "other targets' policies"},
         "duration, validation, safe repeat from retry_gate's own arguments; deadline from the "
         "other targets' policies"),
        # a source this version does not know is shown as stored, never guessed at
        ({"deadline": "policy", "duration": "a later source"},
         "duration: a later source; deadline from load's policy"),
    ],
)  # fmt: skip
def test_every_source_is_named_in_words(stored: dict[str, str], line: str) -> None:
    record = overridden_record()
    record["decisions"][0]["estimateSource"] = stored
    assert gate_record("retry_gate", -1, record).rows[0].estimate == line


def test_a_record_without_estimate_sources_shows_none() -> None:
    (row,) = gate_record("load_retry_window", -1, LATE["records"]["load_retry_window"]).rows
    assert row.estimate is None and row.problem is None


@pytest.mark.parametrize(
    ("stored", "named"),
    [
        ("policy", ["estimateSource must be an object of field -> source", "'policy'"]),
        ({}, ["estimateSource must be an object", "{}"]),
        ({"duration": 7}, ["estimateSource.duration must be the source of the value", "7"]),
    ],
)
def test_unreadable_estimate_sources_name_the_field_and_value(
    stored: object, named: list[str]
) -> None:
    record = overridden_record()
    record["decisions"][0]["estimateSource"] = stored
    row = gate_record("retry_gate", -1, record).rows[0]
    assert row.estimate is None
    assert row.problem is not None and all(text in row.problem for text in named), row.problem
    assert row.replay is not None and row.decision == "attempts-exhausted"  # the rest still shows


def test_an_approved_override_stands_beside_the_models_unchanged_decision() -> None:
    read = gate_record("retry_gate", -1, overridden_record())
    assert read.problem is None
    entry = read.override
    assert entry is not None and entry.applied
    assert (entry.approval, entry.approver, entry.reason, entry.targets) == (
        "approve_repeat", "ops_lead", "vendor re-sent the feed (OPS-4411)", ("load",),
    )  # fmt: skip
    assert entry.overridden == (("load", "attempts-exhausted"),)
    sentence = (
        "Refused by the model, overridden by ops_lead at 2026-12-01 05:39:00 UTC: vendor re-sent "
        "the feed (OPS-4411) (targets load)"
    )
    assert override_sentence(entry) == sentence
    load, report = read.rows
    # the model's decision, replayed from its fixture, is what the row shows
    assert load.decision == "attempts-exhausted" and load.replay is not None
    assert load.replay.replays and load.override == sentence
    assert report.override is None
    # the guard says the task runs because of the override, never that it is eligible
    assert read.guard[0] == (
        "rerun_load may run only because of the approved override (refused by the model, "
        "overridden by ops_lead); the model refused: attempts-exhausted: attempt 1 of 1 failed "
        "and no attempt is left in this window"
    )
    assert load.told == (
        "rerun_load may run only because of the approved override (refused by the model, "
        "overridden by ops_lead)"
    )
    assert "eligible" not in read.guard[0] + str(load.told) + sentence


def test_no_override_says_why() -> None:
    read = gate_record("retry_gate", -1, overridden_record(approval(("Reject",))))
    assert read.override is not None and not read.override.applied
    assert override_sentence(read.override) == (
        "No override through approve_repeat: ops_lead rejected at 2026-12-01 05:39:00Z."
    )
    assert read.guard[0].startswith("rerun_load held back: attempts-exhausted")
    assert all(row.override is None for row in read.rows)


def test_the_approver_is_named_with_the_id_when_it_differs() -> None:
    record = overridden_record(approval(user="u-17", name="Ana Ops"))
    read = gate_record("retry_gate", -1, record)
    assert read.override is not None and read.override.approver == "Ana Ops (id u-17)"


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda entry: entry.update(applied="yes"), "override.applied must be true or false"),
        (lambda entry: entry.update(approvedBy=None), "override.approvedBy must be an object"),
        (lambda entry: entry.update(approvedAt="2026-12-01T05:39:00"), "override.approvedAt"),
        (lambda entry: entry.update(reason=" "), "override.reason must be a non-empty text"),
        (lambda entry: entry.update(targets=[]), "override.targets must list the targets"),
        (lambda entry: entry.update(overridden=[{"task": "load"}]), "override.overridden"),
        (lambda entry: entry.update(approval=None), "override.approval"),
    ],
    ids=["applied", "approver", "naive time", "reason", "targets", "overridden", "approval"],
)
def test_an_unreadable_override_is_a_problem_never_an_override(change: Any, named: str) -> None:
    record = overridden_record()
    change(record["override"])
    read = gate_record("retry_gate", -1, record)
    assert read.override is None
    assert read.problem is not None and named in read.problem, read.problem
    assert all(row.override is None for row in read.rows)


def test_an_override_that_is_not_an_object_is_reported() -> None:
    record = overridden_record()
    record["override"] = "approved"
    read = gate_record("retry_gate", -1, record)
    assert read.override is None and read.problem == "override must be an object, got 'approved'"


def test_credentials_in_override_and_estimate_texts_are_not_shown() -> None:
    record = overridden_record()
    record["override"]["reason"] = "see https://ops:hunter2@wiki.example/x"
    record["decisions"][0]["estimateSource"]["safeRepeat"] = (
        "gate override: replaces, see https://ops:hunter2@wiki.example/y"
    )
    read = gate_record("retry_gate", -1, record)
    assert read.override is not None and read.override.reason == "see https://***@wiki.example/x"
    load = read.rows[0]
    assert load.estimate is not None and "https://***@wiki.example/y" in load.estimate
    assert "hunter2" not in f"{read} {load}"
