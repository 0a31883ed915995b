"""Which policy of a chain decided, and what a classifier said, shown wherever a decision is.

A real chained window with a real classifier decides in-process; its stored evidence
entry is then read by the view's rows, the notifier's message and ``explain``, and
each says the same, masked like any stored text.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import ExceptionRetryPolicy, RetryAction, RetryRule
from airflow.sdk.log import mask_secret

from airflow_retrywindow.notifications.message import TaskTry, compose
from airflow_retrywindow.notifications.notice import from_evidence
from airflow_retrywindow.plugins.decision_rows import policy_rows
from airflow_retrywindow.records.composition import ChainPlace, Classification
from airflow_retrywindow.records.evidence import EVIDENCE_KEY
from tests.cli.cli_runner import run_cli
from tests.policy.chains import chain_class
from tests.policy.resumable_jobs import Store, context, policy
from tests.policy.test_failure_paths import operator

ChainRetryPolicy = chain_class()

SECRET = "tok-" + secrets.token_hex(16)


@pytest.fixture(scope="module")
def stored() -> dict[str, Any]:
    """The evidence of a chained window whose classifier failed the task, with a secret."""
    mask_secret(SECRET)
    revoked = RetryRule(
        exception=ValueError, action=RetryAction.FAIL, reason=f"the key {SECRET} was revoked"
    )
    denied = RetryRule(exception=PermissionError, action=RetryAction.FAIL)
    window = policy(classify=ExceptionRetryPolicy(rules=[revoked]), failed_statuses=())
    task, store = (
        operator(ChainRetryPolicy([ExceptionRetryPolicy(rules=[denied]), window])),
        Store(),
    )
    ctx = context(task, try_number=1, store=store, max_tries=2)
    task.retry_policy.evaluate(ValueError("401"), 1, 2, ctx)
    return dict(store.values[EVIDENCE_KEY])


CHAIN_WORDS = (
    "Decided by RetryWindowPolicy at retry_policy.policies[1], after ExceptionRetryPolicy: "
    "no decision."
)
CLASSIFIER_WORDS = "Classified terminal by ExceptionRetryPolicy (fail): the key *** was revoked."


def test_the_evidence_keeps_both_and_reads_them_back(stored: dict[str, Any]) -> None:
    latest = stored["latest"]
    assert ChainPlace.of(latest["chain"]).words() == CHAIN_WORDS
    assert Classification.of(latest["classified"]).words() == CLASSIFIER_WORDS
    assert SECRET not in json.dumps(stored)


def test_the_view_shows_them_under_the_reason(stored: dict[str, Any]) -> None:
    (row,) = policy_rows("load", -1, stored)
    assert row.composition == f"{CHAIN_WORDS} {CLASSIFIER_WORDS}"
    assert row.reason.startswith("repair-cause: ")


def test_the_page_shows_them_escaped(stored: dict[str, Any]) -> None:
    from airflow_retrywindow.links.addresses import ViewLinks
    from airflow_retrywindow.plugins.page import task_page

    rows = policy_rows("load", -1, stored)
    page = task_page(
        ViewLinks("/base/retry-window", "rw_paths", "manual__1"),
        task_id="load",
        map_index=-1,
        policy=rows,
        records=[],
    )
    assert f'<p class="composition">{CHAIN_WORDS} {CLASSIFIER_WORDS}</p>' in page
    assert SECRET not in page


def test_the_notifier_says_them(stored: dict[str, Any]) -> None:
    notice = from_evidence(stored["latest"], "load")
    message = compose(TaskTry("rw_paths", "manual__1", "load", 1), [notice])
    assert f"Retry policies: {CHAIN_WORDS} {CLASSIFIER_WORDS}" in message.text
    assert SECRET not in message.text


def test_explain_says_them(stored: dict[str, Any], tmp_path: Path) -> None:
    done = run_cli("explain", stdin=json.dumps(stored["latest"]).encode())
    assert done.returncode == 0, done.stderr
    assert CHAIN_WORDS in done.stdout.decode()
    assert CLASSIFIER_WORDS in done.stdout.decode()


def test_a_part_that_cannot_be_read_is_said_so() -> None:
    from airflow_retrywindow.records.composition import composition_words

    said = composition_words({"chain": {"where": 3}}, str)
    assert said == "chain could not be read: chain.where must be a string, got 3"
