"""An approved resource budget for the next attempt, and the verdict on its estimate.

A bytes-billed cap blocks any attempt whose estimate is over it. ``LIMIT`` in a
query does not reduce the bytes read, so only an estimate (a dry run, say) says
what an attempt will cost. The gate compares and reports; it never raises the
limit. When the estimate is an upper bound (clustered tables, partition pruning
decided at run time), say so: the uncertainty goes into the evidence.

Templating: the gate renders ``estimate`` when it is a string, so it can come
from a dry-run task, e.g. ``"{{ ti.xcom_pull('dry_run') }}"``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any

#: the verdicts, as they appear in the decision record
WITHIN_BUDGET = "within-budget"
BUDGET_EXCEEDED = "budget-exceeded"

_UNIT = re.compile(r"[A-Za-z][A-Za-z0-9 _./-]{0,31}")


class BudgetError(ValueError):
    """A budget argument, or a rendered estimate, that cannot be used."""


@dataclass(frozen=True)
class BudgetVerdict:
    """How an estimate compares with the approved limit.

    :param verdict: ``within-budget`` or ``budget-exceeded``.
    :param reason: one line naming both numbers and the unit.
    :param limit: the approved limit.
    :param estimate: the estimate that was compared.
    :param unit: what both count, e.g. ``bytes``.
    :param upper_bound: whether the estimate is an upper bound.
    """

    verdict: str
    reason: str
    limit: float
    estimate: float
    unit: str
    upper_bound: bool

    @property
    def blocks(self) -> bool:
        """Whether the verdict refuses the attempt."""
        return self.verdict == BUDGET_EXCEEDED

    def as_dict(self) -> dict[str, Any]:
        """The verdict as a JSON object for the decision record."""
        return {
            "verdict": self.verdict,
            "reason": self.reason,
            "limit": _plain(self.limit),
            "estimate": _plain(self.estimate),
            "unit": self.unit,
            "estimateIsUpperBound": self.upper_bound,
        }


@dataclass(frozen=True)
class Budget:
    """The approved limit for one attempt and the estimate of what it will use.

    :param limit: the approved limit, a positive number (e.g. 200 for 200 GB).
    :param estimate: the estimate for the next attempt: a number, or a string
        holding one (templated by the gate, e.g. from a dry run's XCom).
    :param unit: what both numbers count, e.g. ``"bytes"`` or ``"GB"``.
    :param estimate_is_upper_bound: ``True`` when the estimate may overstate the
        real use (clustered tables); recorded, never used to relax the check.
    """

    limit: float
    estimate: float | str
    unit: str
    estimate_is_upper_bound: bool = False

    def __post_init__(self) -> None:
        _number(self.limit, "limit", positive=True)
        if not isinstance(self.estimate, str):
            _number(self.estimate, "estimate", positive=False)
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
            raise BudgetError(f"estimate must be a number, got {estimate!r}")
        return replace(self, estimate=estimate)

    def verdict(self) -> BudgetVerdict:
        """Compare the estimate with the limit; a string estimate must hold a number."""
        estimate = self.estimate_value()
        limit = float(self.limit)
        bound = (
            " (an upper bound: the real use may be lower)" if (self.estimate_is_upper_bound) else ""
        )
        shown = f"estimate {_plain(estimate)} {self.unit}{bound}"
        if estimate > limit:
            reason = (
                f"{BUDGET_EXCEEDED}: review the plan or get the budget changed; {shown} is over "
                f"the approved {_plain(limit)} {self.unit}"
            )
            verdict = BUDGET_EXCEEDED
        else:
            reason = f"{WITHIN_BUDGET}: {shown} is within the approved {_plain(limit)} {self.unit}"
            verdict = WITHIN_BUDGET
        return BudgetVerdict(
            verdict, reason, limit, estimate, self.unit, self.estimate_is_upper_bound
        )

    def estimate_value(self) -> float:
        """The estimate as a number; a rendered string must hold exactly one."""
        value = self.estimate
        if isinstance(value, str):
            text = value.strip()
            try:
                value = float(text)
            except ValueError:
                raise BudgetError(
                    f"estimate must render to a number, got {self.estimate!r}; "
                    "without an estimate the budget cannot be checked"
                ) from None
        return _number(value, "estimate", positive=False)


def _number(value: object, name: str, *, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BudgetError(f"{name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number) or number < 0 or (positive and number == 0):
        wanted = "a positive" if positive else "a non-negative"
        raise BudgetError(f"{name} must be {wanted} finite number, got {value!r}")
    return number


def _plain(value: float) -> int | float:
    return int(value) if value == int(value) else value
