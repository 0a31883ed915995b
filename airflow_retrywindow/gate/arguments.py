"""The constructor arguments the gate operator and the sensor share, checked once.

Both decide the targets of their own DAG run the same way, so both take the same
observations, budget, unit of work, observation age, API connection and skipping
rule, template the same fields and render a budget's estimate the same way.
:class:`RetryWindowArguments` holds that part; each checker raises ``ValueError``
with the message a DAG author sees when the operator is built. Bounds are the
model's (:mod:`~airflow_retrywindow.model.bounds`).

Like :mod:`~airflow_retrywindow.gate.run`, importing this imports no Airflow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from airflow_retrywindow.gate.budget import Budget
from airflow_retrywindow.gate.run import GateSettings
from airflow_retrywindow.hooks.airflow_api import MAX_PAGE_SIZE
from airflow_retrywindow.model.bounds import MAX_OBSERVATION_AGE
from airflow_retrywindow.timing.clock import as_timedelta, bounded_seconds, seconds_down
from airflow_retrywindow.timing.work import Work

if TYPE_CHECKING:
    import jinja2
    from airflow.sdk import BaseOperator, Context

    from airflow_retrywindow.timing.deadline import Deadline

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

    deadline: Deadline

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

    def _gate_settings(self, targets: Mapping[str, Work]) -> GateSettings:
        """The settings deciding ``targets`` of this task's run, with this task's arguments.

        :param targets: task id -> the estimate for one attempt of it.
        """
        return GateSettings(
            targets=targets,
            deadline=self.deadline,
            max_observation_age=self.max_observation_age,
            conn_id=self.airflow_conn_id,
            page_size=self.page_size,
            timeout=self.api_timeout,
        )


def targets_argument(targets: object, gate_id: str) -> dict[str, Work]:
    """Check ``targets``: task id -> :class:`Work`, at least one, never the gate itself."""
    if not isinstance(targets, Mapping) or not targets:
        raise ValueError(
            "targets must map at least one task id to its Work(duration=..., validation=..., "
            f"safe_repeat=...), got {targets!r}"
        )
    checked: dict[str, Work] = {}
    for task_id, work in targets.items():
        if not isinstance(task_id, str) or not task_id:
            raise ValueError(f"targets: task ids must be non-empty strings, got {task_id!r}")
        if task_id == gate_id:
            raise ValueError(f"targets: {gate_id!r} cannot decide about itself")
        if not isinstance(work, Work):
            raise ValueError(
                f"targets[{task_id!r}] must be a Work(duration=..., validation=..., "
                f"safe_repeat=...), got {work!r}"
            )
        checked[task_id] = work
    return checked


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
    """Check ``airflow_conn_id``: a non-empty connection id."""
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
    """Check ``page_size``: rows per API page, 1 to ``MAX_PAGE_SIZE``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PAGE_SIZE:
        raise ValueError(
            f"page_size must be a whole number from 1 to {MAX_PAGE_SIZE}, got {value!r}"
        )
    return value


def timeout_argument(value: object) -> float:
    """Check ``api_timeout``: seconds per API request, more than 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"api_timeout must be a positive number of seconds, got {value!r}")
    return float(value)


def _is_xcom_arg(value: object) -> bool:
    return type(value).__module__.startswith("airflow.sdk.definitions.xcom_arg")
