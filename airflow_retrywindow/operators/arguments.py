"""The checks of the gate operator's and the sensor's constructor arguments.

Each checker raises ``ValueError`` with the message a DAG author sees when the
operator is built (:class:`~airflow_retrywindow.operators.retry_window_mixin.RetryWindowMixin`,
the gate and the sensor call them). Bounds are the model's
(:mod:`~airflow_retrywindow.model.bounds`) and the configuration's
(:mod:`~airflow_retrywindow.configuration`).

Like :mod:`~airflow_retrywindow.gate.run`, importing this imports no Airflow.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from airflow_retrywindow import configuration
from airflow_retrywindow.gate.budget import Budget
from airflow_retrywindow.gate.estimates import GivenEstimate
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

#: what ``guard`` may be: target ids, or guarded task id -> the target id(s) it repeats
GuardArgument = Collection[str] | Mapping[str, str | Collection[str]] | None

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


def target_argument(value: object, sensor_id: str) -> str:
    """Check the sensor's ``target``: one task id, never the sensor itself.

    :param value: what the DAG author passed.
    :param sensor_id: the sensor's task id.
    """
    if not isinstance(value, str) or not value:
        raise ValueError(f"target must be a task id, got {value!r}")
    if value == sensor_id:
        raise ValueError(f"target: {value!r} cannot decide about itself")
    return value


def deferrable_argument(value: object, mode: str) -> bool:
    """Check the sensor's ``deferrable``: a switch, and off in ``reschedule`` mode.

    :param value: what the DAG author passed.
    :param mode: the sensor's ``mode``.
    """
    deferrable = flag_argument(value, "deferrable")
    if deferrable and mode == "reschedule":
        raise ValueError(
            "mode='reschedule' needs deferrable=False; a deferrable sensor waits in the "
            "triggerer instead"
        )
    return deferrable


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


def guard_argument(
    guard: GuardArgument, targets: Mapping[str, Any], gate_id: str
) -> dict[str, tuple[str, ...]]:
    """``guard`` as guarded task id -> the target ids it depends on."""
    if guard is None:
        return {task_id: (task_id,) for task_id in targets}
    if isinstance(guard, str):
        raise ValueError(f"guard must be a list of task ids or a mapping, got the string {guard!r}")
    pairs: dict[str, tuple[str, ...]] = {}
    if isinstance(guard, Mapping):
        for task_id, depends in guard.items():
            ids = (depends,) if isinstance(depends, str) else tuple(depends)
            pairs[task_id] = ids
    else:
        pairs = {task_id: (task_id,) for task_id in guard}
    for task_id, depends in pairs.items():
        if not isinstance(task_id, str) or not task_id:
            raise ValueError(f"guard: task ids must be non-empty strings, got {task_id!r}")
        if task_id == gate_id:
            raise ValueError(f"guard: gate {gate_id!r} cannot guard itself")
        if not depends:
            raise ValueError(f"guard[{task_id!r}] names no target")
        unknown = [target for target in depends if target not in targets]
        if unknown:
            raise ValueError(
                f"guard[{task_id!r}] depends on {', '.join(map(repr, unknown))}, which "
                f"{'is' if len(unknown) == 1 else 'are'} not among the targets "
                f"({', '.join(sorted(targets))}); add {'it' if len(unknown) == 1 else 'them'} "
                "to targets"
            )
    return pairs


def approval_argument(
    approval: object,
    approval_targets: object,
    targets: Mapping[str, Any],
    guard: Mapping[str, Any],
    gate_id: str,
) -> tuple[str | None, tuple[str, ...]]:
    """``approval`` and the targets it may release (every target when not given)."""
    if approval is None:
        if approval_targets is not None:
            raise ValueError(
                "approval_targets needs approval: name the approval task whose answer may "
                "release them"
            )
        return None, ()
    if not isinstance(approval, str) or not approval:
        raise ValueError(f"approval must be the task id of an approval task, got {approval!r}")
    if approval == gate_id:
        raise ValueError(f"approval: gate {gate_id!r} cannot approve its own refusals")
    if approval in targets or approval in guard:
        kind = "a target" if approval in targets else "a guarded task"
        raise ValueError(
            f"approval: {approval!r} is {kind} of gate {gate_id!r}; name the task that asks "
            "a person, not the work it approves"
        )
    if approval_targets is None:
        return approval, tuple(targets)
    if isinstance(approval_targets, str) or not isinstance(approval_targets, Collection):
        raise ValueError(f"approval_targets must be a list of target ids, got {approval_targets!r}")
    chosen = tuple(dict.fromkeys(approval_targets))
    if not chosen:
        raise ValueError(
            "approval_targets names no target; leave it out to let an approval release any target"
        )
    unknown = [target for target in chosen if target not in targets]
    if unknown:
        raise ValueError(
            f"approval_targets names {', '.join(map(repr, unknown))}, not among the targets "
            f"({', '.join(sorted(targets))})"
        )
    return approval, chosen


def _is_xcom_arg(value: object) -> bool:
    if "airflow.sdk" not in sys.modules:
        return False  # no XComArg exists in a process that never loaded the Task SDK
    from airflow.sdk import XComArg

    return isinstance(value, XComArg)
