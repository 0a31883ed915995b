"""Decisions taken on a resumable job's status read: the view shows the job and the three answers.

``stored_decisions.json`` holds, under ``resumable``, what ``RetryWindowPolicy`` and the
retry-start check stored for resumable jobs (a ``ResumableJobMixin`` operator over an
in-memory job service): each decision with the ``reconciliation`` of its job. A
reconciliation that cannot be read says which field and which value, and nothing is
said about the job.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from airflow_retrywindow.links.addresses import ViewLinks
from airflow_retrywindow.plugins.decision_rows import formatted, policy_rows
from airflow_retrywindow.plugins.page import run_page, task_page

STORED = json.loads((Path(__file__).with_name("stored_decisions.json")).read_text())

RESUMABLE = STORED["resumable"]
LINKS = ViewLinks("/base/retry-window", "positions_resumable", RESUMABLE["runId"])


def resumable_entry(task_id: str, index: int = 0) -> dict[str, Any]:
    return copy.deepcopy(RESUMABLE["evidence"][task_id]["decisions"][index])


def test_every_reconciled_decision_replays_and_keeps_its_job() -> None:
    for task_id, stored in RESUMABLE["evidence"].items():
        for row in policy_rows(task_id, -1, stored):
            assert row.problem is None, (task_id, row.problem)
            assert row.replay is not None and row.replay.replays, (task_id, row)
            assert row.reconciliation is not None
            assert row.reconciliation.key == "bigquery_job_id"


def test_a_try_that_reconnects_shows_the_job_its_status_and_the_three_answers() -> None:
    (row,) = policy_rows("load", -1, resumable_entry("load", 0))
    assert (row.decision, row.check, row.action) == ("observe-running", "retry-start", "run")
    assert row.told == "ran: reconnects to job load_20261203_a1, submits nothing"
    job = row.reconciliation
    assert job is not None
    assert (job.job_id, job.status, job.outcome, job.allows) == (
        "load_20261203_a1", "RUNNING", "active", "reconnect",
    )  # fmt: skip
    assert job.read_at.isoformat() == "2026-12-03T09:27:27.901778+00:00"
    assert (job.reached_service, job.finished) == (True, False)
    answers = dict(job.answers(formatted, action=row.action))
    assert answers == {
        "Job": "bigquery_job_id = load_20261203_a1",
        "Status": "RUNNING, read at 2026-12-03 09:27:27 UTC",
        "Reached the service": "yes: the service knows job load_20261203_a1",
        "Finished": "no: job load_20261203_a1 is still RUNNING",
        "Still to validate": "the output of job load_20261203_a1 once it ends",
        "This try": "ran: reconnects to job load_20261203_a1, submits nothing",
    }


def test_a_retry_that_only_collects_says_so_for_the_next_try() -> None:
    rows = policy_rows("load", -1, RESUMABLE["evidence"]["load"])
    assert [(row.try_number, row.check, row.told) for row in rows] == [
        (2, "retry-start", "ran: reconnects to job load_20261203_a1, submits nothing"),
        (2, "retry-policy",
         "retry: the next try only collects the result of job load_20261203_a1, submits nothing"),
        (3, "retry-start",
         "ran: only collects the result of job load_20261203_a1, submits nothing"),
    ]  # fmt: skip
    job = rows[1].reconciliation
    assert job is not None
    answers = dict(job.answers(formatted, action=rows[1].action))
    assert answers["Finished"] == "yes: job load_20261203_a1 is DONE"
    assert answers["Still to validate"] == (
        "the output of job load_20261203_a1: DONE is not a correct result"
    )
    assert answers["Next try"] == (
        "only collects the result of job load_20261203_a1, submits nothing"
    )


def test_a_rescheduled_try_says_when_it_starts_and_a_failed_job_is_resubmitted() -> None:
    rescheduled, ran = policy_rows("export", -1, RESUMABLE["evidence"]["export"])
    assert rescheduled.decision == "wait-backoff" and rescheduled.action == "reschedule"
    assert rescheduled.start_at is not None
    assert rescheduled.start_at.isoformat() == "2026-12-03T09:27:29+00:00"
    assert rescheduled.told == "rescheduled to 2026-12-03 09:27:29 UTC"
    job = rescheduled.reconciliation
    assert job is not None
    answers = dict(job.answers(formatted, action="reschedule", start_at="09:27:29Z"))
    assert answers["Finished"] == "yes, without its result: job export_20261203_a1 is FAILED"
    assert answers["This try"] == "rescheduled to 09:27:29Z, decided again then"
    assert ran.told == "ran: submits a new job (job export_20261203_a1 failed)"
    assert ran.reconciliation is not None
    assert ran.reconciliation.failed_since is not None
    assert dict(ran.reconciliation.answers(formatted, action="run"))["Finished"].endswith(
        "first seen failed at 2026-12-03 09:27:27 UTC"
    )


def test_no_stored_id_and_an_unknown_job_cannot_tell() -> None:
    (append,) = policy_rows("append", -1, RESUMABLE["evidence"]["append"])
    assert (append.decision, append.told) == ("reconcile-remote", "fail")
    job = append.reconciliation
    assert job is not None and job.job_id is None and job.outcome == "no-id"
    answers = dict(job.answers(formatted, action=append.action))
    assert answers["Job"] == "bigquery_job_id: none stored"
    assert answers["Status"].startswith("not read, at 2026-12-03 09:27:30 UTC: no job id is stored")
    assert (answers["Reached the service"], answers["Finished"]) == ("cannot tell", "cannot tell")
    assert answers["Next try"] == "none: refused, and no further try is scheduled"
    (publish,) = policy_rows("publish", -1, RESUMABLE["evidence"]["publish"])
    assert publish.reconciliation is not None
    reached = dict(publish.reconciliation.answers(formatted, action="fail"))["Reached the service"]
    assert reached.startswith("no, as far as the service says: it does not know job publish_")


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda job: job.update(outcome="maybe"), "reconciliation.outcome must be one of"),
        (lambda job: job.update(outcome=["active"]), "reconciliation.outcome must be one of"),
        (lambda job: job.update(allows="collect"),
         "reconciliation.allows must be reconnect for the outcome active, got 'collect'"),
        (lambda job: job.update(outcome="failed"),
         "reconciliation.allows must be null for the outcome failed, got 'reconnect'"),
        (lambda job: job.update(reachedService="yes"),
         "reconciliation.reachedService must be true, false or null, got 'yes'"),
        (lambda job: job.update(readAt="2026-12-03T09:27:27"), "reconciliation.readAt must be an"),
        (lambda job: job.update(failedSince=17), "reconciliation.failedSince must be an ISO"),
        (lambda job: job.pop("externalId"),
         "reconciliation.externalId must be a non-empty text, got None"),
        (lambda job: job.update(status=3),
         "reconciliation.status must be a non-empty text or null, got 3"),
    ],
    ids=["outcome", "outcome list", "allows", "allows failed", "reached", "naive readAt",
         "failedSince", "no id", "status"],
)  # fmt: skip
def test_an_unreadable_reconciliation_names_the_field_and_value(change: Any, named: str) -> None:
    entry = resumable_entry("load", 0)
    change(entry["reconciliation"])
    (row,) = policy_rows("load", -1, entry)
    assert row.reconciliation is None  # nothing is said about the job on a guess
    assert row.problem is not None and named in row.problem, row.problem
    # the decision itself still reads and replays
    assert row.decision == "observe-running" and row.replay is not None and row.replay.replays
    assert row.told == "ran"


def test_a_reconciliation_that_is_not_an_object_is_reported() -> None:
    entry = resumable_entry("load", 0)
    entry["reconciliation"] = "RUNNING"
    (row,) = policy_rows("load", -1, entry)
    assert row.problem == "reconciliation must be an object, got 'RUNNING'"


def test_credentials_in_a_reconciled_job_are_not_shown() -> None:
    entry = resumable_entry("append", 0)
    entry["reconciliation"]["error"] = "the read failed: https://svc:hunter2@jobs.example/x"
    entry["reconciliation"]["externalIdKey"] = "https://svc:hunter2@jobs.example/key"
    (row,) = policy_rows("append", -1, entry)
    assert row.reconciliation is not None
    assert "hunter2" not in str(row.reconciliation.answers(formatted, action="fail"))
    assert row.reconciliation.error == "the read failed: https://***@jobs.example/x"
    bad = resumable_entry("load", 0)
    bad["reconciliation"]["reachedService"] = "https://svc:hunter2@jobs.example/y"
    (row,) = policy_rows("load", -1, bad)
    assert row.problem is not None and "hunter2" not in row.problem


# -- the page -------------------------------------------------------------------------------


def _block(page: str, start: str, end: str) -> str:
    at = page.index(start)
    return page[at : page.index(end, at) + len(end)]


def test_the_page_shows_the_reconciled_job_in_the_decisions_details() -> None:
    rows = policy_rows("load", -1, RESUMABLE["evidence"]["load"])
    page = task_page(LINKS, task_id="load", map_index=-1, policy=rows, records=[])
    assert "RetryWindowPolicy · 3 decisions at failure time and at try start" in page
    assert page.count('<div class="reconciliation"') == 3
    block = _block(page, '<div class="reconciliation" data-outcome="active">', "</div>")
    assert "<h4>Reconciled before deciding: job load_20261203_a1</h4>" in block
    for fact in (
        "<dt>Job</dt><dd>bigquery_job_id = load_20261203_a1</dd>",
        "<dt>Status</dt><dd>RUNNING, read at 2026-12-03 09:27:27 UTC</dd>",
        "<dt>Reached the service</dt><dd>yes: the service knows job load_20261203_a1</dd>",
        "<dt>Finished</dt><dd>no: job load_20261203_a1 is still RUNNING</dd>",
        "<dt>Still to validate</dt><dd>the output of job load_20261203_a1 once it ends</dd>",
        "<dt>This try</dt><dd>ran: reconnects to job load_20261203_a1, submits nothing</dd>",
    ):
        assert fact in block
    assert (
        "<dt>Airflow was told</dt><dd>retry: the next try only collects the result of job "
        "load_20261203_a1, submits nothing</dd>"
    ) in page
    assert "reads the status once, before deciding" in page  # the footer says what it did


def test_a_rescheduled_try_shows_when_it_starts_on_the_run_page() -> None:
    policy = [
        (task_id, -1, policy_rows(task_id, -1, stored))
        for task_id, stored in sorted(RESUMABLE["evidence"].items())
    ]
    page = run_page(LINKS, policy=policy, records=[])
    assert "<td>rescheduled to 2026-12-03 09:27:29 UTC</td>" in page
    assert (
        "<dt>This try</dt><dd>rescheduled to 2026-12-03 09:27:29 UTC, decided again then</dd>"
        in (page)
    )
    assert 'data-outcome="no-id"' in page and "<dd>bigquery_job_id: none stored</dd>" in page


def test_reconciled_texts_are_escaped_and_an_unreadable_one_is_a_problem() -> None:
    evil = '"><img src=x onerror=alert(1)>'
    entry = resumable_entry("load", 0)
    entry["reconciliation"]["status"] = evil
    entry["reconciliation"]["externalId"] = f"<b>{evil}</b>"
    bad = resumable_entry("load", 1)
    bad["reconciliation"]["finished"] = "perhaps"
    rows = policy_rows("load", -1, {"latest": bad, "decisions": [entry, bad]})
    page = task_page(LINKS, task_id="load", map_index=-1, policy=rows, records=[])
    assert "<img" not in page and "<b>" not in page
    assert "bigquery_job_id = &lt;b&gt;&#34;&gt;&lt;img" in page
    assert page.count('<div class="reconciliation"') == 1
    assert (
        '<p class="problem">reconciliation.finished must be true, false or null, '
        "got &#39;perhaps&#39;</p>"
    ) in page


@pytest.mark.parametrize(
    ("action", "answer"),
    [
        ("default", "as Airflow's own retry settings say (on_error='default')"),
        ("defer", "as the stored action says: defer"),
        (None, "no action was stored"),
    ],
)
def test_the_next_try_is_never_guessed_from_an_action_it_does_not_know(
    action: str | None, answer: str
) -> None:
    (row,) = policy_rows("transform", -1, resumable_entry("transform"))
    assert row.reconciliation is not None
    assert dict(row.reconciliation.answers(formatted, action=action))["Next try"] == answer
