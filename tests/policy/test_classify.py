"""``classify=``: any retry policy names the failure's class, and the window decides.

These run the real window with real classifiers (the SDK's ``ExceptionRetryPolicy`` and
small policies answering as a model would) in-process; a classifier on a pydantic-ai
test model is in ``test_classify_with_common_ai.py``.
"""

from __future__ import annotations

import secrets
import threading
from datetime import timedelta
from typing import Any

import pendulum
import pytest
from airflow.sdk import ExceptionRetryPolicy, RetryAction, RetryDecision, RetryPolicy, RetryRule
from airflow.sdk.log import mask_secret

from airflow_retrywindow import Deadline, check_dag
from airflow_retrywindow.plugins.decision_rows import policy_rows
from airflow_retrywindow.records.evidence import EVIDENCE_KEY, RETRYABLE, TERMINAL, UNKNOWN
from tests.metrics.test_metrics_through_airflow_stats import PREFIX, Listener, statsd
from tests.policy.resumable_jobs import Store, context, policy
from tests.policy.test_failure_paths import operator

__all__ = ["statsd"]  # the fixture: Airflow's Stats sending to a UDP listener


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


def test_a_classifier_that_never_answers_leaves_the_class_to_the_window_and_says_so(
    statsd: Listener, caplog: pytest.LogCaptureFixture
) -> None:
    # the model's FAIL comes only once the decision is taken: it never answers within its wait
    released = threading.Event()
    silent = Answers(RetryDecision.fail(reason="credentials revoked"), wait=released)
    gate = policy(classify=silent, failed_statuses=(), classify_timeout=1)
    task, store, error = operator(gate), Store(), ConnectionError("reset")
    ctx = context(task, try_number=1, store=store, max_tries=2)
    ctx["ti"].dag_id = "rw_paths"
    try:
        decision = gate.evaluate(error, 1, 2, ctx)
    finally:
        released.set()
    entry = store.values[EVIDENCE_KEY]["latest"]
    assert silent.asked == 1
    # the window's own classes: an undeclared failure is retryable, so it retries
    assert entry["failure"] == gate.classifier.classify(error) == RETRYABLE
    assert decision.action is RetryAction.RETRY
    said = "Answers: no answer within 1 s, so retryable by the window's classes"
    assert said in decision.reason
    assert said in entry["reason"]
    assert entry["classified"] == {
        "failure": RETRYABLE,
        "by": "window",
        "policy": "Answers",
        "answer": "timeout",
        "reason": "no answer within 1 s",
        "seconds": entry["classified"]["seconds"],
    }
    (row,) = policy_rows("load", -1, store.values[EVIDENCE_KEY])
    assert said in row.reason
    assert row.composition == (
        "Answers gave no usable answer (timeout: no answer within 1 s); the window's own "
        "classes decided: retryable."
    )
    tags = "dag_id=rw_paths,task_id=load,decided_by=retry-policy,classifier=Answers"
    assert f"{PREFIX}.retry_window.classifier.timeout,{tags}:1|c" in statsd.lines()
    assert "Answers did not answer within 1 s, its share of the decision's bound" in caplog.text


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
    assert entry["classified"]["reason"] == "no answer within 1 s"
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
