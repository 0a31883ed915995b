"""The tasks a gate decides about, found in the gate's own DAG.

A :class:`Target` is what the later stages need of a task: the estimate it is
decided on (settled in :mod:`~airflow_retrywindow.gate.estimates`), the task's
retry settings as the model sees them, whether a ``RetryWindowPolicy``
classifies its failures, its pool, and whether its task instances carry map
indexes. :func:`resolve_targets` builds them from the DAG's
tasks, refusing a task outside the DAG and settings the model cannot express
(also checked when the DAG is parsed, with :func:`unsafe_trigger_rule` for the
guarded tasks).

A mapped task (``.expand()``) and a task inside a mapped task group are targets
like any other: the gate decides each of their map indexes. What it cannot do is
read retry settings that differ per map index; Airflow refuses to map them, save
through ``expand_kwargs(..., strict=False)``, which is refused here.

This is where the gate touches Airflow's task objects: :func:`task_in` imports
Airflow's ``MappedOperator`` when it runs, and :func:`settings_of` may read
Airflow's retry delay cap. Importing the module imports no Airflow.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_retrywindow import airflow_internals
from airflow_retrywindow.exceptions import RetryWindowGateError
from airflow_retrywindow.records.composition import window_of
from airflow_retrywindow.timing.retry_settings import RetrySettings, airflow_delay_cap
from airflow_retrywindow.timing.work import Work

#: the trigger rule under which a guarded task runs only after its gate succeeded: any
#: other lets it run after the gate failed or was skipped, without a decision
SAFE_TRIGGER_RULES = frozenset({"all_success"})
#: the operator arguments the gate reads once per task: mapped, they would differ per map index
PER_TASK_ARGUMENTS = frozenset(
    {"retries", "retry_delay", "retry_exponential_backoff", "max_retry_delay", "retry_policy"}
)


@dataclass(frozen=True)
class Target:
    """A task of the same DAG whose next attempt the gate decides.

    :param task_id: the Airflow task id.
    :param work: the estimate and safe-repeat claim for one attempt it is decided on.
    :param settings: the task's own retry settings, as the model sees them.
    :param gated: whether the task has a ``RetryWindowPolicy``, which records
        how each failure was classified.
    :param pool: the pool the task runs in, per its definition.
    :param pool_slots: the slots one attempt holds, per its definition.
    :param mapped: whether its task instances carry map indexes: a mapped task, or
        a task inside a mapped task group.
    """

    task_id: str
    work: Work
    settings: RetrySettings
    gated: bool
    pool: str
    pool_slots: int
    mapped: bool = False


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


def target_problems(dag: Any, task_ids: Iterable[str]) -> list[str]:
    """Why each of ``task_ids`` cannot be a target in ``dag``, checked when the DAG is parsed.

    The same checks as :func:`resolve_targets`, every target reported, none built.

    :param dag: the gate's DAG.
    :param task_ids: the targets' task ids.
    """
    problems = []
    for task_id in task_ids:
        try:
            settings_of(task_in(dag, task_id))
        except (ValueError, RetryWindowGateError) as error:  # UnsupportedRetrySettings
            problems.append(str(error))
    return problems


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
        gated=window_of(task) is not None,
        pool=str(getattr(task, "pool", None) or "default_pool"),
        pool_slots=int(getattr(task, "pool_slots", 1) or 1),
        mapped=is_mapped(task),
    )


def task_in(dag: Any, task_id: str) -> Any:
    """The task ``task_id`` of ``dag``, refusing ids outside it and per-index retry settings."""
    task_dict = getattr(dag, "task_dict", {})
    if task_id not in task_dict:
        raise RetryWindowGateError(
            f"target {task_id!r} is not a task of DAG {dag.dag_id!r}; a gate decides about "
            "tasks of its own DAG run (check the task id, including its task group prefix)"
        )
    task = task_dict[task_id]
    problem = mapped_settings_problem(task)
    if problem:
        raise RetryWindowGateError(f"target {task_id!r} {problem}")
    return task


def own_map_indexes(
    dag: Any, deciding: Any, map_index: int, targets: Iterable[Target]
) -> dict[str, int]:
    """The targets a gate in a mapped task group decides for its own map index only.

    A gate (or sensor) inside a mapped task group runs once per map index, next
    to that map index's tasks: ``per_partition.gate[3]`` is about
    ``per_partition.load[3]``, not about the other partitions. Targets in the
    same mapped task group are therefore decided for the deciding task
    instance's map index; every other target, for all its map indexes.

    :param dag: the gate's DAG.
    :param deciding: the gate or sensor deciding.
    :param map_index: the deciding task instance's map index.
    :param targets: the gate's targets.
    :returns: target task id -> the one map index decided for it.
    """
    group = _mapped_group_id(deciding)
    if group is None or map_index < 0:
        return {}
    return {
        target.task_id: map_index
        for target in targets
        if _mapped_group_id(dag.task_dict[target.task_id]) == group
    }


def _mapped_group_id(task: Any) -> str | None:
    group = task.get_closest_mapped_task_group()
    return None if group is None else str(group.group_id)


def is_mapped(task: Any) -> bool:
    """Whether the task's instances carry map indexes: mapped, or in a mapped task group."""
    return bool(task.is_mapped) or task.get_closest_mapped_task_group() is not None


def mapped_settings_problem(task: Any) -> str | None:
    """Why the gate cannot read one set of retry settings for every map index, or ``None``.

    Airflow keeps the retry settings in a mapped task's ``partial()`` arguments and
    refuses to map them, except through ``expand_kwargs(..., strict=False)``, whose
    mapped arguments override them when each map index runs.
    """
    found = airflow_internals.mapped_input(task)  # None: not mapped, or a @task
    mapped, overrides = found if found is not None else (None, False)
    if (
        getattr(mapped, "EXPAND_INPUT_TYPE", None) != "list-of-dicts"  # expand()
        or not overrides  # a strict expand_kwargs()
    ):
        return None
    value = getattr(mapped, "value", None)
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, Mapping) for item in value):
        return (
            "is mapped with expand_kwargs(..., strict=False) over values only known when it "
            "runs, which may override its retry settings per map index; the gate reads one "
            "set of retry settings for every map index. Use strict=True (the default)"
        )
    per_index = sorted({name for item in value for name in item} & PER_TASK_ARGUMENTS)
    if not per_index:
        return None
    return (
        f"maps {', '.join(per_index)} per map index; the gate reads one set of retry settings "
        "for every map index, so set them in partial() instead"
    )


def settings_of(task: Any) -> RetrySettings:
    """The task's retry settings as the model sees them, the same way its policy reads them.

    A ``RetryWindowPolicy`` (a subclass included) reads them itself, so the gate
    decides on the timeline the policy checks.
    """
    policy = window_of(task)
    if policy is None:
        return RetrySettings.of_task(task, delay_cap=airflow_delay_cap())
    found = policy.settings_of(task)
    if not isinstance(found, RetrySettings):
        raise RetryWindowGateError(
            f"task {task.task_id!r}: {type(policy).__name__}.settings_of returned {found!r}, "
            "not RetrySettings; return RetrySettings.of_task(task, ...) from it"
        )
    # the policy may lengthen each wait by a draw the gate does not see: decide on
    # the longest it could be, so the gate never finds a task ready too early
    widened: RetrySettings = policy.jitter.longest_waits(found)
    return widened


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


def guard_problems(
    dag: Any, guard: Iterable[str], gate_id: str, downstream: Collection[str]
) -> list[str]:
    """Why the gate's guarded tasks could run without its decision, checked at parse time.

    Each must be a task of the DAG, directly downstream of the gate, with a trigger
    rule that keeps it from running when the gate fails.

    :param dag: the gate's DAG.
    :param guard: the guarded task ids.
    :param gate_id: the gate's task id.
    :param downstream: the task ids directly downstream of the gate.
    """
    problems: list[str] = []
    for task_id in guard:
        if task_id not in dag.task_dict:
            problems.append(f"guarded task {task_id!r} is not a task of DAG {dag.dag_id!r}")
            continue
        if task_id not in downstream:
            problems.append(
                f"guarded task {task_id!r} must be directly downstream of gate "
                f"{gate_id!r} (gate >> {task_id}), so a failed gate keeps it from running"
            )
        problem = unsafe_trigger_rule(dag.task_dict[task_id], gate_id)
        if problem:
            problems.append(problem)
    return problems
