"""The tasks a gate decides about, found in the gate's own DAG.

A :class:`Target` is what the later stages need of a task: the caller's
estimate, the task's retry settings as the model sees them, whether a
``RetryWindowPolicy`` classifies its failures, and its pool.
:func:`resolve_targets` builds them from the DAG's tasks, refusing a task
outside the DAG, a mapped task and settings the model cannot express (also
checked when the DAG is parsed, with :func:`unsafe_trigger_rule` for the guarded
tasks).

This is where the gate touches Airflow's task objects: :func:`task_in` imports
Airflow's ``MappedOperator`` when it runs, and :func:`settings_of` may read
Airflow's retry delay cap. Importing the module imports no Airflow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_retrywindow.exceptions import RetryWindowGateError
from airflow_retrywindow.policies.check import gated
from airflow_retrywindow.timing.retry_settings import RetrySettings, airflow_delay_cap
from airflow_retrywindow.timing.work import Work

#: the trigger rule under which a guarded task runs only after its gate succeeded: any
#: other lets it run after the gate failed or was skipped, without a decision
SAFE_TRIGGER_RULES = frozenset({"all_success"})


@dataclass(frozen=True)
class Target:
    """A task of the same DAG whose next attempt the gate decides.

    :param task_id: the Airflow task id.
    :param work: the estimate and idempotency claim for one attempt.
    :param settings: the task's own retry settings, as the model sees them.
    :param gated: whether the task has a ``RetryWindowPolicy``, which records
        how each failure was classified.
    :param pool: the pool the task runs in, per its definition.
    :param pool_slots: the slots one attempt holds, per its definition.
    """

    task_id: str
    work: Work
    settings: RetrySettings
    gated: bool
    pool: str
    pool_slots: int


def resolve_targets(dag: Any, targets: Mapping[str, Work]) -> list[Target]:
    """The targets as tasks of ``dag``, in the given order; raises when one cannot be a target.

    :param dag: the gate's DAG.
    :param targets: task id -> the estimate for one attempt of it.
    """
    found = []
    for task_id, work in targets.items():
        task = task_in(dag, task_id)
        found.append(target_of(task_id, work, task, settings_of(task)))
    return found


def target_of(task_id: str, work: Work, task: Any, settings: RetrySettings) -> Target:
    """A :class:`Target` for an Airflow task of the gate's DAG.

    :param task_id: the task id.
    :param work: the caller's estimate for it.
    :param task: the Airflow operator.
    :param settings: its retry settings as the model sees them.
    """
    return Target(
        task_id=task_id,
        work=work,
        settings=settings,
        gated=gated(task),
        pool=str(getattr(task, "pool", None) or "default_pool"),
        pool_slots=int(getattr(task, "pool_slots", 1) or 1),
    )


def task_in(dag: Any, task_id: str) -> Any:
    """The task ``task_id`` of ``dag``, refusing ids outside it and mapped tasks."""
    from airflow.sdk.definitions.mappedoperator import MappedOperator

    task_dict = getattr(dag, "task_dict", {})
    if task_id not in task_dict:
        raise RetryWindowGateError(
            f"target {task_id!r} is not a task of DAG {dag.dag_id!r}; a gate decides about "
            "tasks of its own DAG run (check the task id, including its task group prefix)"
        )
    task = task_dict[task_id]
    if isinstance(task, MappedOperator):
        raise RetryWindowGateError(
            f"target {task_id!r} is a mapped task; the gate decides about whole tasks, "
            "so target the tasks that are not mapped"
        )
    group = task.get_closest_mapped_task_group()
    if group is not None:
        # its task instances are mapped too: none is the whole task the gate decides
        raise RetryWindowGateError(
            f"target {task_id!r} is inside the mapped task group {group.group_id!r}; the gate "
            "decides about whole tasks, so target tasks outside mapped task groups"
        )
    return task


def settings_of(task: Any) -> RetrySettings:
    """The task's retry settings as the model sees them, the same way its policy reads them.

    A ``RetryWindowPolicy`` (a subclass included) reads them itself, so the gate
    decides on the timeline the policy checks.
    """
    if not gated(task):
        return RetrySettings.of_task(task, delay_cap=airflow_delay_cap())
    policy = task.retry_policy
    found = policy.settings_of(task)
    if not isinstance(found, RetrySettings):
        raise RetryWindowGateError(
            f"task {task.task_id!r}: {type(policy).__name__}.settings_of returned {found!r}, "
            "not RetrySettings; return RetrySettings.of_task(task, ...) from it"
        )
    return found


def unsafe_trigger_rule(task: Any, gate_id: str) -> str | None:
    """Why ``task`` could run without a decision of ``gate_id``, or ``None``.

    Checked for the gate operator's guarded tasks and the sensor's downstream
    tasks when the DAG is parsed.
    """
    rule = str(getattr(task.trigger_rule, "value", task.trigger_rule))
    if rule in SAFE_TRIGGER_RULES:
        return None
    return (
        f"guarded task {task.task_id!r} has trigger_rule {rule!r}, which would let it run "
        f"after {gate_id!r} failed or was skipped, without a decision; use all_success"
    )
