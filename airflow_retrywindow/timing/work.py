"""The estimate for one attempt of a unit of work, as the caller states it.

A task under a ``RetryWindowPolicy`` states its estimate there; a gate or sensor
takes it from the policy. :meth:`Work.override` is how a DAG author says, with a
reason, that a gate should decide on other values than the policy's.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import timedelta

from airflow_retrywindow.model.bounds import DURATION_LIMIT
from airflow_retrywindow.timing.clock import as_timedelta, bounded_seconds, seconds_up
from airflow_retrywindow.timing.deadline import Deadline

#: the longest reason an override may give: it is stored with every decision it touches
MAX_OVERRIDE_REASON = 200


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
        return _duration_seconds(self.duration)

    def validation_seconds(self) -> int:
        """The validation time in whole seconds, rounded up."""
        return _validation_seconds(self.validation)

    @classmethod
    def override(
        cls,
        *,
        reason: str,
        duration: timedelta | float | None = None,
        validation: timedelta | float | None = None,
        safe_repeat: bool | None = None,
        deadline: object = None,
    ) -> EstimateOverride:
        """Values a gate or sensor decides on instead of its target's ``RetryWindowPolicy``'s.

        Give only what differs; the rest is taken from the policy. For example,
        after a reconciliation found that a load appended its rows::

            targets={"load": Work.override(reason="INC-42: rows appended", safe_repeat=False)}

        :param reason: why the gate departs from the policy; recorded with every
            decision about the target.
        :param duration: the length of one attempt (timedelta or seconds).
        :param validation: the time to validate its output (timedelta or seconds).
        :param safe_repeat: the DAG author's claim that repeating is harmless.
        :param deadline: the deadline (anything ``Deadline.coerce`` accepts); a gate
            decides every target on one deadline, so it must be the gate's.
        """
        return EstimateOverride(
            reason=reason,
            duration=None if duration is None else as_timedelta(duration, "duration"),
            validation=None if validation is None else as_timedelta(validation, "validation"),
            safe_repeat=safe_repeat,
            deadline=None if deadline is None else Deadline.coerce(deadline),
        )


@dataclass(frozen=True)
class EstimateOverride:
    """Values a gate or sensor uses instead of its target's policy's, with the reason.

    Build it with :meth:`Work.override`. A value left ``None`` is the policy's.

    :param reason: why the gate departs from the policy (1 to
        :data:`MAX_OVERRIDE_REASON` characters).
    :param duration: the length of one attempt, or ``None``.
    :param validation: the time to validate its output, or ``None``.
    :param safe_repeat: the safe-repeat claim, or ``None``.
    :param deadline: the deadline, or ``None``.
    """

    reason: str
    duration: timedelta | None = None
    validation: timedelta | None = None
    safe_repeat: bool | None = None
    deadline: Deadline | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.reason, str) or not self.reason.strip():
            raise ValueError(
                "Work.override needs a reason: say why the gate departs from the task's "
                f"RetryWindowPolicy (e.g. what a reconciliation found), got {self.reason!r}"
            )
        if len(self.reason) > MAX_OVERRIDE_REASON:
            raise ValueError(
                f"Work.override: reason must be at most {MAX_OVERRIDE_REASON} characters, "
                f"got {len(self.reason)}"
            )
        if self.duration is not None:
            _duration_seconds(as_timedelta(self.duration, "duration"))
        if self.validation is not None:
            _validation_seconds(as_timedelta(self.validation, "validation"))
        if self.safe_repeat is not None and not isinstance(self.safe_repeat, bool):
            raise ValueError(
                f"Work.override: safe_repeat must be True, False or None, got {self.safe_repeat!r}"
            )
        if self.deadline is not None and not isinstance(self.deadline, Deadline):
            raise ValueError(
                f"Work.override: deadline must be a Deadline or None, got {self.deadline!r}"
            )
        if not self.overridden():
            raise ValueError(
                "Work.override overrides nothing: give at least one of duration, validation, "
                "safe_repeat or deadline"
            )

    def overridden(self) -> tuple[str, ...]:
        """The names of the values given, e.g. ``("safe_repeat",)``."""
        return tuple(
            field.name
            for field in fields(self)
            if field.name != "reason" and getattr(self, field.name) is not None
        )

    def over(self, policy: Work) -> Work:
        """The policy's estimate with the values of this override put in.

        :param policy: the estimate of the target's ``RetryWindowPolicy``.
        """
        return Work(
            duration=policy.duration if self.duration is None else self.duration,
            validation=policy.validation if self.validation is None else self.validation,
            safe_repeat=policy.safe_repeat if self.safe_repeat is None else self.safe_repeat,
        )


def _duration_seconds(duration: timedelta) -> int:
    return bounded_seconds(seconds_up(duration), "duration", low=1, high=DURATION_LIMIT)


def _validation_seconds(validation: timedelta) -> int:
    return bounded_seconds(seconds_up(validation), "validation", low=0, high=DURATION_LIMIT)
