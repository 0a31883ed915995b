"""A retry policy and the backoff it prescribes."""

from __future__ import annotations

from airflow_retrywindow.model.rules import backoff_delay
from airflow_retrywindow.model.validation import POLICY_FIELDS, check_policy, fields
from airflow_retrywindow.model.value import Value


class Policy(Value):
    """How often a task may run and how long to wait between attempts.

    :param max_attempts: total attempts allowed, the first run included (1 to 10).
    :param initial_delay: the wait after the first attempt, in seconds.
    :param max_delay: the cap on any wait, from ``initial_delay`` to 1,000,000 s.
    :param multiplier: how much each wait grows over the one before (1 to 5).
    """

    __slots__ = ("initial_delay", "max_attempts", "max_delay", "multiplier")
    max_attempts: int
    initial_delay: int
    max_delay: int
    multiplier: int

    def __init__(
        self, max_attempts: int, initial_delay: int, max_delay: int, multiplier: int
    ) -> None:
        check_policy(max_attempts, initial_delay, max_delay, multiplier)
        self._set(
            max_attempts=max_attempts,
            initial_delay=initial_delay,
            max_delay=max_delay,
            multiplier=multiplier,
        )

    @classmethod
    def from_dict(cls, raw: object) -> Policy:
        """Read a policy from its JSON object.

        :param raw: ``{"maxAttempts", "initialDelay", "maxDelay", "multiplier"}``.
        :raises InvalidFixture: if the object or any value is invalid.
        """
        policy = fields(raw, "policy", POLICY_FIELDS)
        return cls(
            *check_policy(
                policy["maxAttempts"],
                policy["initialDelay"],
                policy["maxDelay"],
                policy["multiplier"],
            )
        )

    def to_dict(self) -> dict[str, object]:
        """The policy as its JSON object."""
        return {
            "maxAttempts": self.max_attempts,
            "initialDelay": self.initial_delay,
            "maxDelay": self.max_delay,
            "multiplier": self.multiplier,
        }


def backoff(policy: Policy, attempts: int) -> int:
    """The wait before the next attempt once ``attempts`` attempts have started.

    ``min(maxDelay, initialDelay * multiplier ** (attempts - 1))``, with no jitter.

    :param policy: the retry policy.
    :param attempts: attempts started so far (1 or more).
    """
    return backoff_delay(
        attempts,
        initial_delay=policy.initial_delay,
        max_delay=policy.max_delay,
        multiplier=policy.multiplier,
    )
