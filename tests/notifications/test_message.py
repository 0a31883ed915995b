"""Composing the message from stored decisions: every decision, the gate's record, no decision.

No Airflow run: the decisions are stored the way the policy and the gate store them
(``tests/notifications/stored.py``).
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

import pytest

from airflow_retrywindow.exceptions import RecordError
from airflow_retrywindow.gate.approve import unasked
from airflow_retrywindow.notifications.message import (
    NO_DECISION,
    Impact,
    Message,
    TaskTry,
    compose,
    compose_missing,
)
from airflow_retrywindow.notifications.notice import from_evidence, from_gate_record, override_of
from airflow_retrywindow.records import evidence
from tests.notifications.stored import (
    ALLOWING,
    CASES,
    TASK_ID,
    approval,
    gate_record,
    overridden_record,
    policy_entry,
)

TRY = TaskTry("positions_delivery", "manual__2026-12-01", TASK_ID, try_number=1)
UNIT = {"business_date": "2026-12-01", "remote_job_id": "positions_20261201_v3_a1"}


def _policy_message(entry: dict[str, Any], impact: Impact | None = None) -> Message:
    notice = from_evidence(entry, TASK_ID)
    return compose(TRY, [notice], work_unit=UNIT, impact=impact, evidence="the task state store")


@pytest.mark.parametrize("decision", sorted(CASES))
def test_every_decision_names_itself_its_reason_status_and_unit_of_work(decision: str) -> None:
    entry = policy_entry(decision)
    message = _policy_message(entry)
    label = "retry allowed" if decision in ALLOWING else "retry refused"
    assert message.subject == (
        f"[retry window] {decision}: positions_delivery.load_positions try 1, {label}"
    )
    assert (message.decision, message.reason) == (decision, entry["reason"])
    lines = message.text.splitlines()
    assert f"Decision: {decision}" in lines
    assert f"Reason: {entry['reason']}" in lines
    # the runbook's status update, under the Airflow task id rather than the model's
    status = next(line for line in lines if line.startswith("Status update: "))
    assert status.startswith("Status update: load_positions: confirmed ")
    for part in ("; unknown: ", "; next: ", "; next evidence: "):
        assert part in status
    assert (
        "Unit of work: business_date=2026-12-01, remote_job_id=positions_20261201_v3_a1." in lines
    )
    assert ("Impact to report instead of retrying:" in lines) == (decision == "deadline-infeasible")


def test_the_status_update_is_the_replayed_decisions_in_real_time() -> None:
    message = _policy_message(policy_entry("wait-backoff"))
    # asOf 100 on a clock starting 05:00:00Z; backoff 8 s after the end at 95
    assert (
        "next: wait out the 8 s backoff, then start attempt 3 at 05:01:43Z; estimated finish "
        "05:02:08Z with validation, 12 s before the deadline 05:02:20Z; next evidence: the "
        "start of attempt 3, at 05:01:43Z." in message.text
    )
    assert "What happens now: retry allowed: Airflow starts the next try once the backoff" in (
        message.text
    )


def test_deadline_infeasible_carries_the_impact_the_runbook_asks_for() -> None:
    impact = Impact(affected="the 40 funds of the positions file", alternative=None)
    lines = _policy_message(policy_entry("deadline-infeasible"), impact=impact).text.splitlines()
    start = lines.index("Impact to report instead of retrying:")
    assert lines[start + 1 : start + 4] == [
        "  Delivery at risk (load_positions): the next attempt would end, validation included, "
        "at 2026-12-01 05:02:25Z, 5 s after the 2026-12-01 05:02:20Z deadline.",
        "  Affected population: the 40 funds of the positions file",
        "  Operational alternative: not given to the notifier (alternative=...); agree one with "
        "the business consumer before the deadline",
    ]
    assert any("next: report the delivery at risk" in line for line in lines)


def test_a_fixture_that_replays_to_another_decision_is_not_trusted() -> None:
    entry = policy_entry("deadline-infeasible")
    entry["result"]["tasks"][0]["decision"] = "retry-eligible"
    with pytest.raises(ValueError, match="replays to deadline-infeasible, not to the recorded"):
        from_evidence(entry, TASK_ID)


@pytest.mark.parametrize(
    ("action", "label"),
    [("fail", "retry refused"), ("default", "not decided")],
)
def test_a_gate_error_says_nothing_was_decided(action: str, label: str) -> None:
    entry = evidence.gate_error(try_number=1, reason="KeyError: 'deadline_table'", action=action)
    message = _policy_message(entry)
    assert message.subject.endswith(f"gate-error: positions_delivery.load_positions try 1, {label}")
    assert "Reason: gate-error: KeyError: 'deadline_table'" in message.text
    assert "Status update: nothing was decided" in message.text


def test_a_gates_record_gives_one_section_per_target() -> None:
    record = gate_record(deadline_in=timedelta(minutes=4))
    notices = from_gate_record(record)
    assert [(n.task_id, n.decision, n.refused) for n in notices] == [
        ("load", "deadline-infeasible", True),
        ("report", "retry-eligible", False),
    ]
    gate = TaskTry("positions", "manual__2026-12-01", "retry_gate", try_number=1)
    message = compose(gate, notices, work_unit=record["workUnit"])
    assert message.subject == (
        "[retry window] positions.retry_gate: load deadline-infeasible (held back by the gate); "
        "report retry-eligible (may run)"
    )
    assert message.decision == "deadline-infeasible"
    text = message.text
    assert "What happens now: held back by the gate: rerun_load" in text
    assert "What happens now: may run: rerun_report" in text
    assert "Delivery at risk (load): the next attempt would end, validation included, at " in text
    assert "2026-12-01 05:45:00Z, 60 s after the 2026-12-01 05:44:00Z deadline." in text
    assert "Unit of work: business_date=2026-12-01." in text
    for row in record["decisions"]:
        assert f"Reason: {row['reason']}" in text
        assert f"Status update: {row['status']}" in text


def test_no_decision_still_says_what_it_means() -> None:
    message = compose_missing(
        TRY,
        why="no retry window decision is stored for try 1",
        consequence="the task has failed and no further try is scheduled",
        failure="ValueError: bad input",
    )
    assert message.subject == (
        "[retry window] no-decision: positions_delivery.load_positions try 1, "
        "treat the retry as refused"
    )
    assert message.decision == NO_DECISION
    assert message.text.splitlines()[3:6] == [
        "Why: no retry window decision is stored for try 1.",
        "What happens now: the task has failed and no further try is scheduled.",
        "Failure: ValueError: bad input.",
    ]
    assert "Unit of work: not given." in message.text


def test_no_secret_leaves_in_any_part() -> None:
    from airflow.sdk.log import mask_secret

    secret = "pw-" + secrets.token_hex(12)
    mask_secret(secret)
    subject = f"ConnectionError: login to https://loader:{secret}@db.example.test refused"
    entry = policy_entry("reconcile-remote", subject=subject)
    # the reason as stored by an older version, before masking: the message masks it again
    entry["reason"] = f"{entry['reason']} token={secret}"
    message = compose(
        TRY,
        [from_evidence(entry, TASK_ID)],
        work_unit={"business_date": "2026-12-01", "api_key": secret},
        impact=Impact(affected=secret),
    )
    missing = compose_missing(TRY, why=f"why {secret}", consequence="c", failure=secret)
    for sent in (message, missing):
        for part in (sent.subject, sent.text, sent.html, sent.reason, sent.decision):
            assert secret not in part
    assert "https://***@db.example.test" in message.text
    assert "token=***" in message.text


def test_the_subject_is_one_line_and_the_html_is_escaped() -> None:
    entry = policy_entry("repair-cause", subject="SchemaMismatch: <b>x</b>\nsecond line")
    message = _policy_message(entry)
    assert "\n" not in message.subject
    assert "&lt;b&gt;x&lt;/b&gt;" in message.html
    assert "<b>x</b>" not in message.html
    assert message.html.startswith("<pre") and message.html.endswith("</pre>")


def test_a_mapped_target_is_named_with_its_map_index() -> None:
    record = gate_record(deadline_in=timedelta(minutes=4))
    record["decisions"][0]["mapIndex"] = 3
    record["decisions"][1]["mapIndex"] = -1
    load, report = from_gate_record(record)
    assert (load.task_id, load.outcome) == ("load[3]", "held back by the gate: rerun_load")
    assert report.task_id == "report"


# -- an approved override and the estimate's sources -----------------------------------

GATE = TaskTry("positions", "manual__2026-12-01", "retry_gate", try_number=1)


def _gate_message(record: dict[str, Any]) -> Message:
    return compose(
        GATE, from_gate_record(record), work_unit=record["workUnit"], override=override_of(record)
    )


def _section(text: str, task_id: str) -> list[str]:
    """The lines of one target's section, up to the blank line after it."""
    lines = text.splitlines()
    start = lines.index(f"Task {task_id}:")
    return lines[start : lines.index("", start)]


def test_an_approved_override_is_stated_with_who_when_why_and_which_targets() -> None:
    message = _gate_message(overridden_record())
    assert message.subject == (
        "[retry window] positions.retry_gate: load attempts-exhausted (may run on an approved "
        "override); report retry-eligible (may run)"
    )
    lines = message.text.splitlines()
    start = lines.index(
        "Approved override: refused by the model, overridden by ops_lead at 2026-12-01 05:39:00Z "
        "through approve_repeat."
    )
    assert lines[start + 1 : start + 4] == [
        "  Reason: vendor re-sent the feed (OPS-4411)",
        "  Targets: load; the model's decisions stand in the record: load attempts-exhausted",
        "",
    ]
    load = _section(message.text, "load")
    # the model's decision as taken; the run is the approver's, and never called eligible
    assert "Decision: attempts-exhausted" in load
    assert (
        "What happens now: may run on an approved override: rerun_load (refused by the model, "
        "overridden by ops_lead)"
    ) in load
    assert not any("eligible" in line for line in load)


def test_a_late_repeat_released_by_an_override_is_not_called_refused() -> None:
    record = overridden_record(late=True)
    assert record["decisions"][0]["decision"] == "deadline-infeasible"
    lines = _gate_message(record).text.splitlines()
    # the repeat runs on the approver's word: the impact stands, but nothing was refused
    assert "Impact to report instead of retrying:" not in lines
    start = lines.index(
        "Impact to report: the approved override released the repeat, which is still "
        "estimated to end after the deadline:"
    )
    assert lines[start + 1].startswith("  Delivery at risk (load): the next attempt would end")


def test_a_late_repeat_held_back_still_reports_the_impact_instead() -> None:
    lines = _gate_message(overridden_record(approval(("Reject",)), late=True)).text.splitlines()
    assert "Impact to report instead of retrying:" in lines


def test_the_estimate_sources_are_named_only_when_one_is_an_override() -> None:
    message = _gate_message(overridden_record())
    assert (
        "Estimate: duration, validation, deadline from load's policy; safe repeat: gate override "
        "— INC-4211: the vendor confirmed the load replaces, not appends"
    ) in _section(message.text, "load")
    # report's values all came from its policy and the gate alike: nothing to say
    assert not any(line.startswith("Estimate:") for line in _section(message.text, "report"))
    assert message.text.count("Estimate:") == 1


def test_work_held_back_without_an_override_says_why() -> None:
    message = _gate_message(overridden_record(approval(("Reject",))))
    assert "No override through approve_repeat: ops_lead rejected at 2026-12-01 05:39:00Z." in (
        message.text.splitlines()
    )
    assert "Approved override" not in message.text and "overridden by" not in message.text
    assert "What happens now: held back by the gate: rerun_load" in message.text


def test_nothing_held_back_and_no_override_adds_no_line() -> None:
    record = gate_record(deadline_in=timedelta(hours=1))
    record["override"] = unasked(
        "approve_repeat", "nothing is held back, so it does not ask"
    ).as_dict()
    message = _gate_message(record)
    assert [n.refused for n in from_gate_record(record)] == [False, False]
    assert "override" not in message.text.lower()


def test_an_unreadable_override_is_not_told() -> None:
    record = overridden_record()
    record["override"]["approvedAt"] = "just now"
    with pytest.raises(
        RecordError,
        match=r"override\.approvedAt must be an ISO 8601 time with an offset, got .just now.",
    ):
        override_of(record)
    assert override_of(gate_record(deadline_in=timedelta(hours=1))) is None  # no approval task


def test_no_secret_leaves_through_the_override_or_the_estimate() -> None:
    from airflow.sdk.log import mask_secret

    secret = "pw-" + secrets.token_hex(12)
    mask_secret(secret)
    record = overridden_record()
    # stored unmasked (by an older version): the message masks it again
    record["override"]["reason"] = f"token={secret} and https://ops:{secret}@wiki.example/x"
    record["decisions"][0]["estimateSource"]["safeRepeat"] = f"gate override: {secret}"
    message = _gate_message(record)
    for part in (message.subject, message.text, message.html):
        assert secret not in part
    assert "  Reason: token=*** and https://***@wiki.example/x" in message.text
