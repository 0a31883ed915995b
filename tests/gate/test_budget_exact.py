"""The budget compares exactly and refuses numbers it cannot compare sensibly."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_retrywindow.gate import budget as budget_module
from airflow_retrywindow.gate.budget import Budget, BudgetError

MAX = 10**30


def _refused(limit: object, estimate: object) -> str:
    """The message of the BudgetError that the budget, or its verdict, raises."""
    with pytest.raises(BudgetError) as raised:
        Budget(limit=limit, estimate=estimate, unit="GB").verdict()  # type: ignore[arg-type]
    return str(raised.value)


def _rendered(estimate: object, limit: object = 200) -> Budget:
    template = Budget(limit=limit, estimate="{{ dry_run }}", unit="GB")  # type: ignore[arg-type]
    return template.with_estimate(estimate)


def _rendered_refused(estimate: object) -> str:
    with pytest.raises(BudgetError) as raised:
        _rendered(estimate).verdict()
    return str(raised.value)


# -- exact comparison ------------------------------------------------------------------


def test_an_int_one_over_a_large_limit_is_over() -> None:
    verdict = Budget(limit=2**53, estimate=2**53 + 1, unit="bytes").verdict()
    assert verdict.blocks
    assert verdict.reason == (
        "budget-exceeded: review the plan or get the budget changed; estimate "
        "9007199254740993 bytes is over the approved 9007199254740992 bytes"
    )


def test_a_string_a_hair_over_the_limit_is_over_and_shown_as_given() -> None:
    verdict = _rendered("200.00000000000001").verdict()
    assert verdict.blocks
    assert "estimate 200.00000000000001 GB is over the approved 200 GB" in verdict.reason
    assert verdict.estimate == Fraction("200.00000000000001")


def test_an_estimate_equal_to_the_limit_is_within() -> None:
    for limit, estimate in [
        (200, 200),
        (200, "200"),
        (200, " 200.000 "),
        (200, "2e2"),
        (200, 200.0),
        (2**53 + 1, 2**53 + 1),
        (2**53 + 1, str(2**53 + 1)),
        (0.1, 0.1),
        (MAX, MAX),
        (MAX, "1e30"),
    ]:
        verdict = _rendered(estimate, limit).verdict()
        assert verdict.verdict == "within-budget", (limit, estimate)
        assert not verdict.blocks


def test_floats_compare_by_their_exact_binary_value() -> None:
    # float(2**60) is exactly 2**60, although it prints as 1.152921504606847e+18
    assert not Budget(limit=2**60, estimate=float(2**60), unit="bytes").verdict().blocks
    assert Budget(limit=2**60 - 1, estimate=float(2**60), unit="bytes").verdict().blocks
    # the float 0.3 is a little under three tenths, so a rendered "0.3" is over it
    verdict = _rendered("0.3", limit=0.3).verdict()
    assert verdict.blocks
    # and the reason does not claim that 0.3 is over 0.3: it shows the limit exactly
    assert "estimate 0.3 GB is over the approved 0.29999999999999998889776975" in verdict.reason


def test_a_whitespace_padded_string_is_accepted() -> None:
    verdict = _rendered(" \t180.5\n ").verdict()
    assert verdict.verdict == "within-budget"
    assert verdict.estimate == Fraction(361, 2)
    assert "estimate 180.5 GB is within the approved 200 GB" in verdict.reason


def test_the_bounds_themselves_are_accepted() -> None:
    assert budget_module.MAX_AMOUNT == MAX
    assert not Budget(limit=MAX, estimate=MAX, unit="bytes").verdict().blocks
    assert not _rendered("1e-30", limit=1).verdict().blocks
    assert not Budget(limit=1e-30, estimate=1e-30, unit="GB").verdict().blocks
    # the float 1e30 is a little over 10**30, but it is the bound as written
    assert Fraction(1e30) > MAX
    assert not Budget(limit=1e30, estimate=1e30, unit="bytes").verdict().blocks
    assert Budget(limit=MAX, estimate=1e30, unit="bytes").verdict().blocks
    with pytest.raises(
        BudgetError, match=r"limit must be at most 1e30, got 1\.0000000000000002e\+30"
    ):
        Budget(limit=1.0000000000000002e30, estimate=1, unit="bytes")
    assert _rendered("0").verdict().verdict == "within-budget"
    assert _rendered(0).verdict().verdict == "within-budget"


# -- refusals --------------------------------------------------------------------------


def test_a_huge_limit_is_refused_briefly() -> None:
    message = _refused(10**400, 1)
    assert message.startswith("limit ")
    assert "1e30" in message
    assert len(message) < 300
    # even an int too long for str() is named without printing it
    message = _refused(10**5000, 1)
    assert message.startswith("limit ") and len(message) < 300


def test_a_huge_int_estimate_is_refused() -> None:
    for estimate in [MAX + 1, 10**400]:
        message = _refused(200, estimate)
        assert message.startswith("estimate must be at most 1e30"), estimate
        assert "count in a larger unit" in message
        assert len(message) < 300
    assert "estimate must be a non-negative" in _refused(200, -(10**400))
    with pytest.raises(BudgetError, match=r"^estimate "):
        _rendered(10**400)
    with pytest.raises(BudgetError, match=r"^limit "):
        Budget(limit=MAX + 1, estimate=1, unit="bytes")


@pytest.mark.parametrize(
    "text", ["1e999999", "1e999999999999999999", "-1e999999", "1e31", "1e-31", "1e-999999999999"]
)
def test_a_string_with_an_absurd_exponent_is_refused(text: str) -> None:
    message = _rendered_refused(text)
    assert message.startswith("estimate ")
    assert text in message
    assert len(message) < 300


def test_a_string_that_is_too_long_is_refused() -> None:
    for text in ["1" * 200, "0." + "0" * 150 + "1", "9" * 10_000]:
        message = _rendered_refused(text)
        assert message.startswith("estimate ")
        assert len(message) < 300


@pytest.mark.parametrize("value", [True, False])
def test_bools_are_refused(value: bool) -> None:
    assert _refused(value, 1).startswith("limit must be a number")
    assert _refused(200, value).startswith("estimate must be a number")
    with pytest.raises(BudgetError, match=r"^estimate must be a number"):
        _rendered(value)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_floats_are_refused(value: float) -> None:
    assert _refused(value, 1).startswith("limit ")
    assert _refused(200, value).startswith("estimate ")


@pytest.mark.parametrize("text", ["nan", "NaN", "inf", "-inf", "Infinity", "sNaN", "nan123"])
def test_non_finite_strings_are_refused(text: str) -> None:
    message = _rendered_refused(text)
    assert message.startswith("estimate ")
    assert repr(text) in message


@pytest.mark.parametrize("estimate", [-1, -0.5, "-3", " -0.000001 ", -MAX, "-1e999999"])
def test_a_negative_estimate_is_refused(estimate: object) -> None:
    assert "estimate must be a non-negative" in _refused(200, estimate)


@pytest.mark.parametrize("limit", [0, 0.0, -1, -0.5])
def test_a_limit_that_is_not_positive_is_refused(limit: object) -> None:
    assert "limit must be a positive finite number" in _refused(limit, 1)


@pytest.mark.parametrize(
    "estimate", [None, "", "   ", "None", "abc", "1,5", "0x10", "1e", "--1", [1]]
)
def test_what_is_no_number_is_refused(estimate: object) -> None:
    message = _rendered_refused(estimate)
    assert message.startswith("estimate must ")


def test_every_refusal_says_what_to_do() -> None:
    messages = [
        _refused(10**400, 1),
        _refused(math.nan, 1),
        _refused(0, 1),
        _refused(200, -1),
        _rendered_refused("1e999999"),
        _rendered_refused("1" * 200),
        _rendered_refused("nan"),
    ]
    for message in messages:
        assert "; " in message, message  # the problem, then what to do


# -- the record ------------------------------------------------------------------------


def test_the_record_keeps_ints_and_is_json_safe() -> None:
    record = Budget(limit=200, estimate=260, unit="GB").verdict().as_dict()
    assert (record["limit"], record["estimate"]) == (200, 260)
    assert type(record["limit"]) is int and type(record["estimate"]) is int
    record = _rendered("2.6e2").verdict().as_dict()
    assert record["estimate"] == 260 and type(record["estimate"]) is int
    record = _rendered("180.5").verdict().as_dict()
    assert record["estimate"] == 180.5
    record = _rendered("200.00000000000001").verdict().as_dict()
    assert record["verdict"] == "budget-exceeded"
    assert "200.00000000000001" in record["reason"]
    json.dumps(record, allow_nan=False)
    record = Budget(limit=MAX, estimate=MAX, unit="bytes").verdict().as_dict()
    assert record["limit"] == MAX and type(record["limit"]) is int
    json.dumps(record, allow_nan=False)


# -- properties ------------------------------------------------------------------------

_limits = st.one_of(
    st.integers(min_value=1, max_value=MAX),
    st.floats(min_value=1e-30, max_value=1e30, allow_nan=False, allow_infinity=False),
)
_decimals = st.decimals(
    min_value=0, max_value=MAX, allow_nan=False, allow_infinity=False, places=20
)
_estimates = st.one_of(
    st.integers(min_value=0, max_value=MAX),
    st.floats(min_value=0, max_value=1e30, allow_nan=False, allow_infinity=False),
    _decimals.map(str),
)


def _exact(value: object) -> Fraction:
    if isinstance(value, str):
        return Fraction(Decimal(value))
    assert isinstance(value, (int, float))
    return Fraction(value)


@given(limit=_limits, estimate=_estimates)
def test_the_verdict_is_the_exact_comparison(limit: float, estimate: float | str) -> None:
    exact_limit, exact_estimate = _exact(limit), _exact(estimate)
    if exact_limit < Fraction(1, MAX) or (0 < exact_estimate < Fraction(1, MAX)):
        return  # below the smallest amount the budget accepts
    verdict = _rendered(estimate, limit).verdict()
    assert verdict.blocks is (exact_estimate > exact_limit)
    assert (verdict.limit, verdict.estimate) == (exact_limit, exact_estimate)
    json.dumps(verdict.as_dict(), allow_nan=False)


@given(limit=st.integers(min_value=1, max_value=MAX), step=st.integers(min_value=-3, max_value=3))
def test_near_the_limit_the_verdict_is_exact(limit: int, step: int) -> None:
    estimate = min(max(limit + step, 0), MAX)
    assert _rendered(str(estimate), limit).verdict().blocks is (estimate > limit)
    assert _rendered(estimate, limit).verdict().blocks is (estimate > limit)


@given(
    text=st.one_of(st.text(max_size=120), st.text(alphabet="0123456789.eE+-_ nafiIN", max_size=40))
)
def test_any_rendered_text_gives_a_verdict_or_a_budget_error(text: str) -> None:
    try:
        verdict = _rendered(text).verdict()
    except BudgetError as error:
        assert str(error).startswith("estimate ")
        assert len(str(error)) < 400
    else:
        json.dumps(verdict.as_dict(), allow_nan=False)
