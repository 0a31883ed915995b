"""The model's clock: aware datetimes as whole seconds from a recorded origin.

The model works in integer seconds on one clock. Rounding is conservative, so that
rounding can never turn a refusal into a permission:

* instants that end a wait or a run (now, the end of an attempt) round **up**;
* the deadline and observation instants round **down**;
* durations round **up**; the allowed observation age rounds **down**.

Where two roundings meet (an end and its observation in one second, a backoff
ending in the second now rounds up into), :mod:`~airflow_retrywindow.timing.fixtures`
settles it so that the model's decision is never looser than the exact one.

The origin is a whole second and goes into the evidence, so a fixture can be
replayed offline and its numbers turned back into real times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

import pendulum

from airflow_retrywindow.exceptions import ClockError
from airflow_retrywindow.labels import UTC_ISO
from airflow_retrywindow.model.bounds import TIME_LIMIT

_MICROS = 1_000_000


def require_aware(value: object, name: str) -> pendulum.DateTime:
    """Return ``value`` as an aware pendulum datetime in UTC, or explain why not.

    :param value: the datetime to check.
    :param name: the argument or field it came from, for the message.
    """
    if not isinstance(value, datetime):
        raise ClockError(f"{name} must be a timezone-aware datetime, got {value!r}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ClockError(
            f"{name} must be timezone-aware, got the naive datetime {value.isoformat()}; "
            "attach a timezone, e.g. pendulum.datetime(..., tz='UTC')"
        )
    return pendulum.instance(value).in_timezone("UTC")


def _micros(delta: timedelta) -> int:
    # integer arithmetic: float seconds would misround near whole seconds
    return (delta.days * 86_400 + delta.seconds) * _MICROS + delta.microseconds


def seconds_up(delta: timedelta) -> int:
    """Whole seconds in ``delta``, rounded up (for durations)."""
    return -(-_micros(delta) // _MICROS)


def seconds_down(delta: timedelta) -> int:
    """Whole seconds in ``delta``, rounded down (for allowances such as an age limit)."""
    return _micros(delta) // _MICROS


@dataclass(frozen=True)
class Clock:
    """Maps real instants to the model's integer seconds and back.

    :param origin: second zero of the model's clock, an aware UTC datetime on a
        whole second.
    """

    origin: pendulum.DateTime

    @classmethod
    def starting_at(cls, preferred: datetime, *instants: datetime) -> Clock:
        """A clock whose origin is ``preferred``, or the earliest instant if that is earlier.

        The model rejects negative times, so the origin may not come after any
        instant the fixture holds.
        """
        earliest = min(
            (require_aware(t, "instant") for t in (preferred, *instants)),
        )
        return cls(origin=earliest.replace(microsecond=0))

    def _offset(self, when: datetime) -> int:
        micros = _micros(require_aware(when, "instant") - self.origin)
        if micros < 0:
            raise ClockError(f"{when.isoformat()} is before the clock origin {self.iso()}")
        return micros

    def _check(self, seconds: int, when: datetime) -> int:
        # the model accepts instants from 0 to TIME_LIMIT seconds after the origin
        if seconds > TIME_LIMIT:
            raise ClockError(
                f"{when.isoformat()} is more than {TIME_LIMIT} s after the clock origin "
                f"{self.iso()}; the model cannot represent it"
            )
        return seconds

    def up(self, when: datetime) -> int:
        """Seconds from the origin to ``when``, rounded up (ends of waits and runs, now)."""
        return self._check(-(-self._offset(when) // _MICROS), when)

    def down(self, when: datetime) -> int:
        """Seconds from the origin to ``when``, rounded down (deadlines, observations)."""
        return self._check(self._offset(when) // _MICROS, when)

    def at(self, seconds: int) -> pendulum.DateTime:
        """The real instant of the model time ``seconds``."""
        return self.origin.add(seconds=seconds)

    def iso(self) -> str:
        """The origin as an ISO 8601 UTC string, as stored in the evidence."""
        return self.origin.format(UTC_ISO)

    @classmethod
    def from_iso(cls, text: str) -> Clock:
        """The clock whose origin was recorded as ``text`` by :meth:`iso`."""
        try:
            # tz=None keeps a time without an offset naive, so it is refused below
            parsed = pendulum.parse(text, tz=None, strict=True)
        except ValueError:
            parsed = None
        if not isinstance(parsed, pendulum.DateTime):
            raise ClockError(
                f"clock origin must be an ISO 8601 date and time with an offset, got {text!r}"
            )
        return cls(origin=require_aware(parsed, "origin"))


def as_timedelta(value: object, name: str) -> timedelta:
    """A duration argument (a timedelta or a number of seconds) as a timedelta.

    :param value: the value the user passed.
    :param name: the argument name, for the message.
    """
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a timedelta or a number of seconds, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number of seconds, got {value!r}")
    return timedelta(seconds=value)


def bounded_seconds(seconds: int, name: str, *, low: int, high: int) -> int:
    """``seconds`` if it lies within ``low..high``, else a message naming ``name``."""
    if not low <= seconds <= high:
        raise ValueError(f"{name} must be from {low} to {high} seconds, got {seconds} s")
    return seconds
