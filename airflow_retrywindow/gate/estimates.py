"""Where the estimate a gate decides each target on, and its deadline, come from.

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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_retrywindow.exceptions import RetryWindowGateError
from airflow_retrywindow.records.composition import window_of
from airflow_retrywindow.records.estimate_source import (
    AGREED,
    GATE,
    OTHER_POLICIES,
    OVERRIDE,
    POLICY,
)
from airflow_retrywindow.redaction import safe_text
from airflow_retrywindow.timing.deadline import Deadline
from airflow_retrywindow.timing.work import MAX_OVERRIDE_REASON, EstimateOverride, Work

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
        policy = window_of(task)
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
                f"from; give {named}=Work(duration=..., validation=..., safe_repeat=...), or, "
                "on Airflow 3.3 and later, add retry_policy=RetryWindowPolicy(...) to the task"
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
