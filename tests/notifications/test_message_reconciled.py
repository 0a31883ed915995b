"""The message about a decision taken on a resumable job's status read.

The decisions are those ``RetryWindowPolicy`` and the retry-start check stored for
resumable jobs (``tests/ui/stored_decisions.json``, under ``resumable``): the mail
names the job, its status and when it was read, says whether the request reached
the service, whether the job finished, what still needs validation and what the
next try does. No Airflow run.
"""

from __future__ import annotations

import copy
import json
import secrets
from pathlib import Path
from typing import Any

from airflow_retrywindow.notifications.message import Message, TaskTry, compose
from airflow_retrywindow.notifications.notice import from_evidence

STORED = json.loads(
    (Path(__file__).parents[1] / "ui" / "stored_decisions.json").read_text(encoding="utf-8")
)
RESUMABLE = STORED["resumable"]["evidence"]


def entry(task_id: str, index: int = 0) -> dict[str, Any]:
    return copy.deepcopy(RESUMABLE[task_id]["decisions"][index])


def message(task_id: str, stored: dict[str, Any]) -> Message:
    task = TaskTry("positions_resumable", "manual__2026-12-03", task_id, stored["tryNumber"])
    return compose(task, [from_evidence(stored, task_id)], evidence="the task state store")


def _section(text: str, heading: str) -> list[str]:
    lines = text.splitlines()
    start = next(index for index, line in enumerate(lines) if line.startswith(heading))
    end = next(index for index in range(start + 1, len(lines)) if not lines[index].startswith(" "))
    return lines[start:end]


def test_a_retry_that_reconnects_names_the_job_and_the_three_answers() -> None:
    sent = message("transform", entry("transform"))
    assert sent.subject == (
        "[retry window] observe-running: positions_resumable.transform try 1, retry allowed"
    )
    assert (
        "What happens now: retry allowed: the next try reconnects to job transform_20261203_a1, "
        "submits nothing"
    ) in sent.text.splitlines()
    assert _section(sent.text, "Reconciled before deciding:") == [
        "Reconciled before deciding: job transform_20261203_a1",
        "  Job: bigquery_job_id = transform_20261203_a1",
        "  Status: RUNNING, read at 2026-12-03 09:27:27Z",
        "  Reached the service: yes: the service knows job transform_20261203_a1",
        "  Finished: no: job transform_20261203_a1 is still RUNNING",
        "  Still to validate: the output of job transform_20261203_a1 once it ends",
        "  Next try: reconnects to job transform_20261203_a1, submits nothing",
    ]
    # the gate read the job's status, once: the message does not say it observed nothing
    assert sent.text.splitlines()[-1] == (
        "The gate only decides: it read the status of job transform_20261203_a1 once, through "
        "the operator, and submitted, cancelled and polled no job."
    )


def test_a_succeeded_job_is_only_collected_and_still_needs_validation() -> None:
    sent = message("load", entry("load", 1))
    lines = sent.text.splitlines()
    assert (
        "What happens now: retry allowed: the next try only collects the result of job "
        "load_20261203_a1, submits nothing"
    ) in lines
    section = _section(sent.text, "Reconciled before deciding:")
    assert "  Finished: yes: job load_20261203_a1 is DONE" in section
    assert (
        "  Still to validate: the output of job load_20261203_a1: DONE is not a correct result"
        in section
    )


def test_a_try_start_that_ran_or_was_rescheduled_says_so() -> None:
    ran = from_evidence(entry("load", 0), "load")
    assert ran.outcome == "try runs: it reconnects to job load_20261203_a1, submits nothing"
    assert not ran.refused
    rescheduled = from_evidence(entry("export", 0), "export")
    assert (rescheduled.action, rescheduled.start_at) == ("reschedule", "2026-12-03 09:27:29Z")
    assert rescheduled.outcome == (
        "try rescheduled: the same try starts again at 2026-12-03 09:27:29Z, and is decided "
        "again then"
    )
    assert not rescheduled.refused
    sent = message("export", entry("export", 0))
    assert sent.subject.endswith("export try 2, try rescheduled")
    assert "  This try: rescheduled to 2026-12-03 09:27:29Z, decided again then" in (
        sent.text.splitlines()
    )
    resubmitted = from_evidence(entry("export", 1), "export")
    assert resubmitted.outcome == "try runs: it submits a new job (job export_20261203_a1 failed)"


def test_a_refusal_without_a_stored_id_cannot_tell() -> None:
    sent = message("append", entry("append"))
    assert sent.subject.endswith(
        "reconcile-remote: positions_resumable.append try 2, retry refused"
    )
    section = _section(sent.text, "Reconciled before deciding:")
    assert section[1:] == [
        "  Job: bigquery_job_id: none stored",
        "  Status: not read, at 2026-12-03 09:27:30Z: no job id is stored, so a job may have "
        "been submitted whose id was never kept",
        "  Reached the service: cannot tell",
        "  Finished: cannot tell",
        "  Still to validate: whether any job of the try ran, and what it wrote",
        "  Next try: none: refused, and no further try is scheduled",
    ]
    # nothing was read: the usual line stands
    assert sent.text.splitlines()[-1].endswith("submitted, cancelled and observed no job.")


def test_a_job_the_service_does_not_know_may_not_have_reached_it() -> None:
    section = _section(message("publish", entry("publish")).text, "Reconciled before deciding:")
    assert (
        "  Reached the service: no, as far as the service says: it does not know job "
        "publish_20261203_a1 (the request may have gone to another project or location)"
    ) in section


def test_an_unreadable_reconciliation_is_named_and_nothing_is_said_about_the_job() -> None:
    stored = entry("transform")
    stored["reconciliation"]["allows"] = "collect"
    sent = message("transform", stored)
    assert (
        "Reconciled job: the stored reconciliation could not be read (reconciliation.allows must "
        "be reconnect for the outcome active, got 'collect'); nothing is said here about the job."
    ) in sent.text.splitlines()
    assert "Reconciled before deciding" not in sent.text
    # the decision stands as replayed; only what it means for the job is left out
    assert "What happens now: retry allowed: Airflow starts the next try now" in sent.text


def test_no_secret_leaves_through_a_reconciled_job() -> None:
    from airflow.sdk.log import mask_secret

    secret = "pw-" + secrets.token_hex(12)
    mask_secret(secret)
    stored = entry("append")
    # stored unmasked (by an older version): the message masks it again
    stored["reconciliation"]["error"] = f"the read failed: https://svc:{secret}@jobs.example/x"
    stored["reconciliation"]["externalIdKey"] = f"key_{secret}"
    sent = message("append", stored)
    for part in (sent.subject, sent.text, sent.html):
        assert secret not in part
    assert "https://***@jobs.example/x" in sent.text
