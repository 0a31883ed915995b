"""The constructor arguments the gate operator and the sensor share, checked once.

Both decide the targets of their own DAG run the same way, so both take the same
observations, budget, unit of work, observation age, API connection and skipping
rule, template the same fields and render a budget's estimate the same way. Both
take a target's estimate and the deadline from its ``RetryWindowPolicy`` when not
given them (:mod:`~airflow_retrywindow.gate.targets`).
:class:`RetryWindowArguments` holds that part; each checker raises ``ValueError``
with the message a DAG author sees when the operator is built. Bounds are the
model's (:mod:`~airflow_retrywindow.model.bounds`).

Like :mod:`~airflow_retrywindow.gate.run`, importing this imports no Airflow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from airflow_retrywindow import configuration
from airflow_retrywindow.gate.budget import Budget
from airflow_retrywindow.gate.run import GateSettings
from airflow_retrywindow.gate.targets import Estimates, GivenEstimate, resolve_estimates
from airflow_retrywindow.model.bounds import MAX_OBSERVATION_AGE
from airflow_retrywindow.timing.clock import as_timedelta, bounded_seconds, seconds_down
from airflow_retrywindow.timing.deadline import Deadline
from airflow_retrywindow.timing.work import EstimateOverride, Work

if TYPE_CHECKING:
    import jinja2
    from airflow.sdk import BaseOperator, Context

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


class RetryWindowArguments(_Operator):
    """What the gate operator and the sensor share: arguments, templating, the settings.

    Put it before the Airflow operator class among the bases, so that its
    attributes and :meth:`render_template` take precedence. The operator checks
    its targets and ``deadline`` itself (the gate checks ``guard`` right after
    them), then calls :meth:`_set_gate_arguments` from its ``__init__``.
    """

    template_fields: Sequence[str] = ("observations", "budget", "work_unit")
    template_fields_renderers: ClassVar[dict[str, str]] = {
        "observations": "json",
        "work_unit": "json",
    }
    ui_color = "#f6e7c8"
    inherits_from_skipmixin = True

    #: the deadline given, or ``None`` to take the targets' policies'
    deadline: Deadline | None

    def _set_gate_arguments(
        self,
        *,
        observations: object,
        budget: object,
        work_unit: object,
        max_observation_age: object,
        airflow_conn_id: object,
        ignore_downstream_trigger_rules: object,
        page_size: object,
        api_timeout: object,
    ) -> None:
        """Check the shared arguments, in this order, and keep them.

        :param observations: explicit observations (templated).
        :param budget: an approved resource budget, or ``None``.
        :param work_unit: the unit of work (templated).
        :param max_observation_age: how old an observation may be.
        :param airflow_conn_id: the connection to Airflow's REST API.
        :param ignore_downstream_trigger_rules: whether skipping reaches past the direct
            downstream tasks.
        :param page_size: rows asked for per API page.
        :param api_timeout: seconds to wait for each API request.
        """
        self.observations = observations_argument(observations)
        self.budget = budget_argument(budget)
        self.work_unit = work_unit_argument(work_unit)
        self.max_observation_age = observation_age_argument(max_observation_age)
        self.airflow_conn_id = conn_id_argument(airflow_conn_id)
        self.ignore_downstream_trigger_rules = flag_argument(
            ignore_downstream_trigger_rules, "ignore_downstream_trigger_rules"
        )
        self.page_size = page_size_argument(page_size)
        self.api_timeout = timeout_argument(api_timeout)

    def render_template(
        self,
        content: Any,
        context: Context,
        jinja_env: jinja2.Environment | None = None,
        seen_oids: set[int] | None = None,
    ) -> Any:
        """Render a budget's estimate; everything else as Airflow does."""
        if isinstance(content, Budget):
            estimate = super().render_template(content.estimate, context, jinja_env, seen_oids)
            return content.with_estimate(estimate)
        return super().render_template(content, context, jinja_env, seen_oids)

    def _estimates(self, targets: Mapping[str, GivenEstimate], kind: str) -> Estimates:
        """Each target's estimate and the deadline, from the arguments and the policies.

        :param targets: task id -> what this task was given for it.
        :param kind: ``gate`` or ``sensor``, for the messages.
        :raises RetryWindowGateError: when they cannot be settled.
        """
        return resolve_estimates(self.dag, targets, self.deadline, kind=kind)

    def _hold_back(self, ti: Any, tasks: Sequence[Any]) -> None:
        """Skip the downstream ``tasks`` that may not run, then end this task.

        Outside a mapped task group this is ``SkipMixin.skip``. Inside one (the
        deciding task instance has a map index), Airflow 3.3.2 does not skip the
        downstream tasks of one map index: ``SkipMixin`` leaves them to a check that
        looks the skip list up at map index -1 and so never finds it. The deciding
        task then skips itself instead: its ``all_success`` downstream tasks of the
        same map index are skipped by their trigger rule, every one of them, so a
        gate that would let some guarded tasks through holds them all (it fails
        closed).

        :param ti: the deciding task instance.
        :param tasks: the downstream tasks to skip, not empty.
        """
        if not tasks:
            return
        if int(getattr(ti, "map_index", -1)) < 0:
            self.skip(ti=ti, tasks=tasks)  # type: ignore[attr-defined]
            return
        from airflow.sdk.exceptions import AirflowSkipException

        names = ", ".join(task.task_id for task in tasks)
        raise AirflowSkipException(
            f"map index {ti.map_index} of {self.task_id} holds back {names}: skipped itself, "
            "so that its downstream tasks of this map index are skipped by their trigger rule"
        )

    def _gate_settings(self, estimates: Estimates) -> GateSettings:
        """The settings deciding the targets of this task's run, with this task's arguments.

        :param estimates: the settled estimates and deadline.
        """
        return GateSettings(
            targets=estimates.works,
            deadline=estimates.deadline,
            max_observation_age=self.max_observation_age,
            conn_id=self.airflow_conn_id,
            page_size=self.page_size,
            timeout=self.api_timeout,
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
