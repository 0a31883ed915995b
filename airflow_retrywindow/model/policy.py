"""A retry policy and the backoff it prescribes."""

from __future__ import annotations

from dataclasses import dataclass

from airflow_retrywindow.model.rules import backoff_delay
from airflow_retrywindow.model.validation import POLICY_FIELDS, check_policy, fields


@dataclass(frozen=True)
class Policy:
    """How often a task may run and how long to wait between attempts.

    :param max_attempts: total attempts allowed, the first run included (1 to 10).
    :param initial_delay: the wait after the first attempt, in seconds.
    :param max_delay: the cap on any wait, from ``initial_delay`` to 1,000,000 s.
    :param multiplier: how much each wait grows over the one before (1 to 5).
    """

    max_attempts: int
    initial_delay: int
    max_delay: int
    multiplier: int

    def __post_init__(self) -> None:
        check_policy(self.max_attempts, self.initial_delay, self.max_delay, self.multiplier)

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
