"""Airflow's ClassifierRetryPolicy (common.ai 1.0.0) feeding the window, on a test model.

The connection names pydantic-ai's ``test`` model: no network, no key. It answers
with the first category of the author's table, so each test orders the table to
choose what the model says. The provider needs Python 3.11 or later (the
``common-ai`` extra); elsewhere these tests skip.
"""

from __future__ import annotations

import json
from datetime import timedelta
from importlib import import_module
from importlib.util import find_spec
from types import ModuleType
from typing import Any

import pendulum
import pytest
from airflow.sdk import RetryAction

from airflow_retrywindow import Deadline, check_dag
from airflow_retrywindow.records.evidence import TERMINAL, UNKNOWN
from tests.policy.chains import chain_class
from tests.policy.resumable_jobs import policy
from tests.policy.test_classify import decide
from tests.policy.test_failure_paths import operator

ChainRetryPolicy = chain_class()

#: common.ai's retry policies, imported as a test runs, not when the module is collected:
#: pydantic-ai's import took a second of every collecting worker
RETRY = "airflow.providers.common.ai.policies.retry"
pytestmark = pytest.mark.skipif(find_spec(RETRY) is None, reason="the common-ai extra (3.11+)")


def retry() -> ModuleType:
    return import_module(RETRY)


CONN_ID = "rw_test_model"


def auth() -> tuple[str, Any]:
    return ("auth", retry().ErrorCategory("Credentials invalid or revoked.", retry=False))


def rate_limit() -> tuple[str, Any]:
    return (
        "rate_limit",
        retry().ErrorCategory("API throttling or a quota exceeded.", delay=timedelta(seconds=60)),
    )


@pytest.fixture(autouse=True)
def test_model_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = {"model": "test"}  # pydantic-ai's TestModel
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{CONN_ID.upper()}", json.dumps({"conn_type": "pydanticai", "extra": extra})
    )


def classifier(*categories: tuple[str, Any]) -> Any:
    """A ClassifierRetryPolicy whose model answers with the first of ``categories``."""
    return retry().ClassifierRetryPolicy(llm_conn_id=CONN_ID, categories=dict(categories))


def test_a_category_that_fails_ends_the_task_to_repair_its_cause() -> None:
    decision, entry = decide(classifier(auth(), rate_limit()), ValueError("401: key revoked"))
    assert decision.action is RetryAction.FAIL
    assert decision.reason.startswith("repair-cause: ")
    assert "classified terminal by ClassifierRetryPolicy: category=auth" in decision.reason
    assert entry["failure"] == TERMINAL
    assert entry["classified"]["answer"] == "fail"


def test_a_category_retried_after_60_s_against_a_deadline_40_s_away_is_infeasible() -> None:
    decision, entry = decide(
        classifier(rate_limit(), auth()),
        ValueError("429: slow down"),
        deadline=Deadline.at(pendulum.now("UTC").add(seconds=40)),
        duration=timedelta(seconds=5),
        validation=timedelta(0),
    )
    assert decision.action is RetryAction.FAIL
    assert decision.reason.startswith("deadline-infeasible: ")
    assert entry["classified"]["floorSeconds"] == 60


def test_the_same_category_with_time_left_waits_its_60_s() -> None:
    decision, _ = decide(classifier(rate_limit(), auth()), ValueError("429: slow down"))
    assert decision.action is RetryAction.RETRY
    assert decision.retry_delay == timedelta(seconds=60)


def test_a_timeout_declared_unknown_is_reconciled_even_when_the_model_says_retry() -> None:
    decision, entry = decide(
        classifier(rate_limit(), auth()), TimeoutError("no answer"), unknown=[TimeoutError]
    )
    assert decision.reason.startswith("reconcile-remote: ")
    assert entry["failure"] == UNKNOWN
    assert "classified" not in entry


def test_a_classifier_before_the_window_is_refused_with_the_way_to_feed_it() -> None:
    task = operator(ChainRetryPolicy([classifier(rate_limit(), auth()), policy()]))
    (problem,) = check_dag(task.dag)
    assert "(ClassifierRetryPolicy) is asked before the RetryWindowPolicy" in problem
    assert "classify=ClassifierRetryPolicy(...)" in problem


def test_a_window_as_a_classifiers_fallback_is_refused() -> None:
    hidden = retry().ClassifierRetryPolicy(
        llm_conn_id=CONN_ID, categories=dict([rate_limit(), auth()]), fallback_policy=policy()
    )
    (problem,) = check_dag(operator(hidden).dag)
    assert "retry_policy (ClassifierRetryPolicy) holds a RetryWindowPolicy at " in problem
    assert "retry_policy.fallback_policy" in problem


def test_an_llm_retry_policy_classifies_too() -> None:
    # the test model answers should_retry=False with the reasoning "a"
    decision, entry = decide(retry().LLMRetryPolicy(llm_conn_id=CONN_ID), ValueError("bad rows"))
    assert decision.reason.startswith("repair-cause: ")
    assert (entry["classified"]["policy"], entry["classified"]["answer"]) == (
        "LLMRetryPolicy",
        "fail",
    )


def test_the_models_of_a_classifier_are_found_in_chains_and_fallbacks() -> None:
    from airflow.sdk import ExceptionRetryPolicy

    from airflow_retrywindow.policies.classify import models_in

    reasoning = retry().LLMRetryPolicy(llm_conn_id="rw_reasoning")
    first = retry().ClassifierRetryPolicy(
        llm_conn_id=CONN_ID, categories=dict([auth(), rate_limit()]), fallback_policy=reasoning
    )
    chained = ChainRetryPolicy([ExceptionRetryPolicy(rules=[]), first])
    assert {id(found) for found in models_in(chained)} == {id(first), id(reasoning)}
    assert models_in(ExceptionRetryPolicy(rules=[])) == []


def test_a_model_is_made_ready_and_one_that_cannot_be_is_only_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("INFO", logger="airflow_retrywindow.policies.classify")
    missing = retry().LLMRetryPolicy(llm_conn_id="rw_no_such_model")
    gate = policy(classify=ChainRetryPolicy([classifier(auth(), rate_limit()), missing]))
    gate.ready_classifier()  # never raises: the try runs, and the model is asked when it fails
    said = caplog.text
    assert "the model of ClassifierRetryPolicy is ready, in " in said
    assert (
        "the model of LLMRetryPolicy (connection 'rw_no_such_model') could not be made ready: "
        "AirflowNotFoundException"
    ) in said
