"""Delivery deadlines: when the output of a run is due.

A deadline is a small strategy object resolved against the task context at
decision time, so one DAG file serves every run. Choose one of the constructors::

    Deadline.at(pendulum.datetime(2026, 12, 2, 6, tz="Europe/Lisbon"))
    Deadline.after_data_interval_end(hours=6)
    Deadline.after_data_interval_start(hours=30)
    Deadline.daily_at("06:00", tz="Europe/Lisbon")
    Deadline.computed(lambda context: ...)
    Deadline.from_alert(positions_ready)      # an Airflow DeadlineAlert of the DAG
    Deadline.dag_alert("positions ready")     # the run's DAG's alert of that name
"""

from __future__ import annotations

import abc
import functools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pendulum
from pendulum.tz.exceptions import InvalidTimezone

from airflow_retrywindow.exceptions import ClockError, DeadlineError
from airflow_retrywindow.timing.clock import require_aware
from airflow_retrywindow.timing.deadline_alert import AlertRule, belongs_to, pick_alert

_WALL_CLOCK = re.compile(r"(?P<hour>[01]\d|2[0-3]):(?P<minute>[0-5]\d)")
#: the longest a deadline may lie after its data interval's start or end: delivery
#: deadlines are hours or days away, and the model's clock spans about 31 years
MAX_OFFSET = timedelta(days=366)
#: the offset units ``after_data_interval_*`` take, each with its largest value
_OFFSET_UNITS = {
    "weeks": MAX_OFFSET / timedelta(weeks=1),
    "days": float(MAX_OFFSET.days),
    "hours": MAX_OFFSET / timedelta(hours=1),
    "minutes": MAX_OFFSET / timedelta(minutes=1),
    "seconds": MAX_OFFSET.total_seconds(),
}


class Deadline(abc.ABC):
    """When the delivery is due. Build one with a classmethod constructor."""

    @abc.abstractmethod
    def resolve(self, context: Mapping[str, Any]) -> pendulum.DateTime:
        """The deadline of the run described by ``context``, an aware UTC datetime."""

    @abc.abstractmethod
    def describe(self) -> str:
        """How the deadline is defined, in words, for the evidence."""

    def problems_in(self, dag: object) -> list[str]:
        """What keeps this deadline from resolving in any run of ``dag``, found at parse time.

        Only a deadline read from the DAG's alerts can be checked without a run.

        :param dag: the DAG of the task or gate that uses this deadline.
        """
        return []

    @classmethod
    def at(cls, when: datetime) -> Deadline:
        """A fixed instant. Naive datetimes are refused.

        :param when: a timezone-aware datetime.
        """
        try:
            return _Fixed(require_aware(when, "deadline"))
        except ClockError as error:
            raise DeadlineError(str(error)) from None

    @classmethod
    def after_data_interval_end(cls, **offset: float) -> Deadline:
        """An offset after the run's data interval end, e.g. ``hours=6``.

        :param offset: ``timedelta`` keyword arguments (days, hours, minutes, seconds).
        """
        return _IntervalOffset("data_interval_end", _offset(offset, "after_data_interval_end"))

    @classmethod
    def after_data_interval_start(cls, **offset: float) -> Deadline:
        """An offset after the run's data interval start, e.g. ``hours=30``.

        :param offset: ``timedelta`` keyword arguments (days, hours, minutes, seconds).
        """
        return _IntervalOffset("data_interval_start", _offset(offset, "after_data_interval_start"))

    @classmethod
    def daily_at(cls, wall_clock: str, *, tz: str) -> Deadline:
        """The first ``wall_clock`` time in ``tz`` at or after the data interval end.

        For a daily run that is the morning after its business day. Local time is
        kept across daylight-saving changes. A wall-clock time that happens twice
        (clocks going back) resolves to its first occurrence; one that never
        happens (clocks going forward) resolves to the earlier of its two
        readings, one per offset. The gate never counts on time that is not there.

        :param wall_clock: ``"HH:MM"``, 24-hour.
        :param tz: an IANA timezone name, e.g. ``"Europe/Lisbon"``.
        """
        match = _WALL_CLOCK.fullmatch(wall_clock) if isinstance(wall_clock, str) else None
        if match is None:
            raise DeadlineError(f"wall_clock must be 'HH:MM' (24-hour), got {wall_clock!r}")
        if not isinstance(tz, str) or not tz.strip():
            raise DeadlineError(
                f"daily_at({wall_clock!r}, tz={tz!r}): tz must be an IANA timezone name such "
                f"as 'Europe/Lisbon', got {tz!r}"
            )
        try:
            pendulum.timezone(tz)
        except (InvalidTimezone, ValueError, TypeError, KeyError, OSError):
            raise DeadlineError(
                f"daily_at({wall_clock!r}, tz={tz!r}): tz must be an IANA timezone name such "
                f"as 'Europe/Lisbon', got {tz!r}"
            ) from None
        return _Daily(int(match["hour"]), int(match["minute"]), tz)

    @classmethod
    def computed(cls, function: Callable[[Mapping[str, Any]], datetime]) -> Deadline:
        """Whatever ``function(context)`` returns: it must be an aware datetime.

        :param function: called with the task context at decision time.
        """
        if not callable(function):
            raise DeadlineError(f"deadline function must be callable, got {function!r}")
        return _Computed(function)

    @classmethod
    def from_alert(cls, alert: object) -> Deadline:
        """The need-by time of an Airflow ``DeadlineAlert`` of the DAG, as Airflow computes it.

        One definition then drives both Airflow's deadline alert and the retry
        decisions. The alert is checked now: only ``DAGRUN_LOGICAL_DATE`` and
        ``FIXED_DATETIME`` references with a ``timedelta`` interval can be computed
        exactly as Airflow does; any other is refused with its name. At decision
        time the alert must be one of the run's DAG's alerts (``DAG(deadline=...)``),
        or there is no Airflow instant to agree with.

        :param alert: an ``airflow.sdk.DeadlineAlert``.
        """
        return _Alert(alert, AlertRule.of(alert))

    @classmethod
    def dag_alert(cls, name: str | None = None) -> Deadline:
        """The need-by time of the run's DAG's deadline alert, read at decision time.

        :param name: the alert's ``name``; ``None`` takes the DAG's only alert, and
            is refused when the DAG has several.
        """
        if name is not None and (not isinstance(name, str) or not name):
            raise DeadlineError(f"deadline alert name must be a non-empty string, got {name!r}")
        return _DagAlert(name)

    @classmethod
    def coerce(cls, value: object) -> Deadline:
        """Accept a :class:`Deadline`, an aware datetime, an Airflow ``DeadlineAlert``,
        or a callable of the context."""
        if isinstance(value, Deadline):
            return value
        if isinstance(value, datetime):
            return cls.at(value)
        if _looks_like_alert(value):
            return cls.from_alert(value)
        if callable(value):
            return cls.computed(value)
        raise DeadlineError(
            "deadline must be a Deadline, an aware datetime, an Airflow DeadlineAlert or a "
            f"callable of the task context, got {value!r}"
        )


def _callable_name(function: object) -> str:
    """A callable's name, never its ``repr``: a partial's arguments may hold secrets."""
    if isinstance(function, functools.partial):
        return f"functools.partial({_callable_name(function.func)}, ...)"
    name = getattr(function, "__qualname__", None)
    return name if isinstance(name, str) else f"a {type(function).__qualname__} object"


def _looks_like_alert(value: object) -> bool:
    # read without importing Airflow: a DeadlineAlert is a reference, an interval and a callback
    return all(hasattr(value, part) for part in ("reference", "interval", "callback"))


def _offset(offset: Mapping[str, float], where: str) -> timedelta:
    """The offset ``timedelta(**offset)``, each part and the whole checked, or a DeadlineError.

    :param offset: the keyword arguments as given.
    :param where: the constructor, for the message, e.g. ``after_data_interval_end``.
    """
    if not offset:
        raise DeadlineError(f"{where}() needs an offset, e.g. {where}(hours=6)")
    for name, value in offset.items():
        given = f"{where}({name}={value!r})"
        if name not in _OFFSET_UNITS:
            raise DeadlineError(
                f"{given}: {name!r} is not a deadline offset unit; use {', '.join(_OFFSET_UNITS)}"
            )
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise DeadlineError(f"{given}: {name} must be a number, got {type(value).__name__}")
        if not math.isfinite(value):
            raise DeadlineError(f"{given}: {name} must be a finite number")
        if value < 0:
            raise DeadlineError(f"{given}: {name} must not be negative")
        if value > _OFFSET_UNITS[name]:
            raise DeadlineError(
                f"{given}: the offset may be at most {MAX_OFFSET.days} days "
                f"({_OFFSET_UNITS[name]:g} {name})"
            )
    delta = timedelta(**offset)
    if delta > MAX_OFFSET:
        shown = ", ".join(f"{name}={value!r}" for name, value in offset.items())
        raise DeadlineError(
            f"{where}({shown}): the offset {delta} is longer than the {MAX_OFFSET.days} days "
            "a deadline may lie after its data interval"
        )
    return delta


def _interval_bound(context: Mapping[str, Any], name: str) -> pendulum.DateTime:
    value = context.get(name)
    if value is None:
        raise DeadlineError(
            f"the run has no {name} (asset-triggered or manual without a data interval); "
            "use Deadline.at(...) or Deadline.computed(...) for this DAG"
        )
    return require_aware(value, name)


@dataclass(frozen=True)
class _Fixed(Deadline):
    when: pendulum.DateTime

    def resolve(self, context: Mapping[str, Any]) -> pendulum.DateTime:
        return self.when

    def describe(self) -> str:
        return f"fixed at {self.when.isoformat()}"


@dataclass(frozen=True)
class _IntervalOffset(Deadline):
    bound: str
    offset: timedelta

    def resolve(self, context: Mapping[str, Any]) -> pendulum.DateTime:
        return _interval_bound(context, self.bound) + self.offset

    def describe(self) -> str:
        return f"{self.bound} + {self.offset}"


@dataclass(frozen=True)
class _Daily(Deadline):
    hour: int
    minute: int
    tz: str

    def resolve(self, context: Mapping[str, Any]) -> pendulum.DateTime:
        end = _interval_bound(context, "data_interval_end")
        day = end.in_timezone(self.tz).date()
        candidate = self._on(day)
        return candidate if candidate >= end else self._on(day.add(days=1))

    def _on(self, day: pendulum.Date) -> pendulum.DateTime:
        # fold=0 is the earlier reading of an ambiguous or non-existent local time
        local = pendulum.datetime(
            day.year, day.month, day.day, self.hour, self.minute, tz=self.tz, fold=0
        )
        return local.in_timezone("UTC")

    def describe(self) -> str:
        return f"first {self.hour:02d}:{self.minute:02d} {self.tz} at or after data_interval_end"


@dataclass(frozen=True)
class _Computed(Deadline):
    function: Callable[[Mapping[str, Any]], datetime]

    def resolve(self, context: Mapping[str, Any]) -> pendulum.DateTime:
        value = self.function(context)
        try:
            return require_aware(value, "the deadline function's result")
        except ClockError as error:
            raise DeadlineError(str(error)) from None

    def describe(self) -> str:
        return f"computed by {_callable_name(self.function)}"


@dataclass(frozen=True)
class _Alert(Deadline):
    alert: object
    rule: AlertRule

    def resolve(self, context: Mapping[str, Any]) -> pendulum.DateTime:
        dag = context.get("dag")
        if dag is not None and not belongs_to(self.alert, dag):
            raise DeadlineError(
                f"{self.rule.describe()} is not one of the deadline alerts of DAG "
                f"{getattr(dag, 'dag_id', dag)!r}, so Airflow computes no instant for it; "
                "add it to DAG(deadline=[...]) or use Deadline.dag_alert(name)"
            )
        return self.rule.instant(context)

    def describe(self) -> str:
        return self.rule.describe()

    def problems_in(self, dag: object) -> list[str]:
        if belongs_to(self.alert, dag):
            return []
        return [f"{self.rule.describe()} is not one of the DAG's deadline alerts"]


@dataclass(frozen=True)
class _DagAlert(Deadline):
    name: str | None

    def resolve(self, context: Mapping[str, Any]) -> pendulum.DateTime:
        return AlertRule.of(pick_alert(context.get("dag"), self.name)).instant(context)

    def problems_in(self, dag: object) -> list[str]:
        try:
            AlertRule.of(pick_alert(dag, self.name))
        except DeadlineError as error:
            return [str(error)]
        return []

    def describe(self) -> str:
        if self.name is None:
            return "the DAG's only Airflow deadline alert"
        return f"the DAG's Airflow deadline alert {self.name!r}"
