"""The checks of the gate operator's and the sensor's constructor arguments.

Each checker raises ``ValueError`` with the message a DAG author sees when the
operator is built (:class:`~airflow_retrywindow.operators.retry_window_mixin.RetryWindowMixin`
calls them). Bounds are the model's (:mod:`~airflow_retrywindow.model.bounds`) and
the configuration's (:mod:`~airflow_retrywindow.configuration`).

Like :mod:`~airflow_retrywindow.gate.run`, importing this imports no Airflow.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_retrywindow import configuration
from airflow_retrywindow.gate.budget import Budget
from airflow_retrywindow.gate.targets import GivenEstimate
from airflow_retrywindow.model.bounds import MAX_OBSERVATION_AGE
from airflow_retrywindow.timing.clock import as_timedelta, bounded_seconds, seconds_down
from airflow_retrywindow.timing.deadline import Deadline
from airflow_retrywindow.timing.work import EstimateOverride, Work

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator

    # the mixin is only ever combined with an operator: type it as one
    _Operator = BaseOperator
else:
    _Operator = object

#: keys recommended for ``work_unit``; others are kept as given
WORK_UNIT_FIELDS = (
    "business_date",
    "input_partition",
    "transform_version",
    "destination",
    "remote_job_id",
)


def targets_argument(targets: object, gate_id: str) -> dict[str, GivenEstimate]:
    """Check ``targets``: at least one task id, never the gate itself.

    A list of task ids takes every estimate from the targets' policies; a mapping
    gives each task id a :class:`Work`, a ``Work.override(...)`` or ``None`` (the
    policy's).

    :param targets: what the DAG author passed.
    :param gate_id: the gate's task id.
    """
    if isinstance(targets, Mapping):
        pairs = list(targets.items())
    elif isinstance(targets, (list, tuple)):
        pairs = [(task_id, None) for task_id in targets]
        twice = sorted({str(task_id) for task_id in targets if targets.count(task_id) > 1})
        if twice:
            raise ValueError(f"targets names {', '.join(twice)} more than once")
    else:
        pairs = []
    if not pairs:
        raise ValueError(
            "targets must be a non-empty list of task ids (their estimates come from their "
            "RetryWindowPolicy) or a mapping of task id to Work(...), Work.override(...) or "
            f"None, got {targets!r}"
        )
    checked: dict[str, GivenEstimate] = {}
    for task_id, work in pairs:
        if not isinstance(task_id, str) or not task_id:
            raise ValueError(f"targets: task ids must be non-empty strings, got {task_id!r}")
        if task_id == gate_id:
            raise ValueError(f"targets: {gate_id!r} cannot decide about itself")
        checked[task_id] = work_argument(work, f"targets[{task_id!r}]")
    return checked


def work_argument(value: object, name: str) -> GivenEstimate:
    """Check one target's estimate: a :class:`Work`, a ``Work.override(...)`` or ``None``.

    :param value: what the DAG author passed.
    :param name: how it is named in the message, e.g. ``targets['load']``.
    """
    if value is None or isinstance(value, (Work, EstimateOverride)):
        return value
    raise ValueError(
        f"{name} must be a Work(duration=..., validation=..., safe_repeat=...), a "
        f"Work.override(reason=..., ...) or None (the task's RetryWindowPolicy's), got {value!r}"
    )


def deadline_argument(value: object) -> Deadline | None:
    """Check ``deadline``: anything ``Deadline.coerce`` accepts, or ``None`` (the policies')."""
    return None if value is None else Deadline.coerce(value)


def observations_argument(value: object) -> Any:
    """Check ``observations``: a mapping, its JSON text, a template, an XComArg or None."""
    if value is None or isinstance(value, (str, Mapping)) or _is_xcom_arg(value):
        return value
    raise ValueError(
        "observations must be a mapping of task id to observation, its JSON text or a "
        f"template, got {value!r}"
    )


def work_unit_argument(value: object) -> Mapping[str, Any] | str | None:
    """Check ``work_unit``: a mapping of names to values, a template or an XComArg.

    The names recommended are :data:`WORK_UNIT_FIELDS`; others are kept as given.

    :param value: what the DAG author passed.
    """
    if value is None or isinstance(value, str) or _is_xcom_arg(value):
        return value  # type: ignore[return-value]
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise ValueError(
            "work_unit must be a mapping of names to values (e.g. business_date, "
            f"input_partition, transform_version, destination, remote_job_id), got {value!r}"
        )
    return value


def budget_argument(value: object) -> Budget | None:
    """Check ``budget``: a :class:`Budget` or None."""
    if value is not None and not isinstance(value, Budget):
        raise ValueError(
            f"budget must be a Budget(limit=..., estimate=..., unit=...), got {value!r}"
        )
    return value


def observation_age_argument(value: object) -> int:
    """Check ``max_observation_age`` (a timedelta or seconds) as whole seconds, rounded down."""
    age = seconds_down(as_timedelta(value, "max_observation_age"))
    return bounded_seconds(age, "max_observation_age", low=0, high=MAX_OBSERVATION_AGE)


def conn_id_argument(value: object) -> str:
    """Check ``airflow_conn_id``; ``None`` takes ``[retry_window] default_conn_id``."""
    if value is None:
        return configuration.default_conn_id()
    if not isinstance(value, str) or not value:
        raise ValueError(f"airflow_conn_id must be a connection id, got {value!r}")
    return value


def flag_argument(value: object, name: str) -> bool:
    """Check a switch such as ``deferrable``: ``True`` or ``False``, nothing truthy.

    :param value: what the DAG author passed.
    :param name: the argument's name, for the message.
    """
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value


def page_size_argument(value: object) -> int:
    """Check ``page_size``: rows per API page; ``None`` takes ``[retry_window] api_page_size``."""
    if value is None:
        return configuration.api_page_size()
    return configuration.checked_page_size(value, "page_size")


def timeout_argument(value: object) -> float:
    """Check ``api_timeout`` in seconds; ``None`` takes ``[retry_window] api_timeout``."""
    if value is None:
        return configuration.api_timeout()
    return configuration.checked_timeout(value, "api_timeout")


def _is_xcom_arg(value: object) -> bool:
    return type(value).__module__.startswith("airflow.sdk.definitions.xcom_arg")
