"""An unknown outcome anywhere in an exception group or a long chain is reconciled first.

``asyncio.TaskGroup``, anyio and trio raise ``ExceptionGroup``s; a lost response
inside one must not be retried blindly, and neither may a chain or group too
deep to read to the end.
"""

from __future__ import annotations

import builtins
import sys
from typing import Any

import pytest

from airflow_retrywindow import OutcomeUnknown, TerminalFailure
from airflow_retrywindow.policies.failures import MAX_LINKS, Classifier
from airflow_retrywindow.records.evidence import RETRYABLE, TERMINAL, UNKNOWN

pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="ExceptionGroup is 3.11+")

classify = Classifier.of(unknown=[TimeoutError]).classify
#: built in from Python 3.11 (the tests are skipped before)
ExceptionGroup: Any = getattr(builtins, "ExceptionGroup", None)
BaseExceptionGroup: Any = getattr(builtins, "BaseExceptionGroup", None)


def test_an_unknown_outcome_inside_a_group_is_unknown() -> None:
    group = ExceptionGroup("load failed", [OutcomeUnknown("lost answer"), ValueError("bad row")])
    assert classify(group) == UNKNOWN


def test_a_group_of_plain_failures_is_retryable() -> None:
    group = ExceptionGroup("load failed", [ValueError("a"), ConnectionError("b")])
    assert classify(group) == RETRYABLE


def test_an_unknown_outcome_in_a_nested_group_is_unknown() -> None:
    inner = ExceptionGroup("inner", [ValueError("a"), TimeoutError("no answer")])
    outer = ExceptionGroup("outer", [ConnectionError("b"), ExceptionGroup("middle", [inner])])
    assert classify(outer) == UNKNOWN


def test_an_unknown_outcome_in_the_cause_of_a_group_member_is_unknown() -> None:
    member = ValueError("wrapped")
    member.__cause__ = OutcomeUnknown("lost answer")
    assert classify(ExceptionGroup("g", [member])) == UNKNOWN


def test_a_terminal_and_an_unknown_outcome_in_one_group_are_unknown() -> None:
    group = ExceptionGroup("g", [TerminalFailure("schema changed"), OutcomeUnknown("lost")])
    assert classify(group) == UNKNOWN
    assert classify(ExceptionGroup("g", [TerminalFailure("schema changed")])) == TERMINAL


def test_a_base_exception_group_is_walked_too() -> None:
    group = BaseExceptionGroup("g", [KeyboardInterrupt(), OutcomeUnknown("lost")])
    assert classify(group) == UNKNOWN


def _chain(length: int, last: BaseException) -> BaseException:
    error = last
    for index in range(length):
        wrapper = RuntimeError(f"link {index}")
        wrapper.__cause__ = error
        error = wrapper
    return error


def test_an_unknown_outcome_at_the_end_of_a_long_chain_is_unknown() -> None:
    # deeper than the 32 links read before: the lost answer sits at link 40
    assert classify(_chain(40, OutcomeUnknown("lost"))) == UNKNOWN


def test_a_chain_too_long_to_read_is_unknown_never_retryable() -> None:
    assert classify(_chain(MAX_LINKS + 5, ValueError("plain"))) == UNKNOWN
    assert classify(_chain(MAX_LINKS - 5, ValueError("plain"))) == RETRYABLE


def test_a_group_too_wide_to_read_is_unknown() -> None:
    group = ExceptionGroup("g", [ValueError(str(i)) for i in range(MAX_LINKS + 1)])
    assert classify(group) == UNKNOWN


def test_a_group_that_contains_itself_through_a_cause_ends() -> None:
    member = ValueError("a")
    group = ExceptionGroup("g", [member])
    member.__context__ = group
    assert classify(group) == RETRYABLE
