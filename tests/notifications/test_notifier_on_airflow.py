"""RetryWindowNotifier on a real scheduler, mailing a real SMTP server.

One SQLite stack (API server, scheduler, DAG processor, LocalExecutor) runs the
``rw_notify`` DAG once. Its task callbacks run where Airflow 3 runs them, in the
task's own process after the try, and send through the SMTP provider's
``SmtpNotifier`` to an SMTP server this test runs on 127.0.0.1 (aiosmtpd), or
through a plain callable that writes a file.
"""

from __future__ import annotations

import email
import email.policy
import json
import secrets
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller

from devstack.stack import AirflowStack, free_port, sqlite_stack

pytestmark = [pytest.mark.airflow, pytest.mark.slow(minutes=1.2), pytest.mark.requires_airflow_3_3]

DAGS = Path(__file__).with_name("dags")
DAG_ID = "rw_notify"
SERVICES = ("api-server", "scheduler", "dag-processor")
#: the password of the connection the failing task logs in with; Airflow masks it
PASSWORD = "pw-" + secrets.token_hex(16)
#: the secret the task without a policy registers with ``mask_secret``
SECRET = "tok-" + secrets.token_hex(16)
RUN_TIMEOUT = 180


@dataclass(frozen=True)
class Mail:
    """One message the SMTP server received, decoded."""

    recipients: tuple[str, ...]
    subject: str
    body: str
    raw: bytes


class Mailbox:
    """An aiosmtpd handler that keeps every message it accepts."""

    def __init__(self) -> None:
        self.mails: list[Mail] = []
        self.port = 0
        self._lock = threading.Lock()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        raw = bytes(envelope.original_content or envelope.content)
        parsed = email.message_from_bytes(raw, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        html = parsed.get_body(preferencelist=("html", "plain"))
        body = html.get_content() if html is not None else ""
        with self._lock:
            self.mails.append(Mail(tuple(envelope.rcpt_tos), str(parsed["Subject"]), body, raw))
        return "250 Message accepted for delivery"

    def about(self, task_id: str) -> list[Mail]:
        """The mails whose subject names ``rw_notify.<task_id>``."""
        with self._lock:
            return [mail for mail in self.mails if f" {DAG_ID}.{task_id} " in mail.subject]


@pytest.fixture(scope="module")
def mailbox() -> Iterator[Mailbox]:
    """An SMTP server on 127.0.0.1 and a free port, stopped after the module."""
    box = Mailbox()
    server = Controller(box, hostname="127.0.0.1", port=free_port())
    server.start()
    try:
        box.port = int(server.port)
        yield box
    finally:
        server.stop()


@pytest.fixture(scope="module")
def run(
    mailbox: Mailbox, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[AirflowStack, str, Path]]:
    """The stack, the id of one finished run of ``rw_notify`` and its callable's outbox."""
    home = tmp_path_factory.mktemp("notify")
    dags = home / "dags"
    shutil.copytree(DAGS, dags, ignore=shutil.ignore_patterns("__pycache__"))
    smtp = {
        "conn_type": "smtp",
        "host": "127.0.0.1",
        "port": mailbox.port,
        "extra": {"disable_tls": True, "disable_ssl": True, "timeout": 10, "retry_limit": 0},
    }
    api = {"conn_type": "http", "host": "api.example.test", "login": "loader", "password": PASSWORD}
    env = {
        "AIRFLOW_CONN_RW_NOTIFY_SMTP": json.dumps(smtp),
        "AIRFLOW_CONN_RW_NOTIFY_API": json.dumps(api),
        "RW_NOTIFY_SECRET": SECRET,
    }
    outbox = home / "outbox.jsonl"
    with sqlite_stack(home, SERVICES, [DAG_ID], dags_folder=dags, extra_env=env) as stack:
        conf = {"deadline_in": 120, "business_date": "2026-12-01", "outbox": str(outbox)}
        run_id = stack.trigger(DAG_ID, conf=conf, logical_date="2026-12-01")
        state = stack.wait_for_run(DAG_ID, run_id, timeout=RUN_TIMEOUT)
        assert state == "failed", stack.log_tails()
        yield stack, run_id, outbox


def _latest_reason(stack: AirflowStack, run_id: str, task_id: str) -> str:
    rows = stack.rows(
        "select value from task_state_store"
        " where dag_id=:d and run_id=:r and task_id=:t and key='retry_window.evidence'",
        d=DAG_ID,
        r=run_id,
        t=task_id,
    )
    assert rows, f"no evidence for {task_id}\n{stack.log_tails()}"
    return str(json.loads(rows[0][0])["latest"]["reason"])


def _the_mail(mailbox: Mailbox, task_id: str, stack: AirflowStack) -> Mail:
    mails = mailbox.about(task_id)
    assert len(mails) == 1, f"{len(mails)} mails about {task_id}\n{stack.log_tails()}"
    return mails[0]


def test_a_refusal_arrives_by_mail_with_its_reason(
    run: tuple[AirflowStack, str, Path], mailbox: Mailbox
) -> None:
    stack, run_id, _ = run
    assert stack.task_states(DAG_ID, run_id)["long_load"] == ("failed", 1)
    mail = _the_mail(mailbox, "long_load", stack)
    assert mail.recipients == ("oncall@example.test",)
    assert mail.subject == (
        "[retry window] deadline-infeasible: rw_notify.long_load try 1, retry refused"
    )
    reason = _latest_reason(stack, run_id, "long_load")
    assert reason.startswith("deadline-infeasible: next attempt would start ")
    # the HTML body escapes the text; the reason is the one the policy stored
    body = mail.body
    assert "Reason: " + reason.replace("'", "&#x27;") in body
    assert "Status update: long_load: confirmed attempt 1 failed with a retryable error" in body
    assert "; next: report the delivery at risk" in body
    assert "Unit of work: business_date=2026-12-01, remote_job_id=positions-2026-12-01-v1." in body
    assert "Affected population: the 40 funds of the positions file" in body
    assert "Operational alternative: deliver the validated funds now, the rest by 10:00" in body


def test_a_wait_is_mailed_from_the_retry_callback(
    run: tuple[AirflowStack, str, Path], mailbox: Mailbox
) -> None:
    stack, run_id, _ = run
    assert stack.task_states(DAG_ID, run_id)["flaky"] == ("success", 2)
    mail = _the_mail(mailbox, "flaky", stack)
    assert mail.subject == "[retry window] wait-backoff: rw_notify.flaky try 1, retry allowed"
    assert "next: wait out the 2 s backoff, then start attempt 2 at " in mail.body


def test_a_callable_gets_the_unknown_outcome(run: tuple[AirflowStack, str, Path]) -> None:
    stack, run_id, outbox = run
    assert stack.task_states(DAG_ID, run_id)["append"] == ("failed", 1)
    (sent,) = [json.loads(line) for line in outbox.read_text().splitlines()]
    assert sent["subject"] == (
        "[retry window] reconcile-remote: rw_notify.append try 1, retry refused"
    )
    assert f"Reason: {_latest_reason(stack, run_id, 'append')}" in sent["text"]
    assert "next: look the remote job up by its client-chosen job id" in sent["text"]


def test_without_a_decision_the_mail_says_the_retry_is_refused(
    run: tuple[AirflowStack, str, Path], mailbox: Mailbox
) -> None:
    stack, _, _ = run
    mail = _the_mail(mailbox, "unguarded", stack)
    assert mail.subject == (
        "[retry window] no-decision: rw_notify.unguarded try 1, treat the retry as refused"
    )
    assert "the task has no RetryWindowPolicy" in mail.body
    assert "the task has failed and no further try is scheduled" in mail.body
    assert "Failure: ValueError: partition 20261201 rejected; session token ***." in mail.body


def test_no_mail_holds_a_secret(run: tuple[AirflowStack, str, Path], mailbox: Mailbox) -> None:
    _, _, outbox = run
    assert len(mailbox.mails) == 3
    refused = _the_mail(mailbox, "long_load", run[0])
    assert "login to api.example.test as loader:*** was refused" in refused.body
    for mail in mailbox.mails:
        for secret in (PASSWORD, SECRET):
            assert secret not in mail.subject
            assert secret not in mail.body
            assert secret.encode() not in mail.raw
    for secret in (PASSWORD, SECRET):
        assert secret not in outbox.read_text()
