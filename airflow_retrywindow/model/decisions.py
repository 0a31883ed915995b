"""The answers the gate can give for one task."""

from __future__ import annotations

# An Enum, not a class of constants: callers look members up by value and iterate
# them. It costs the command line's start little: re, which json imports, imports enum.
from enum import Enum


class Decision(str, Enum):
    """The gate's answer for one task, listed in precedence order.

    The first seven refuse to schedule anything; the last three come with a
    backoff, an earliest start and an estimated finish.
    """

    REFRESH_OBSERVATION = "refresh-observation"
    OBSERVE_RUNNING = "observe-running"
    RECONCILE_REMOTE = "reconcile-remote"
    VALIDATE_OUTPUT = "validate-output"
    REPAIR_CAUSE = "repair-cause"
    ATTEMPTS_EXHAUSTED = "attempts-exhausted"
    RECONCILE_EFFECTS = "reconcile-effects"
    DEADLINE_INFEASIBLE = "deadline-infeasible"
    WAIT_BACKOFF = "wait-backoff"
    RETRY_ELIGIBLE = "retry-eligible"

    def __str__(self) -> str:
        return self.value

    @property
    def scheduled(self) -> bool:
        """Whether the decision carries a backoff, an earliest start and a finish."""
        return self in _SCHEDULED

    @property
    def allows_retry(self) -> bool:
        """Whether another attempt may start, now or once the backoff has passed."""
        return self is Decision.WAIT_BACKOFF or self is Decision.RETRY_ELIGIBLE

    @property
    def allows_now(self) -> bool:
        """Whether another attempt may start now."""
        return self is Decision.RETRY_ELIGIBLE

    @property
    def repeats_nothing(self) -> bool:
        """Whether a next try could only look at work that exists: a job still running
        (reconnect to it) or one that succeeded (collect its result)."""
        return self is Decision.OBSERVE_RUNNING or self is Decision.VALIDATE_OUTPUT

    @classmethod
    def named(cls, value: object) -> Decision | None:
        """The decision a stored text names, ``None`` for any other value."""
        return _BY_VALUE.get(value) if isinstance(value, str) else None


_SCHEDULED = frozenset(
    {Decision.DEADLINE_INFEASIBLE, Decision.WAIT_BACKOFF, Decision.RETRY_ELIGIBLE}
)
_BY_VALUE = {decision.value: decision for decision in Decision}

#: what a gate records for a target with no try in the run yet: a first run is not
#: a retry, so there is nothing for the model to decide
NOT_ATTEMPTED = "not-attempted"


def lets_run_now(decision: object) -> bool:
    """Whether a gate's recorded decision lets the guarded work run now.

    :param decision: a stored decision: the model's, or :data:`NOT_ATTEMPTED`.
    """
    found = Decision.named(decision)
    return decision == NOT_ATTEMPTED or (found is not None and found.allows_now)
