"""``classify=``: any retry policy names the failure's class, and the window decides.

These run the real window with real classifiers (the SDK's ``ExceptionRetryPolicy`` and
small policies answering as a model would) in-process; a classifier on a pydantic-ai
test model is in ``test_classify_with_common_ai.py``.
"""

from __future__ import annotations

import secrets
import threading
import time
from datetime import timedelta
from typing import Any

import pendulum
import pytest
from airflow.sdk import ExceptionRetryPolicy, RetryAction, RetryDecision, RetryPolicy, RetryRule
from airflow.sdk.log import mask_secret

from airflow_retrywindow import Deadline, check_dag, configuration
from airflow_retrywindow.records.evidence import EVIDENCE_KEY, RETRYABLE, TERMINAL, UNKNOWN
from tests.policy.resumable_jobs import Store, context, policy
from tests.policy.test_failure_paths import operator


class Answers(RetryPolicy):
    """A classifier that gives one answer, as a model would, and counts the questions."""

    def __init__(self, answer: Any, *, wait: threading.Event | None = None) -> None:
        self.answer = answer
        self.wait = wait
        self.asked = 0

    def evaluate(self, exception: Any, try_number: int, max_tries: int, context: Any = None) -> Any:
        self.asked += 1
        if self.wait is not None:
            self.wait.wait(60)  # a model that takes its time
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


def decide(classifier: Any, error: BaseException, **overrides: Any) -> tuple[Any, dict[str, Any]]:
    """The window's decision on ``error`` with ``classifier``, and the evidence it kept."""
    gate = policy(classify=classifier, failed_statuses=(), **overrides)
    task, store = operator(gate), Store()
    decision = gate.evaluate(error, 1, 2, context(task, try_number=1, store=store, max_tries=2))
    return decision, store.values[EVIDENCE_KEY]["latest"]


def test_its_fail_makes_the_failure_terminal_with_its_reason() -> None:
    rules = ExceptionRetryPolicy(
        rules=[RetryRule(exception=ValueError, action=RetryAction.FAIL, reason="bad schema")]
    )
    decision, entry = decide(rules, ValueError("column missing"))
    assert decision.action is RetryAction.FAIL
    assert decision.reason.startswith("repair-cause: ")
    assert "classified terminal by ExceptionRetryPolicy: bad schema" in decision.reason
    assert entry["failure"] == TERMINAL
    assert entry["classified"] == {
        "failure": TERMINAL,
        "by": "classifier",
        "policy": "ExceptionRetryPolicy",
        "answer": "fail",
        "reason": "bad schema",
        "seconds": entry["classified"]["seconds"],
    }


def test_its_retry_delay_is_a_floor_under_the_backoff() -> None:
    decision, entry = decide(
        Answers(RetryDecision.retry(delay=timedelta(seconds=60), reason="rate limited")),
        ConnectionError("429"),
    )
    assert decision.action is RetryAction.RETRY
    assert decision.retry_delay == timedelta(seconds=60)  # not the task's 30 s
    assert entry["result"]["tasks"][0]["decision"] == "wait-backoff"
    assert entry["classified"]["floorSeconds"] == 60
    assert entry["fixture"]["policy"]["maxDelay"] == 60


def test_a_shorter_delay_than_the_backoff_leaves_the_backoff() -> None:
    decision, _ = decide(
        Answers(RetryDecision.retry(delay=timedelta(seconds=5))), ConnectionError("reset")
    )
    assert decision.retry_delay == timedelta(seconds=30)


def test_the_model_checks_the_deadline_with_the_longer_wait() -> None:
    due = pendulum.now("UTC").add(seconds=40)
    decision, entry = decide(
        Answers(RetryDecision.retry(delay=timedelta(seconds=60), reason="rate limited")),
        ConnectionError("429"),
        deadline=Deadline.at(due),
        duration=timedelta(seconds=5),
        validation=timedelta(0),
    )
    assert decision.action is RetryAction.FAIL
    assert decision.reason.startswith("deadline-infeasible: ")
    assert entry["failure"] == RETRYABLE


def test_an_outcome_declared_unknown_is_reconciled_whatever_the_classifier_says() -> None:
    says_retry = Answers(RetryDecision.retry(reason="transient"))
    decision, entry = decide(says_retry, TimeoutError("no answer"), unknown=[TimeoutError])
    assert decision.reason.startswith("reconcile-remote: ")
    assert entry["failure"] == UNKNOWN
    assert says_retry.asked == 0  # the window's own classes win: not even asked
    assert "classified" not in entry


@pytest.mark.parametrize(
    ("answer", "kind", "why"),
    [
        (RetryDecision.default(), "default", "it answered DEFAULT"),
        (RuntimeError("model down"), "raised", "it raised RuntimeError: model down"),
        ("retry", "invalid", "it returned str, not a RetryDecision"),
    ],
)
def test_no_usable_answer_leaves_the_failure_to_the_windows_classes(
    answer: Any, kind: str, why: str
) -> None:
    decision, entry = decide(Answers(answer), ConnectionError("reset"))
    assert decision.action is RetryAction.RETRY
    assert entry["failure"] == RETRYABLE
    assert (entry["classified"]["by"], entry["classified"]["answer"]) == ("window", kind)
    assert entry["classified"]["reason"] == why
    assert "Answers" not in entry["reason"]  # the window's classes decided: the evidence says why


def test_a_slow_classifier_is_not_waited_for_past_its_bound() -> None:
    released = threading.Event()
    slow = Answers(RetryDecision.fail(reason="too late to count"), wait=released)
    started = time.monotonic()
    try:
        decision, entry = decide(slow, ConnectionError("reset"), classify_timeout=1)
    finally:
        released.set()
    took = time.monotonic() - started
    assert slow.asked == 1
    # within the decision's bound, far from the 60 s the classifier would have taken
    assert took < configuration.clock_read_limit()
    assert decision.action is RetryAction.RETRY  # its late FAIL is not used
    assert entry["classified"]["answer"] == "timeout"
    assert entry["classified"]["reason"] == "no answer within 1 s, the decision's bound"
    assert 1 <= entry["classified"]["seconds"] < configuration.clock_read_limit()


def test_its_wait_is_never_more_than_half_the_decisions_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow_retrywindow.policies.classify import classify_wait

    monkeypatch.setenv("AIRFLOW__RETRY_WINDOW__CLOCK_READ_LIMIT", "2")
    released = threading.Event()
    slow = Answers(RetryDecision.fail(), wait=released)
    try:
        _, entry = decide(slow, ConnectionError("reset"), classify_timeout=30)
    finally:
        released.set()
    assert entry["classified"]["reason"] == "no answer within 1 s, the decision's bound"
    assert classify_wait(timedelta(seconds=30), 8) == 4


def test_a_classifier_timeout_past_the_bound_is_refused_when_the_dag_is_parsed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AIRFLOW__RETRY_WINDOW__CLOCK_READ_LIMIT", "8")
    task = operator(policy(classify=Answers(RetryDecision.default()), classify_timeout=30))
    (problem,) = check_dag(task.dag)
    assert problem.startswith(
        "rw_paths: task 'load': classify_timeout=30 s: the classifier and the read of the API "
        "server's clock share the decision's bound, [retry_window] clock_read_limit (8 s, below "
        "the "
    )
    assert "Write classify_timeout=timedelta(seconds=4) or less" in problem
    fits = operator(policy(classify=Answers(RetryDecision.default()), classify_timeout=4))
    assert check_dag(fits.dag) == []


def test_the_classifiers_reason_is_masked_like_any_stored_text() -> None:
    secret = "tok-" + secrets.token_hex(16)
    mask_secret(secret)
    decision, entry = decide(
        Answers(RetryDecision.fail(reason=f"the key {secret} was revoked")), ValueError("401")
    )
    assert secret not in decision.reason
    assert secret not in str(entry)
    assert "the key *** was revoked" in entry["classified"]["reason"]


@pytest.mark.parametrize(
    ("classify", "says"),
    [
        ([Answers(RetryDecision.default())], "chain them: classify=ChainRetryPolicy([...])"),
        ("rules", "classify must be a retry policy"),
    ],
)
def test_classify_takes_one_retry_policy(classify: Any, says: str) -> None:
    with pytest.raises(ValueError, match=r"classify") as raised:
        policy(classify=classify)
    assert says in str(raised.value)


def test_classify_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="classify_timeout must be a positive duration"):
        policy(classify=Answers(RetryDecision.default()), classify_timeout=0)
