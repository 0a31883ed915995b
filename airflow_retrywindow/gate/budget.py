"""An approved resource budget for the next attempt, and the verdict on its estimate.

A bytes-billed cap blocks any attempt whose estimate is over it. ``LIMIT`` in a
query does not reduce the bytes read, so only an estimate (a dry run, say) says
what an attempt will cost. The gate compares and reports; it never raises the
limit. When the estimate is an upper bound (clustered tables, partition pruning
decided at run time), say so: the uncertainty goes into the evidence.

Templating: the gate renders ``estimate`` when it is a string, so it can come
from a dry-run task, e.g. ``"{{ ti.xcom_pull('dry_run') }}"``.

The comparison is exact: an int counts as itself, a string as the decimal number
it spells (``"200.00000000000001"`` is over 200), a float as its exact binary
value. Numbers the comparison cannot use sensibly - not finite, negative, beyond
:data:`MAX_AMOUNT`, or a rendered string too long to be a number - are refused
with a :class:`BudgetError` that names the argument and the value.
"""

from __future__ import annotations

import math
import re
import reprlib
from dataclasses import dataclass, replace
from decimal import Context, Decimal, InvalidOperation, localcontext
from fractions import Fraction
from typing import Any

from airflow_retrywindow.exceptions import BudgetError

#: the verdicts, as they appear in the decision record
WITHIN_BUDGET = "within-budget"
BUDGET_EXCEEDED = "budget-exceeded"

#: The largest limit or estimate accepted, in whatever unit the budget counts; its
#: reciprocal is the smallest non-zero one. No real budget comes near it (10**30
#: bytes is a million yottabytes), so a number beyond it is a mistake - a wrong
#: unit, a broken dry run - not a budget. The bound also keeps the exact
#: arithmetic cheap and every accepted number short enough to print in full.
MAX_AMOUNT = 10**30

#: the longest rendered estimate accepted, in characters, surrounding whitespace aside
MAX_TEXT = 100

_SMALLEST = Fraction(1, MAX_AMOUNT)
_BOUND = f"{MAX_AMOUNT:.0e}".replace("+", "")  # "1e30", for messages
_SMALLEST_TEXT = f"{1 / MAX_AMOUNT:.0e}"  # "1e-30", for messages
_DIGITS = len(str(MAX_AMOUNT))  # a decimal exponent beyond this is out of bounds
_UNIT = re.compile(r"[A-Za-z][A-Za-z0-9 _./-]{0,31}")
_BRIEF = reprlib.Repr()
_BRIEF.maxstring = 40
_BRIEF.maxother = 40
_BRIEF.maxlist = _BRIEF.maxtuple = _BRIEF.maxdict = 4


@dataclass(frozen=True)
class BudgetVerdict:
    """How an estimate compares with the approved limit.

    :param verdict: ``within-budget`` or ``budget-exceeded``.
    :param reason: one line naming both numbers, as given, and the unit.
    :param limit: the approved limit, exactly.
    :param estimate: the estimate that was compared, exactly.
    :param unit: what both count, e.g. ``bytes``.
    :param upper_bound: whether the estimate is an upper bound.
    """

    verdict: str
    reason: str
    limit: Fraction
    estimate: Fraction
    unit: str
    upper_bound: bool

    @property
    def blocks(self) -> bool:
        """Whether the verdict refuses the attempt."""
        return self.verdict == BUDGET_EXCEEDED

    def as_dict(self) -> dict[str, Any]:
        """The verdict as a JSON object for the decision record.

        A whole number is an int; any other is the nearest float, and ``reason``
        carries both numbers exactly as given.
        """
        return {
            "verdict": self.verdict,
            "reason": self.reason,
            "limit": _json_number(self.limit),
            "estimate": _json_number(self.estimate),
            "unit": self.unit,
            "estimateIsUpperBound": self.upper_bound,
        }


@dataclass(frozen=True)
class Budget:
    """The approved limit for one attempt and the estimate of what it will use.

    :param limit: the approved limit, a positive int or float of at most
        :data:`MAX_AMOUNT` (e.g. 200 for 200 GB).
    :param estimate: the estimate for the next attempt, from 0 to
        :data:`MAX_AMOUNT`: an int, a float, or a string holding a decimal number
        (templated by the gate, e.g. from a dry run's XCom).
    :param unit: what both numbers count, e.g. ``"bytes"`` or ``"GB"``.
    :param estimate_is_upper_bound: ``True`` when the estimate may overstate the
        real use (clustered tables); recorded, never used to relax the check.
    """

    limit: float
    estimate: float | str
    unit: str
    estimate_is_upper_bound: bool = False

    def __post_init__(self) -> None:
        _amount(self.limit, "limit")
        if not isinstance(self.estimate, str):
            _amount(self.estimate, "estimate")
        if not isinstance(self.unit, str) or not _UNIT.fullmatch(self.unit):
            raise BudgetError(
                f"unit must name what the budget counts, e.g. 'bytes' or 'GB', got {self.unit!r}"
            )
        if not isinstance(self.estimate_is_upper_bound, bool):
            raise BudgetError(
                "estimate_is_upper_bound must be True or False, "
                f"got {self.estimate_is_upper_bound!r}"
            )

    def with_estimate(self, estimate: object) -> Budget:
        """This budget with ``estimate`` in place, e.g. after templating.

        :param estimate: the new estimate, a number or a string holding one.
        """
        if not isinstance(estimate, (str, int, float)) or isinstance(estimate, bool):
            raise BudgetError(
                f"estimate must be a number, got {_brief(estimate)}; "
                "render an int, a float or a string holding a number"
            )
        return replace(self, estimate=estimate)

    def verdict(self) -> BudgetVerdict:
        """Compare the estimate with the limit exactly; a string estimate must hold a number."""
        limit = _amount(self.limit, "limit")
        estimate = self._estimate()
        over = estimate.value > limit.value
        if (estimate.shown > limit.shown) is not over:
            # a float printed briefly would contradict the verdict: print both exactly
            limit_text, estimate_text = limit.exact_text, estimate.exact_text
        else:
            limit_text, estimate_text = limit.text, estimate.text
        bound = (
            " (an upper bound: the real use may be lower)" if self.estimate_is_upper_bound else ""
        )
        shown = f"estimate {estimate_text} {self.unit}{bound}"
        approved = f"the approved {limit_text} {self.unit}"
        if over:
            reason = (
                f"{BUDGET_EXCEEDED}: review the plan or get the budget changed; {shown} is over "
                f"{approved}"
            )
            verdict = BUDGET_EXCEEDED
        else:
            reason = f"{WITHIN_BUDGET}: {shown} is within {approved}"
            verdict = WITHIN_BUDGET
        return BudgetVerdict(
            verdict, reason, limit.value, estimate.value, self.unit, self.estimate_is_upper_bound
        )

    def estimate_value(self) -> Fraction:
        """The estimate, exactly; a rendered string must hold exactly one number."""
        return self._estimate().value

    def _estimate(self) -> _Amount:
        if isinstance(self.estimate, str):
            return _parsed(self.estimate)
        return _amount(self.estimate, "estimate")


@dataclass(frozen=True)
class _Amount:
    """A checked limit or estimate.

    :param value: the number, exactly.
    :param text: the number as given: an int's digits, a string as written, a
        float's shortest repr (without a trailing ``.0``).
    :param shown: the value of ``text`` (differs from ``value`` for some floats).
    :param exact_text: the number, exactly, in decimal.
    """

    value: Fraction
    text: str
    shown: Fraction
    exact_text: str


def _amount(value: object, name: str) -> _Amount:
    """Check an int or float limit (``name='limit'``) or estimate.

    :param value: the number as given.
    :param name: ``limit`` or ``estimate``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        also = " or a string holding one" if name == "estimate" else ""
        raise BudgetError(
            f"{name} must be a number, got {_brief(value)}; give an int or a float{also}"
        )
    if isinstance(value, int):
        if value < 0:
            _refuse_sign(name, value)
        if value > MAX_AMOUNT:
            _refuse_size(name, value)
        text = str(value)
        return _checked(Fraction(value), text, text, name, value)
    if not math.isfinite(value):
        _refuse_sign(name, value)
    text = repr(value).removesuffix(".0")
    exact = Fraction(value)
    exact_text = format(Decimal(value), "f")
    return _checked(exact, text, exact_text, name, value, shown=Fraction(text))


def _parsed(rendered: str) -> _Amount:
    """Read a rendered estimate as the decimal number it spells, exactly.

    :param rendered: the estimate as rendered.
    """
    text = rendered.strip()
    if len(text) > MAX_TEXT:
        raise BudgetError(
            f"estimate must render to a number of at most {MAX_TEXT} characters, got "
            f"{_brief(rendered)} ({len(text)} characters); check what the template renders"
        )
    try:
        with localcontext(Context(traps=[InvalidOperation])):
            number = Decimal(text)
    except (InvalidOperation, ValueError):
        raise BudgetError(
            f"estimate must render to a number, got {_brief(rendered)}; render a number "
            "such as 180.5 or 1.8e2, since without an estimate the budget cannot be checked"
        ) from None
    if not number.is_finite() or number < 0:
        _refuse_sign("estimate", rendered)
    if number:
        if number.adjusted() >= _DIGITS:
            _refuse_size("estimate", rendered)
        if number.adjusted() < -_DIGITS:
            _refuse_small("estimate", rendered)
    exact = Fraction(number)
    return _checked(exact, text, text, "estimate", rendered)


def _checked(
    exact: Fraction,
    text: str,
    exact_text: str,
    name: str,
    given: object,
    *,
    shown: Fraction | None = None,
) -> _Amount:
    """Refuse an amount out of bounds, or return it.

    The bounds apply to the number as given: the float ``1e30`` is accepted,
    although its exact value is a little over :data:`MAX_AMOUNT`.

    :param exact: the amount.
    :param text: the amount as given.
    :param exact_text: the amount, exactly, in decimal.
    :param name: ``limit`` or ``estimate``.
    :param given: the value as given, for messages.
    :param shown: the value of ``text``, when it is not ``exact``.
    """
    written = exact if shown is None else shown
    if written < 0 or (name == "limit" and written == 0):
        _refuse_sign(name, given)
    if written > MAX_AMOUNT:
        _refuse_size(name, given)
    if 0 < written < _SMALLEST:
        _refuse_small(name, given)
    return _Amount(exact, text, written, exact_text)


def _refuse_sign(name: str, given: object) -> None:
    """Refuse a value that is not finite, negative, or a limit of 0.

    :param name: ``limit`` or ``estimate``.
    :param given: the value as given.
    """
    if name == "limit":
        wanted, advice = "a positive", "set the approved amount, e.g. 200"
    else:
        wanted, advice = (
            "a non-negative",
            "check where the estimate comes from, e.g. the dry run's output",
        )
    raise BudgetError(f"{name} must be {wanted} finite number, got {_brief(given)}; {advice}")


def _refuse_size(name: str, given: object) -> None:
    """Refuse a value beyond :data:`MAX_AMOUNT`.

    :param name: ``limit`` or ``estimate``.
    :param given: the value as given.
    """
    raise BudgetError(
        f"{name} must be at most {_BOUND}, got {_brief(given)}; count in a larger unit "
        "(e.g. GB, not bytes) or check where the number comes from"
    )


def _refuse_small(name: str, given: object) -> None:
    """Refuse a non-zero value below the reciprocal of :data:`MAX_AMOUNT`.

    :param name: ``limit`` or ``estimate``.
    :param given: the value as given.
    """
    lowest = f"at least {_SMALLEST_TEXT}" if name == "limit" else f"0 or at least {_SMALLEST_TEXT}"
    raise BudgetError(
        f"{name} must be {lowest}, got {_brief(given)}; count in a smaller unit "
        "(e.g. MB, not TB) or check where the number comes from"
    )


def _brief(value: object) -> str:
    """``value`` for a message, at most about 60 characters.

    :param value: anything given as a limit or an estimate.
    """
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        digits = int(value.bit_length() * math.log10(2)) + 1
        return f"{'a negative' if value < 0 else 'an'} integer of about {digits} digits"
    try:
        return _BRIEF.repr(value)
    except ValueError:  # e.g. an int too long to print, inside a container
        return f"a {type(value).__name__}"


def _json_number(value: Fraction) -> int | float:
    """``value`` for JSON: an int when whole, else the nearest float.

    :param value: a checked amount (within :data:`MAX_AMOUNT`, so the float is finite).
    """
    return int(value) if value.denominator == 1 else float(value)
