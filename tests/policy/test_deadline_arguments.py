"""Every bad deadline argument is refused when the DAG is parsed, naming the argument and value.

A deadline that cannot be used must not wait until a decision needs it: at 3 a.m.
the gate would then refuse every retry with a message about NaN.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import pytest

from airflow_retrywindow import Deadline
from airflow_retrywindow.exceptions import DeadlineError
from airflow_retrywindow.timing.deadline import MAX_OFFSET

END = Deadline.after_data_interval_end
START = Deadline.after_data_interval_start


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Deadline.daily_at("06:00", tz=None), r"daily_at\('06:00', tz=None\): tz must be"),
        (lambda: Deadline.daily_at("06:00", tz=""), r"tz=''\): tz must be an IANA timezone"),
        (lambda: Deadline.daily_at("06:00", tz="Mars/Olympus"), r"tz='Mars/Olympus'"),
        (lambda: Deadline.daily_at("06:00", tz=3), r"tz=3\): tz must be"),
        (lambda: END(hours=math.nan), r"\(hours=nan\): hours must be a finite"),
        (lambda: END(hours=math.inf), r"\(hours=inf\): hours must be a finite"),
        (lambda: START(minutes=-math.inf), r"minutes must be a finite"),
        (lambda: END(hours=1e12), r"\(hours=1000000000000.0\): the offset may be at most 366"),
        (lambda: END(days=36500), r"\(days=36500\): the offset may be at most 366"),
        (lambda: END(days=200, hours=5000), r"longer than the 366 days"),
        (lambda: END(hours=-1), r"\(hours=-1\): hours must not be negative"),
        (lambda: END(hours="6"), r"\(hours='6'\): hours must be a number"),
        (lambda: END(hours=True), r"hours must be a number, got bool"),
        (lambda: END(fortnights=1), r"'fortnights' is not a deadline offset"),
        (START, r"after_data_interval_start\(\) needs an offset"),
    ],
)  # fmt: skip
def test_a_bad_argument_is_a_deadline_error_naming_it(build: Any, message: str) -> None:
    with pytest.raises(DeadlineError, match=message):
        build()


def test_the_documented_maximum_itself_is_accepted() -> None:
    assert Deadline.after_data_interval_end(days=MAX_OFFSET.days) is not None
    assert Deadline.after_data_interval_end(hours=6, minutes=30) is not None


def test_a_callables_arguments_never_reach_the_description() -> None:
    def due(context: object, api_key: str = "") -> None:
        return None

    described = Deadline.computed(functools.partial(due, api_key="sk-live-123")).describe()
    assert "sk-live-123" not in described
    assert described == (
        "computed by functools.partial(test_a_callables_arguments_never_reach_the_description."
        "<locals>.due, ...)"
    )
