"""The tasks a gate decides about, found in the gate's own DAG.

A :class:`Target` is what the later stages need of a task: the estimate it is
decided on (settled below: :func:`resolve_estimates`), the task's
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

**Estimates.** where the estimate a gate decides each target on, and its deadline, come from.

A task under a ``RetryWindowPolicy`` states one attempt's duration, its
validation time, the safe-repeat claim and the deadline in that policy. A gate
or sensor given no ``Work`` for such a target takes them from there, so each is
written once. Given both, they must agree: otherwise the policy and the gate
would decide the same retry on different numbers. A DAG author who means the
gate to differ says so with ``Work.override(reason=..., ...)``, and the reason is
recorded.

A gate decides every target on one deadline: its own ``deadline`` argument, or,
without one, the deadline every target's policy gives.

Each value's source, as the decision record's ``estimateSource`` names it:

* ``policy`` - the target's ``RetryWindowPolicy``;
* ``gate`` - the gate's (or sensor's) own argument, the target having no policy;
* ``gate and policy`` - both give it, the same;
* ``gate override: <reason>`` - ``Work.override``, with its reason;
* ``other targets' policies`` - the deadline of a target without a policy, taken
  from the policies of the gate's other targets.

Checked when the DAG is parsed (:func:`estimate_problems`) and again when the
gate decides (:func:`resolve_estimates`). This reads the DAG's task objects;
importing it imports no Airflow.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_retrywindow.exceptions import RetryWindowGateError
from airflow_retrywindow.policies.check import gated
from airflow_retrywindow.records.estimate_words import (  # stored words, read back by records/
    AGREED,
    GATE,
    OTHER_POLICIES,
    OVERRIDE,
    POLICY,
)
from airflow_retrywindow.redaction import safe_text
from airflow_retrywindow.timing.deadline import Deadline
from airflow_retrywindow.timing.retry_settings import RetrySettings, airflow_delay_cap
from airflow_retrywindow.timing.work import MAX_OVERRIDE_REASON, EstimateOverride, Work

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
        gated=gated(task),
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
    from airflow.sdk.definitions.mappedoperator import MappedOperator

    return isinstance(task, MappedOperator) or task.get_closest_mapped_task_group() is not None


def mapped_settings_problem(task: Any) -> str | None:
    """Why the gate cannot read one set of retry settings for every map index, or ``None``.

    Airflow keeps the retry settings in a mapped task's ``partial()`` arguments and
    refuses to map them, except through ``expand_kwargs(..., strict=False)``, whose
    mapped arguments override them when each map index runs.
    """
    mapped = getattr(task, "expand_input", None)
    if (
        getattr(task, "_expand_input_attr", None) != "expand_input"  # not mapped, or a @task
        or getattr(mapped, "EXPAND_INPUT_TYPE", None) != "list-of-dicts"  # expand()
        or getattr(task, "_disallow_kwargs_override", True)  # a strict expand_kwargs()
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
    if not gated(task):
        return RetrySettings.of_task(task, delay_cap=airflow_delay_cap())
    policy = task.retry_policy
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


# -- the estimates each target is decided on ----------------------------------------

#: the estimate's fields: the name a DAG author writes -> the name in the record
FIELDS = {"duration": "duration", "validation": "validation", "safe_repeat": "safeRepeat"}

#: what a gate or sensor may give for one target
GivenEstimate = Work | EstimateOverride | None


@dataclass(frozen=True)
class Estimates:
    """What a gate decides its targets on, and where each value came from.

    :param works: task id -> the estimate for one attempt, in the targets' order.
    :param deadline: the one deadline every target is decided on.
    :param sources: task id -> record field (``duration``, ``validation``,
        ``safeRepeat``, ``deadline``) -> its source.
    """

    works: Mapping[str, Work]
    deadline: Deadline
    sources: Mapping[str, Mapping[str, str]]


@dataclass(frozen=True)
class _Asker:
    """The gate or sensor asking, for its messages.

    :param kind: ``gate`` or ``sensor``.
    """

    kind: str

    def argument(self, task_id: str) -> str:
        """How the DAG author wrote the estimate of ``task_id``."""
        return f"targets[{task_id!r}]" if self.kind == "gate" else "work"


def resolve_estimates(
    dag: Any,
    targets: Mapping[str, GivenEstimate],
    deadline: Deadline | None,
    *,
    kind: str = "gate",
) -> Estimates:
    """Every target's estimate and the deadline; raises when they cannot be settled.

    :param dag: the gate's DAG.
    :param targets: task id -> what the gate was given for it.
    :param deadline: the gate's own deadline, or ``None`` to take the policies'.
    :param kind: ``gate`` or ``sensor``, for the messages.
    :raises RetryWindowGateError: naming every problem.
    """
    found, problems = _settle(dag, targets, deadline, _Asker(kind))
    # a target outside the DAG has no estimate: never decide without it
    problems.extend(
        f"target {task_id!r} is not a task of DAG {getattr(dag, 'dag_id', dag)!r}"
        for task_id in targets
        if found is not None and task_id not in found.works
    )
    if found is None or problems:
        raise RetryWindowGateError(
            f"the {kind}'s estimates cannot be settled: " + "; ".join(problems)
        )
    return found


def estimate_problems(
    dag: Any,
    targets: Mapping[str, GivenEstimate],
    deadline: Deadline | None,
    *,
    kind: str = "gate",
) -> list[str]:
    """Why the estimates or the deadline cannot be settled, checked when the DAG is parsed.

    A target that is not a task of ``dag`` is left to
    :func:`~airflow_retrywindow.gate.targets.target_problems`.

    :param dag: the gate's DAG.
    :param targets: task id -> what the gate was given for it.
    :param deadline: the gate's own deadline, or ``None``.
    :param kind: ``gate`` or ``sensor``, for the messages.
    """
    return _settle(dag, targets, deadline, _Asker(kind))[1]


def _settle(
    dag: Any,
    targets: Mapping[str, GivenEstimate],
    deadline: Deadline | None,
    asker: _Asker,
) -> tuple[Estimates | None, list[str]]:
    """The estimates, or ``None`` when they cannot be settled, and every problem found."""
    problems: list[str] = []
    works: dict[str, Work] = {}
    sources: dict[str, dict[str, str]] = {}
    stated: dict[str, tuple[Deadline, str]] = {}
    task_dict = getattr(dag, "task_dict", {})
    for task_id, given in targets.items():
        if task_id not in task_dict:
            continue
        task = task_dict[task_id]
        policy = task.retry_policy if gated(task) else None
        work, where, wrong = _work_of(task_id, given, policy, asker)
        problems.extend(wrong)
        if work is not None:
            works[task_id], sources[task_id] = work, where
        if policy is not None and isinstance(given, EstimateOverride) and given.deadline:
            stated[task_id] = (given.deadline, _override(given))
        elif policy is not None:
            stated[task_id] = (policy.deadline, POLICY)
    chosen, deadline_sources, wrong = _deadline_of(targets, deadline, stated, asker)
    problems.extend(wrong)
    if chosen is None or problems:
        return None, problems
    for task_id, where in sources.items():
        where["deadline"] = deadline_sources[task_id]
    return Estimates(works=works, deadline=chosen, sources=sources), problems


def _work_of(
    task_id: str, given: GivenEstimate, policy: Any, asker: _Asker
) -> tuple[Work | None, dict[str, str], list[str]]:
    """The estimate of one target, its sources, and what is wrong with it."""
    named = asker.argument(task_id)
    if policy is None:
        if isinstance(given, Work):
            return given, dict.fromkeys(FIELDS.values(), GATE), []
        if given is None:
            problem = (
                f"{named}: task {task_id!r} has no RetryWindowPolicy to take its estimate "
                f"from; give {named}=Work(duration=..., validation=..., safe_repeat=...), or "
                "add retry_policy=RetryWindowPolicy(...) to the task"
            )
        else:
            problem = (
                f"{named}: Work.override(...) replaces values of a RetryWindowPolicy, but task "
                f"{task_id!r} has none; give {named}=Work(duration=..., validation=..., "
                "safe_repeat=...)"
            )
        return None, {}, [problem]
    stated: Work = policy.work
    if given is None:
        return stated, dict.fromkeys(FIELDS.values(), POLICY), []
    if isinstance(given, EstimateOverride):
        overridden = given.overridden()
        where = {
            key: _override(given) if name in overridden else POLICY for name, key in FIELDS.items()
        }
        return given.over(stated), where, []
    wrong = [
        f"{named}: {name}: the {asker.kind}'s Work says {_shown(getattr(given, name))}, the "
        f"task's RetryWindowPolicy says {_shown(getattr(stated, name))}; make them equal, leave "
        f"the Work out ({named}=None) to take the policy's, or mark the override: "
        f"{named}=Work.override(reason='...', {name}={_shown(getattr(given, name))})"
        for name in FIELDS
        if getattr(given, name) != getattr(stated, name)
    ]
    return (None if wrong else given), dict.fromkeys(FIELDS.values(), AGREED), wrong


def _deadline_of(
    targets: Mapping[str, GivenEstimate],
    deadline: Deadline | None,
    stated: Mapping[str, tuple[Deadline, str]],
    asker: _Asker,
) -> tuple[Deadline | None, dict[str, str], list[str]]:
    """The one deadline, each target's source for it, and what is wrong with it.

    :param stated: task id -> the deadline its policy (or its override) gives.
    """
    if deadline is not None:
        where: dict[str, str] = {}
        wrong: list[str] = []
        for task_id in targets:
            value, source = stated.get(task_id, (deadline, GATE))
            if value == deadline:
                where[task_id] = AGREED if source == POLICY else source
            elif source == POLICY:
                named = asker.argument(task_id)
                wrong.append(
                    f"{named}: deadline: the {asker.kind}'s deadline is {deadline.describe()}, "
                    f"the task's RetryWindowPolicy says {value.describe()}; make them equal, "
                    f"leave the {asker.kind}'s deadline out to take the policy's, or mark the "
                    f"override: {named}=Work.override(reason='...', deadline=<the "
                    f"{asker.kind}'s deadline>)"
                )
            else:
                wrong.append(
                    f"{asker.argument(task_id)}: Work.override gives the deadline "
                    f"{value.describe()}, but the {asker.kind} decides on its deadline "
                    f"{deadline.describe()}; give the same one"
                )
        return deadline, where, wrong
    distinct: list[Deadline] = []
    for value, _ in stated.values():
        if value not in distinct:
            distinct.append(value)
    if len(distinct) == 1:
        where = {task_id: stated.get(task_id, (None, OTHER_POLICIES))[1] for task_id in targets}
        return distinct[0], where, []
    if not distinct:
        problem = (
            f"deadline: the {asker.kind} has none, and no target has a RetryWindowPolicy to "
            "take it from; pass deadline=..."
        )
    else:
        listed = "; ".join(
            f"{task_id!r}: {value.describe()}" for task_id, (value, _) in stated.items()
        )
        problem = (
            f"deadline: the {asker.kind} has none, and its targets' policies give different "
            f"deadlines ({listed}); pass the {asker.kind}'s deadline=... and mark each target "
            "whose policy differs with Work.override(reason='...', deadline=...)"
        )
    return None, {}, [problem]


def _override(given: EstimateOverride) -> str:
    # the reason is the DAG author's text, stored in every record: masked and capped
    return OVERRIDE + safe_text(given.reason.strip(), limit=MAX_OVERRIDE_REASON)


def _shown(value: object) -> str:
    """A value as a DAG author would write it: ``timedelta(seconds=90)``, ``True``."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    seconds = getattr(value, "total_seconds", None)
    if callable(seconds):
        total = seconds()
        return f"timedelta(seconds={int(total) if total == int(total) else total})"
    return repr(value)
