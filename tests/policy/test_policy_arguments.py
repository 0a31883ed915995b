"""RetryWindowPolicy's arguments are checked when the DAG is parsed."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pendulum
import pytest

from airflow_retrywindow import Deadline, OutcomeUnknown, RetryWindowPolicy, TerminalFailure
from airflow_retrywindow.records.evidence import RETRYABLE, TERMINAL, UNKNOWN


def policy(**overrides: Any) -> RetryWindowPolicy:
    values: dict[str, Any] = {
        "deadline": Deadline.after_data_interval_end(hours=6),
        "duration": timedelta(minutes=35),
        "validation": timedelta(minutes=5),
        "safe_repeat": True,
    }
    values.update(overrides)
    return RetryWindowPolicy(**values)


def test_arguments_are_keyword_only_and_required() -> None:
    with pytest.raises(TypeError):
        RetryWindowPolicy(Deadline.after_data_interval_end(hours=6))  # type: ignore[misc]
    for name in ("deadline", "duration", "validation", "safe_repeat"):
        values = {
            "deadline": Deadline.after_data_interval_end(hours=6),
            "duration": 60,
            "validation": 0,
            "safe_repeat": True,
        }
        del values[name]
        with pytest.raises(TypeError, match=name):
            RetryWindowPolicy(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"deadline": datetime(2026, 12, 2, 6)}, "naive datetime"),
        ({"deadline": "tomorrow"}, "deadline must be a Deadline.*got 'tomorrow'"),
        ({"duration": timedelta(0)}, "duration must be from 1 to 1000000 seconds, got 0"),
        ({"duration": "35m"}, "duration must be a timedelta or a number of seconds, got '35m'"),
        ({"validation": None}, "validation must be a timedelta or a number of seconds, got None"),
        ({"validation": timedelta(seconds=-1)}, "validation must be from 0"),
        ({"safe_repeat": "yes"}, "safe_repeat must be True or False.*got 'yes'"),
        ({"unknown": ["Timeout"]}, "unknown entries must be exception classes.*got 'Timeout'"),
        ({"terminal": ["no.such.Error"]}, "terminal: cannot import the exception class"),
        ({"terminal": ValueError}, "terminal must be a list"),
        ({"max_observation_age": -5}, "max_observation_age must be from 0"),
        ({"on_error": "ignore"}, "on_error must be 'fail' or 'default', got 'ignore'"),
    ],
)
def test_bad_arguments_name_the_argument_and_value(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        policy(**overrides)


def test_validation_zero_only_when_written() -> None:
    assert policy(validation=timedelta(0)).work.validation_seconds() == 0


def test_classification_includes_our_own_exceptions_and_dotted_paths() -> None:
    gate = policy(unknown=["builtins.TimeoutError"], terminal=[PermissionError])
    classify = gate.classifier.classify
    assert classify(OutcomeUnknown("lost")) == UNKNOWN
    assert classify(TimeoutError()) == UNKNOWN
    assert classify(TerminalFailure()) == TERMINAL
    assert classify(PermissionError()) == TERMINAL
    assert classify(ConnectionError()) == RETRYABLE


def test_fixed_aware_deadline_is_accepted_directly() -> None:
    fixed = policy(deadline=pendulum.datetime(2026, 12, 2, 6, tz="UTC"))
    assert fixed.deadline.resolve({}) == pendulum.datetime(2026, 12, 2, 6, tz="UTC")


def test_evaluate_without_context_fails_closed() -> None:
    decision = policy().evaluate(ConnectionError("x"), try_number=1, max_tries=3, context=None)
    assert decision.action.value == "fail"
    assert decision.reason and decision.reason.startswith("gate-error:")
    assert "no task context" in decision.reason


def test_on_error_default_hands_back_to_airflow() -> None:
    decision = policy(on_error="default").evaluate(ConnectionError("x"), 1, 3, None)
    assert decision.action.value == "default"
