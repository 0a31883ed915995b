"""Airflow's Deadline Alerts as the delivery deadline: the same instant Airflow computes.

A DAG's ``DeadlineAlert`` (a reference plus an interval) makes Airflow store a
need-by time for each run when the run is created (the ``deadline`` table), and
run the alert's callback if the run has not ended by then. Reading the alert
here lets one definition drive both that alert and the retry decisions.

A task cannot read that stored row in Airflow 3.3: the Task SDK's Execution API
has no route for it, and the REST API has no public one. So the instant is
computed here with Airflow's own rule, ``reference + interval``, but only for
the references whose instant is fixed when the run is created and never moved:

* ``DeadlineReference.DAGRUN_LOGICAL_DATE``: the run's logical date;
* ``DeadlineReference.FIXED_DATETIME(dt)``: ``dt`` as Airflow stores it, a POSIX
  timestamp read back in UTC.

Every other reference is refused with its name rather than guessed: the run's
``queued_at`` is not in a task's context and Airflow moves that deadline each
time the run is queued again; an average runtime is taken from past runs at the
moment the run was created; a custom reference runs its own code against
Airflow's database; a ``VariableInterval`` is read when the run is created and
may have changed since. Nothing here imports Airflow: an alert is read through
the attributes and ``serialize_reference()`` the Task SDK gives it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import pendulum

from airflow_retrywindow import airflow_internals
from airflow_retrywindow.exceptions import ClockError, DeadlineError
from airflow_retrywindow.timing.clock import require_aware

LOGICAL_DATE = "DagRunLogicalDateDeadline"
FIXED_DATETIME = "FixedDatetimeDeadline"
QUEUED_AT = "DagRunQueuedAtDeadline"
AVERAGE_RUNTIME = "AverageRuntimeDeadline"

#: the reference class names as a DAG author writes them
PUBLIC_NAMES = {
    LOGICAL_DATE: "DeadlineReference.DAGRUN_LOGICAL_DATE",
    FIXED_DATETIME: "DeadlineReference.FIXED_DATETIME",
    QUEUED_AT: "DeadlineReference.DAGRUN_QUEUED_AT",
    AVERAGE_RUNTIME: "DeadlineReference.AVERAGE_RUNTIME",
}
#: why a built-in reference cannot be computed in a task, as Airflow would
_CANNOT = {
    QUEUED_AT: (
        "a task's context has no queued_at, and Airflow moves this deadline each time "
        "the run is queued again, as on a clear"
    ),
    AVERAGE_RUNTIME: (
        "Airflow takes it from the durations of past runs at the moment the run is "
        "created, which cannot be repeated later"
    ),
}
_USE_INSTEAD = (
    "use DeadlineReference.DAGRUN_LOGICAL_DATE or DeadlineReference.FIXED_DATETIME, "
    "or a Deadline constructor such as Deadline.after_data_interval_end(...)"
)


@dataclass(frozen=True)
class AlertRule:
    """The parts of one ``DeadlineAlert`` that decide its instant.

    :param name: the alert's name, if it has one.
    :param reference: ``DagRunLogicalDateDeadline`` or ``FixedDatetimeDeadline``.
    :param interval: added to the reference's instant (may be negative, as in Airflow).
    :param fixed: the fixed instant of a ``FIXED_DATETIME`` reference, as Airflow stores it.
    """

    name: str | None
    reference: str
    interval: timedelta
    fixed: pendulum.DateTime | None = None

    @classmethod
    def of(cls, alert: object) -> AlertRule:
        """Read an Airflow ``DeadlineAlert``; refuse what cannot be computed exactly.

        :param alert: a ``DeadlineAlert`` of the Task SDK.
        """
        reference = getattr(alert, "reference", None)
        interval = getattr(alert, "interval", None)
        serialize = getattr(reference, "serialize_reference", None)
        if reference is None or interval is None or not callable(serialize):
            raise DeadlineError(
                "deadline alert must be an Airflow DeadlineAlert (reference, interval and "
                f"callback), got {alert!r}"
            )
        name = getattr(alert, "name", None)
        serialized = serialize()
        kind = _reference_kind(reference, serialized, name)
        if not isinstance(interval, timedelta):
            raise DeadlineError(
                f"deadline alert {_label(name)}: interval {interval!r} is not a timedelta; "
                "Airflow reads a VariableInterval when the run is created and the Variable "
                "may have changed since, so the instant cannot be repeated. Give a timedelta"
            )
        fixed = _fixed_instant(reference, serialized, name) if kind == FIXED_DATETIME else None
        return cls(name=name, reference=kind, interval=interval, fixed=fixed)

    def instant(self, context: Mapping[str, Any]) -> pendulum.DateTime:
        """The need-by time Airflow computes for the run of ``context``, in UTC."""
        base = self.fixed if self.fixed is not None else _logical_date(context, self.name)
        return base + self.interval

    def describe(self) -> str:
        """The alert in words, for the evidence."""
        reference = PUBLIC_NAMES[self.reference]
        if self.fixed is not None:
            reference = f"{reference}({self.fixed.isoformat()})"
        sign = "-" if self.interval < timedelta(0) else "+"
        return (
            f"Airflow deadline alert {_label(self.name)}: {reference} {sign} {abs(self.interval)}"
        )


def pick_alert(dag: object, name: str | None) -> object:
    """The DAG's deadline alert called ``name``, or its only one when ``name`` is ``None``.

    :param dag: the run's DAG (the context's ``dag``).
    :param name: the alert's ``name``.
    """
    dag_id = getattr(dag, "dag_id", None)
    if dag_id is None:
        raise DeadlineError(
            "the task context has no DAG, so its deadline alerts cannot be read; "
            "pass the DeadlineAlert itself: Deadline.from_alert(alert)"
        )
    alerts = dag_alerts(dag)
    if name is None:
        if len(alerts) == 1:
            return alerts[0]
        raise DeadlineError(
            f"DAG {dag_id!r} has {len(alerts)} deadline alerts ({_names(alerts)}); "
            "name the one that is the delivery deadline: Deadline.dag_alert('<name>')"
        )
    named = [alert for alert in alerts if getattr(alert, "name", None) == name]
    if len(named) != 1:
        found = "no" if not named else f"{len(named)}"
        raise DeadlineError(
            f"DAG {dag_id!r} has {found} deadline alerts named {name!r} "
            f"(its alerts: {_names(alerts)}); name exactly one"
        )
    return named[0]


def dag_alerts(dag: object) -> Sequence[object]:
    """The DAG's deadline alerts; the Task SDK keeps a list, or ``None`` for none."""
    alerts = getattr(dag, "deadline", None)
    if alerts is None:
        return []
    return list(alerts) if isinstance(alerts, (list, tuple)) else [alerts]


def belongs_to(alert: object, dag: object) -> bool:
    """Whether ``alert`` is one of ``dag``'s alerts, so that Airflow computes its instant.

    Alerts match when they are the same object or agree on everything that
    decides the instant (name, reference, interval); ``DeadlineAlert`` equality
    alone would take two different fixed datetimes for the same alert.
    """
    return any(
        own is alert or _instant_parts(own) == _instant_parts(alert) for own in dag_alerts(dag)
    )


def _instant_parts(alert: object) -> tuple[object, ...]:
    reference = getattr(alert, "reference", None)
    serialize = getattr(reference, "serialize_reference", None)
    serialized = serialize() if callable(serialize) else None
    return (getattr(alert, "name", None), serialized, getattr(alert, "interval", None))


def _reference_kind(reference: object, serialized: object, name: str | None) -> str:
    kind = serialized.get("reference_type") if isinstance(serialized, dict) else None
    builtin = _builtin(reference)
    if builtin and kind in (LOGICAL_DATE, FIXED_DATETIME):
        return str(kind)
    shown = PUBLIC_NAMES.get(str(kind), str(kind)) if builtin else type(reference).__qualname__
    why = _CANNOT.get(str(kind)) if builtin else None
    why = why or "a custom reference is evaluated by its own code against Airflow's database"
    raise DeadlineError(
        f"deadline alert {_label(name)}: its reference {shown} cannot be computed the way "
        f"Airflow does in a task ({why}); {_USE_INSTEAD}"
    )


def _builtin(reference: object) -> bool:
    """Whether ``reference`` is one of the Task SDK's own references, by its exact type.

    A subclass of one of them is custom code: it is evaluated its own way.
    """
    from airflow_retrywindow.version_compat import builtin_deadline_references

    return type(reference) in builtin_deadline_references()


def _fixed_instant(reference: object, serialized: Any, name: str | None) -> pendulum.DateTime:
    # Airflow stores the datetime's POSIX timestamp; a naive datetime's timestamp
    # depends on the local zone of whichever process reads it, so it is refused
    given = airflow_internals.fixed_deadline_datetime(reference)
    try:
        require_aware(given, "FIXED_DATETIME")
    except ClockError as error:
        raise DeadlineError(f"deadline alert {_label(name)}: {error}") from None
    # the same arithmetic as Airflow's timezone.from_timestamp (microsecond rounding included)
    stored = datetime.fromtimestamp(serialized["datetime"], tz=timezone.utc)
    return pendulum.instance(stored).in_timezone("UTC")


def _logical_date(context: Mapping[str, Any], name: str | None) -> pendulum.DateTime:
    value = context.get("logical_date")
    if value is None:
        value = getattr(context.get("dag_run"), "logical_date", None)
    if value is None:
        raise DeadlineError(
            f"deadline alert {_label(name)}: the run has no logical date, so Airflow creates "
            "no deadline for it from DeadlineReference.DAGRUN_LOGICAL_DATE; give this DAG's "
            "runs a logical date or use another Deadline"
        )
    return require_aware(value, "logical_date")


def _label(name: str | None) -> str:
    return repr(name) if name else "(unnamed)"


def _names(alerts: Sequence[object]) -> str:
    if not alerts:
        return "none"
    return ", ".join(_label(getattr(alert, "name", None)) for alert in alerts)
