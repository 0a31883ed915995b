"""The answers the gate can give for one task."""

from __future__ import annotations

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


_SCHEDULED = frozenset(
    {Decision.DEADLINE_INFEASIBLE, Decision.WAIT_BACKOFF, Decision.RETRY_ELIGIBLE}
)
