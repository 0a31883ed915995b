"""Airflow's retry settings translated into the model's policy, and attempt windows."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from airflow_retrywindow.timing.retry_settings import RetrySettings, UnsupportedRetrySettings


def settings(**overrides: Any) -> RetrySettings:
    values: dict[str, Any] = {
        "task_id": "load",
        "retries": 3,
        "retry_delay": timedelta(seconds=4),
        "retry_exponential_backoff": 2,
        "max_retry_delay": timedelta(seconds=12),
    }
    values.update(overrides)
    return RetrySettings.of(**values)


def test_the_seed_policy() -> None:
    assert settings().model_policy() == {
        "maxAttempts": 4,
        "initialDelay": 4,
        "maxDelay": 12,
        "multiplier": 2,
    }


def test_retries_exclude_the_first_run() -> None:
    assert settings(retries=0).max_attempts == 1
    assert settings(retries=9).max_attempts == 10


def test_no_exponential_backoff_means_a_constant_delay() -> None:
    for off in (0, 1, 1.0, False):
        policy = settings(retry_exponential_backoff=off, max_retry_delay=None).model_policy()
        assert (policy["multiplier"], policy["maxDelay"]) == (1, 4)


def test_true_doubles_as_in_airflow() -> None:
    # Airflow 3.3's serializer reads True as 2.0 and the scheduler doubles each wait
    policy = settings(retry_exponential_backoff=True).model_policy()
    assert (policy["multiplier"], policy["maxDelay"]) == (2, 12)


def test_airflow_cap_applies_without_max_retry_delay() -> None:
    assert settings(max_retry_delay=None).max_delay == 86_400
    assert settings(max_retry_delay=None, retry_exponential_backoff=2.0).multiplier == 2


def test_fractional_delays_round_up_and_caps_round_down() -> None:
    tuned = settings(retry_delay=timedelta(seconds=4.2), max_retry_delay=12.9)
    assert (tuned.initial_delay, tuned.max_delay) == (5, 12)
    assert settings(retry_delay=30.0, max_retry_delay=60).initial_delay == 30


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"retries": 10}, "retries=10 means 11 runs"),
        ({"retries": -1}, "retries must be a whole number, got -1"),
        ({"retry_exponential_backoff": 1.5}, "retry_exponential_backoff=1.5 cannot be expressed"),
        ({"retry_exponential_backoff": 6}, "retry_exponential_backoff=6"),
        ({"retry_exponential_backoff": float("nan")}, "retry_exponential_backoff=nan"),
        ({"retry_delay": timedelta(0)}, "retry_delay=0 s is outside"),
        ({"retry_delay": timedelta(days=12)}, "retry_delay=1.0368e\\+06 s is outside"),
        ({"retry_delay": "5m"}, "retry_delay must be a timedelta or a number of seconds"),
        ({"max_retry_delay": timedelta(seconds=2)}, "max_retry_delay \\(2 s\\) is shorter"),
        ({"max_retry_delay": timedelta(milliseconds=10)}, "max_retry_delay=0.01 s is under 1 s"),
    ],
)
def test_settings_the_model_cannot_express(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(UnsupportedRetrySettings, match=message) as raised:
        settings(**overrides)
    assert "task 'load'" in str(raised.value)


@pytest.mark.parametrize(
    ("try_number", "max_tries", "attempts"),
    [
        (1, 3, 1),  # first run
        (4, 3, 4),  # the last run of the first window
        (5, 7, 1),  # cleared after try 4: max_tries = 4 + 3
        (8, 7, 4),  # the last run of the second window
        (9, 11, 1),  # cleared again
    ],
)
def test_attempts_in_the_current_window(try_number: int, max_tries: int, attempts: int) -> None:
    assert settings().attempts_in_window(try_number, max_tries) == attempts


def test_an_impossible_window_is_refused_with_the_numbers() -> None:
    with pytest.raises(UnsupportedRetrySettings, match="try 9 with max_tries 3"):
        settings().attempts_in_window(9, 3)


def test_the_longest_wait_is_the_cap_airflow_applies() -> None:
    assert settings().longest_wait == 12
    assert settings(max_retry_delay=None).longest_wait == 86_400


@pytest.mark.parametrize(
    ("max_retry_delay", "longest"),
    [
        (timedelta(seconds=10), 10),
        (None, 86_400),
        (timedelta(seconds=2), 4),  # shorter than retry_delay: no room
        # Airflow ignores max_retry_delay for a constant delay: not refused, no room
        (timedelta(milliseconds=10), 4),
        (timedelta(days=30), 1_000_000),  # the model's longest delay
    ],
)
def test_a_constant_delay_keeps_its_cap_for_jitter(
    max_retry_delay: timedelta | None, longest: int
) -> None:
    constant = settings(retry_exponential_backoff=0, max_retry_delay=max_retry_delay)
    assert constant.longest_wait == longest
    assert (constant.initial_delay, constant.max_delay) == (4, 4)


@pytest.mark.parametrize(("attempts", "wait"), [(1, 4), (1, 13), (2, 9), (2, 16), (3, 16)])
def test_a_policy_for_one_longer_wait(attempts: int, wait: int) -> None:
    base = settings(max_retry_delay=timedelta(seconds=16))
    longer = base.with_backoff(attempts, wait)
    assert longer.backoff(attempts) == wait
    assert (longer.max_attempts, longer.multiplier, longer.max_delay) == (4, 2, wait)
    assert longer.initial_delay <= wait
