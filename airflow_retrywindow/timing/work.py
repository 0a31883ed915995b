"""The estimate for one attempt of a unit of work, as the caller states it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from airflow_retrywindow.model.bounds import DURATION_LIMIT
from airflow_retrywindow.timing.clock import as_timedelta, bounded_seconds, seconds_up


@dataclass(frozen=True)
class Work:
    """How long one attempt takes, how long its output takes to validate, and
    whether the caller claims it is safe to repeat.

    Validation counts towards the deadline and cannot be left out to get a
    favourable answer: it must be given, ``timedelta(0)`` only when written so.
    ``safe_repeat`` is a claim by the caller; the gate records it as a claim and
    never as proof of idempotency.

    :param duration: the estimated length of one attempt (1 s to about 11 days).
    :param validation: the time to validate the attempt's output (0 s or more).
    :param safe_repeat: ``True`` when repeating cannot duplicate or corrupt output.
    """

    duration: timedelta
    validation: timedelta
    safe_repeat: bool

    def __post_init__(self) -> None:
        object.__setattr__(self, "duration", as_timedelta(self.duration, "duration"))
        object.__setattr__(self, "validation", as_timedelta(self.validation, "validation"))
        if not isinstance(self.safe_repeat, bool):
            raise ValueError(
                f"safe_repeat must be True or False (the caller's idempotency claim), "
                f"got {self.safe_repeat!r}"
            )
        self.duration_seconds()
        self.validation_seconds()

    def duration_seconds(self) -> int:
        """The duration in whole seconds, rounded up."""
        return bounded_seconds(seconds_up(self.duration), "duration", low=1, high=DURATION_LIMIT)

    def validation_seconds(self) -> int:
        """The validation time in whole seconds, rounded up."""
        return bounded_seconds(
            seconds_up(self.validation), "validation", low=0, high=DURATION_LIMIT
        )
