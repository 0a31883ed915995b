"""``explain`` on a decision as ``RetryWindowPolicy`` stored it, with its reconciled job.

The stored decisions are those of ``tests/ui/stored_decisions.json`` (``resumable``):
``explain`` replays the fixture on the stored origin and prints the job's status read
under the table. It never imports Airflow, so stored text only loses URL credentials.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.cli_runner import ROOT, refusal_lines, run_cli, run_python

STORED = json.loads((ROOT / "tests" / "ui" / "stored_decisions.json").read_text(encoding="utf-8"))
RESUMABLE = STORED["resumable"]["evidence"]


def entry(task_id: str, index: int = 0) -> dict[str, Any]:
    return copy.deepcopy(RESUMABLE[task_id]["decisions"][index])


def explained(stored: object, *args: str) -> str:
    process = run_cli("explain", *args, stdin=json.dumps(stored).encode())
    assert process.returncode == 0, process.stderr.decode()
    assert process.stderr == b""
    return process.stdout.decode()


def test_a_stored_decision_is_explained_on_its_origin_with_its_job_under_the_table() -> None:
    lines = explained(entry("load", 0)).splitlines()
    assert lines[:2] == [
        "Times are UTC, on 2026-12-03 unless dated; model time t=0 is 2026-12-03T09:22:27Z.",
        "Stored decision about try 2 (retry-start); what Airflow was told: ran: reconnects to "
        "job load_20261203_a1, submits nothing.",
    ]
    table = lines.index("task  decision         backoff  earliest start  estimated finish  slack")
    assert lines[table + 1].split() == ["load", "observe-running", "-", "-", "-", "-"]
    assert lines[table + 2 : lines.index("Status updates:")] == [
        "",
        "Reconciled before deciding: job load_20261203_a1",
        "  Job:                  bigquery_job_id = load_20261203_a1",
        "  Status:               RUNNING, read at 09:27:27Z",
        "  Reached the service:  yes: the service knows job load_20261203_a1",
        "  Finished:             no: job load_20261203_a1 is still RUNNING",
        "  Still to validate:    the output of job load_20261203_a1 once it ends",
        "  This try:             ran: reconnects to job load_20261203_a1, submits nothing",
        "",
    ]


def test_a_rescheduled_try_and_a_refusal_without_an_id(tmp_path: Path) -> None:
    path = tmp_path / "export-try-2.json"
    path.write_text(json.dumps(entry("export", 0)), encoding="utf-8")
    process = run_cli("explain", str(path))
    text = process.stdout.decode()
    assert "what Airflow was told: rescheduled to 09:27:29Z." in text
    assert "  Finished:             yes, without its result: job export_20261203_a1 is FAILED" in (
        text
    )
    assert "  This try:             rescheduled to 09:27:29Z, decided again then" in text
    refused = explained(entry("append"))
    assert "what Airflow was told: fail." in refused
    assert "Reconciled before deciding: a job whose id was never stored" in refused
    assert "  Reached the service:  cannot tell" in refused
    assert "  Next try:             none: refused, and no further try is scheduled" in refused


def test_a_stored_decision_without_a_job_has_no_reconciliation_block() -> None:
    stored = entry("transform")
    del stored["reconciliation"]
    text = explained(stored)
    assert "Reconciled" not in text
    assert "what Airflow was told: retry." in text


def test_the_same_origin_may_be_given_another_is_refused() -> None:
    assert "model time t=0 is 2026-12-03T09:22:27Z" in explained(
        entry("load"), "--origin", "2026-12-03T09:22:27+00:00"
    )
    process = run_cli(
        "explain", "--origin", "2026-12-01T00:00:00Z", stdin=json.dumps(entry("load")).encode()
    )
    assert refusal_lines(process)[1] == (
        "--origin 2026-12-01T00:00:00Z is not the stored decision's origin "
        "2026-12-03T09:22:27Z; leave --origin out to use the stored one"
    )


@pytest.mark.parametrize(
    ("stored", "reason"),
    [
        (RESUMABLE["load"],
         "this is a stored decision history (latest, decisions): give one of its decisions, "
         "e.g. its latest"),
        ({"tryNumber": 3, "failure": None, "action": "fail", "check": "retry-policy",
          "reason": "gate-error: DeadlineError: the deadline callable raised"},
         "the stored decision holds no fixture to explain (gate-error: DeadlineError: the "
         "deadline callable raised)"),
        ({**RESUMABLE["load"]["latest"], "origin": "yesterday"},
         "origin of the stored decision must be an ISO 8601 time with an offset, got 'yesterday'"),
    ],
    ids=["history", "gate error", "origin"],
)  # fmt: skip
def test_stored_values_that_cannot_be_explained_are_refused(stored: object, reason: str) -> None:
    assert refusal_lines(run_cli("explain", stdin=json.dumps(stored).encode()))[1] == reason


def test_an_unreadable_reconciliation_is_named_and_the_table_still_shown() -> None:
    stored = entry("load")
    stored["reconciliation"]["readAt"] = "soon"
    text = explained(stored)
    assert (
        "Reconciled before deciding: could not be read (reconciliation.readAt must be an ISO "
        "8601 time with an offset, got 'soon')."
    ) in text.splitlines()
    assert "what Airflow was told: ran." in text
    assert "Status updates:" in text


def test_a_stored_result_the_fixture_no_longer_gives_is_flagged() -> None:
    stored = entry("load")
    stored["result"]["tasks"][0]["decision"] = "retry-eligible"
    assert (
        "The stored result is not what the fixture gives today; the table shows this replay."
        in explained(stored).splitlines()
    )


def test_credentials_in_stored_text_are_not_printed() -> None:
    stored = entry("append")
    stored["reconciliation"]["error"] = "the read failed: https://svc:hunter2@jobs.example/x"
    stored["reconciliation"]["toValidate"] = "see https://svc:hunter2@wiki.example/runbook"
    text = explained(stored)
    assert "hunter2" not in text
    assert "https://***@jobs.example/x" in text and "https://***@wiki.example/runbook" in text


def test_explaining_a_stored_decision_imports_no_airflow(tmp_path: Path) -> None:
    path = tmp_path / "load-try-2.json"
    path.write_text(json.dumps(entry("load", 1)), encoding="utf-8")
    process = run_python("-X", "importtime", "-m", "airflow_retrywindow", "explain", str(path))
    assert process.returncode == 0, process.stderr.decode()[-2000:]
    assert b"Reconciled before deciding: job load_20261203_a1" in process.stdout
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in process.stderr.decode().splitlines()
        if line.startswith("import time:")
    }
    assert "airflow_retrywindow.records.reconciliation" in imported
    assert {name for name in imported if name.split(".")[0] == "airflow"} == set()
