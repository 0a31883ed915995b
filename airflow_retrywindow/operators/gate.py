"""``RetryWindowGateOperator``: decide the retries of a run's tasks, skip the ones refused."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.providers.standard.utils.skipmixin import SkipMixin
from airflow.sdk import BaseOperator

from airflow_retrywindow import metrics
from airflow_retrywindow.gate.approve import (
    APPROVE,
    REASON_PARAM,
    ApprovalReader,
    Override,
    approvable,
    judge,
    read_approval,
    unasked,
)
from airflow_retrywindow.gate.arguments import targets_argument
from airflow_retrywindow.gate.targets import (
    GivenEstimate,
    estimate_problems,
    target_problems,
    unsafe_trigger_rule,
)
from airflow_retrywindow.operators.retry_window_mixin import RetryWindowMixin
from airflow_retrywindow.redaction import describe_exception

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_retrywindow.gate.decide import DecisionTable

GuardArgument = Collection[str] | Mapping[str, str | Collection[str]] | None
#: states of an approval task the gate leaves as they are rather than skip it
_APPROVAL_LEFT = frozenset(
    {"success", "failed", "running", "skipped", "upstream_failed", "removed"}
)


class RetryWindowGateOperator(RetryWindowMixin, BaseOperator, SkipMixin):
    """Decide whether the guarded tasks of this run may run again, and skip the rest.

    The gate reads the latest try of each target in this DAG run through
    Airflow's REST API, builds the decision model's fixtures from it (the data
    interval, attempt counts, each task's own retry settings and pool), and
    publishes one decision record as its ``return_value`` XCom: per target the
    model's decision with its times, the pool capacity and budget verdicts, the
    exact fixtures and clock origins for offline replay, the unit of work and an
    English status update. It never submits, cancels or observes an external job.

    Then it short-circuits like ``ShortCircuitOperator``: every guarded task
    whose targets are not all ``retry-eligible`` or ``not-attempted``, or whose
    pool can never hold it, or whose budget is exceeded, is skipped. If the gate
    cannot decide (API unreachable, connection missing, bad configuration) it
    fails, and the guarded tasks do not run.

    Place the gate directly upstream of the work it guards. On the first run the
    targets have not been tried and everything runs; when someone clears the
    work with its upstream gate, the gate decides the repeat.

    :param targets: the tasks of this DAG to decide about (``"grp.load"`` for a
        task in a task group): a list of task ids, each estimate (duration,
        validation, safe_repeat) taken from the task's ``RetryWindowPolicy``; or a
        mapping of task id to a :class:`~airflow_retrywindow.Work` (for a task
        without a policy, or the same as its policy's), to
        ``Work.override(reason=..., ...)`` (values that differ from its policy's,
        on purpose), or to ``None`` (its policy's). A mapped target is decided
        per map index, and lets its guarded tasks run only when every map index may.
    :param guard: the tasks this gate protects: a list of target ids (each guards
        itself), or a mapping of downstream task id -> the target id(s) it repeats.
        Guarded tasks must be direct downstream tasks of the gate with the
        trigger rule ``all_success``, so that they never run without a decision;
        they may be mapped or inside a (mapped) task group.
        Default: every target. A gate placed after its targets, to publish the
        table only, takes ``guard=[]``.
    :param approval: the task id of an ``ApprovalOperator`` (or an ``HITLOperator``
        offering ``Approve``) directly downstream of the gate, beside the guarded
        tasks, with a ``reason`` param. The gate leaves it to ask a person only when
        it held back work an approval may release, and skips it otherwise. Once it
        succeeded with ``Approve`` chosen by a person, given after the gate's
        previous decision and the refused tries, the next evaluation of the gate
        lets the guarded tasks whose every blocker the approval covers run, and
        records the model's decisions unchanged beside the override. See
        ``docs/approved-override.md``.
    :param approval_targets: the targets an approval may release (default: every
        target). The approver may name fewer in the approval's ``targets`` param.

    The other arguments (``deadline``, ``observations``, ``budget``, ``work_unit``,
    ``max_observation_age``, ``airflow_conn_id``, ``ignore_downstream_trigger_rules``,
    ``page_size``, ``api_timeout``) are the sensor's too:
    :class:`~airflow_retrywindow.operators.retry_window_mixin.RetryWindowMixin`.
    """

    kind = "gate"

    def __init__(
        self,
        *,
        targets: Mapping[str, Any] | Sequence[str],
        guard: GuardArgument = None,
        approval: str | None = None,
        approval_targets: Collection[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.targets = targets_argument(targets, self.task_id)
        self.guard = _guard_argument(guard, self.targets, self.task_id)
        self.approval, self.approval_targets = _approval_argument(
            approval, approval_targets, self.targets, self.guard, self.task_id
        )

    def given_estimates(self) -> Mapping[str, GivenEstimate]:
        """Target task id -> the estimate the gate was given for it (``None``: its policy's)."""
        return self.targets

    def retry_window_problems(self) -> list[str]:
        """Everything wrong with this gate in its DAG, checked when the DAG is parsed.

        Targets must be tasks of the DAG with retry settings the model can
        express, and an estimate and deadline that agree with their policies;
        guarded tasks must be direct downstream tasks with a trigger rule that
        keeps them from running when the gate fails.
        """
        if not self.has_dag():  # type: ignore[no-untyped-call]
            return [f"gate {self.task_id!r} is not in a DAG"]
        problems = target_problems(self.dag, self.targets)
        problems.extend(estimate_problems(self.dag, self.targets, self.deadline))
        direct = self.downstream_task_ids
        for task_id in self.guard:
            if task_id not in self.dag.task_dict:
                problems.append(
                    f"guarded task {task_id!r} is not a task of DAG {self.dag.dag_id!r}"
                )
                continue
            if task_id not in direct:
                problems.append(
                    f"guarded task {task_id!r} must be directly downstream of gate "
                    f"{self.task_id!r} (gate >> {task_id}), so a failed gate keeps it from running"
                )
            problem = unsafe_trigger_rule(self.dag.task_dict[task_id], self.task_id)
            if problem:
                problems.append(problem)
        problems.extend(_approval_problems(self))
        return problems

    @metrics.counts_gate_errors(by=metrics.GATE)
    def execute(self, context: Context) -> None:
        self._refuse_if_misconfigured("the guarded work")
        estimates = self.estimates()
        decided = self._decide(context, estimates)
        table = decided.table
        override, approval_requests = self._override(table, context, decided.reader)
        guard, held = [], []
        for task_id, targets in self.guard.items():
            blockers = [text for target in targets for text in table.blockers(target)]
            entry: dict[str, Any] = {
                "taskId": task_id,
                "targets": list(targets),
                "action": "skip" if blockers else "run",
                "blockers": blockers,
            }
            if blockers and override is not None and override.covers(table, targets):
                # the model's refusals stay on record beside the person who overrode them
                entry.update(action="run", blockers=[], overridden=blockers)
                entry["override"] = override.wording
            guard.append(entry)
            if entry["action"] == "skip":
                held.append(task_id)
        to_skip = self._to_skip(held) + self._approval_to_skip(table, held, override)
        record = self._record(
            context,
            decided,
            estimates,
            guard=guard,
            skipped=[task.task_id for task in to_skip],
            requests=approval_requests,
            override=override,
        )
        if not to_skip:
            self.log.info("Every guarded task may run.")
        self._publish(context, record, to_skip)

    def _override(
        self, table: DecisionTable, context: Context, reader: ApprovalReader | None
    ) -> tuple[Override | None, int]:
        """What the approval task lets through now, and the requests its read made.

        The approval is read only when it could let held-back work through, through
        the reader that read the run; when it cannot be read, nothing is let
        through (the model's refusals stand).
        """
        if self.approval is None:
            return None, 0
        if not any(
            approvable(table, targets, self.approval_targets) for targets in self.guard.values()
        ):
            held = any(
                table.blockers(target) for targets in self.guard.values() for target in targets
            )
            why = (
                "nothing held back is a refusal it may override" if held else "nothing is held back"
            )
            return unasked(self.approval, f"{why}, so it does not ask"), 0
        if reader is None:
            return unasked(self.approval, "no reader of the run was handed over to read it"), 0
        before = reader.requests
        try:
            found = read_approval(
                reader,
                self.dag_id,
                str(context["dag_run"].run_id),
                self.approval,
                gate=self.task_id,
                gate_try=int(context["ti"].try_number),
            )
        except Exception as error:
            note = f"its answer could not be read ({describe_exception(error)})"
            return unasked(self.approval, note), reader.requests - before
        decided = judge(
            table,
            found.answer,
            approval=self.approval,
            allowed=self.approval_targets,
            previous_decision=found.previous_decision,
        )
        return decided, found.requests - before

    def _approval_to_skip(
        self, table: DecisionTable, held: Sequence[str], override: Override | None
    ) -> list[Any]:
        """The approval task, when nothing held back could be approved: nobody is asked in vain.

        An approval that already ended (or runs) is left as it is.
        """
        if self.approval is None or override is None:
            return []
        if any(approvable(table, self.guard[task_id], self.approval_targets) for task_id in held):
            return []
        state = override.answer.get("state") if override.answer else None
        if state in _APPROVAL_LEFT:
            return []
        return [self.dag.get_task(self.approval)]

    def _to_skip(self, held: Sequence[str]) -> list[Any]:
        """The tasks to skip for the refused guarded tasks, like ``ShortCircuitOperator``."""
        if not held:
            return []
        allowed = set(self.guard) - set(held)
        chosen: dict[str, Any] = {}
        for task_id in held:
            task = self.dag.get_task(task_id)
            chosen[task_id] = task
            if self.ignore_downstream_trigger_rules:
                for relative in task.get_flat_relatives(upstream=False):
                    if not relative.is_teardown and relative.task_id not in allowed:
                        chosen.setdefault(relative.task_id, relative)
        return [chosen[task_id] for task_id in sorted(chosen)]


def _guard_argument(
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


def _approval_argument(
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


def _approval_problems(gate: RetryWindowGateOperator) -> list[str]:
    """What is wrong with the gate's approval task and where it sits, checked at parse time.

    The pattern: an HITL task offering ``Approve`` with a ``reason`` param, directly
    downstream of the gate with ``all_success``, beside the guarded tasks (neither
    upstream nor downstream of them), so that a normal run never waits for a person.
    """
    from airflow.providers.standard.operators.hitl import HITLOperator

    approval, dag = gate.approval, gate.dag
    if approval is None:
        return []
    task = dag.task_dict.get(approval)
    if task is None:
        return [f"approval task {approval!r} is not a task of DAG {dag.dag_id!r}"]
    if not isinstance(task, HITLOperator):
        return [
            f"approval task {approval!r} is a {type(task).__name__}; it must be an "
            f"ApprovalOperator, or an HITLOperator offering {APPROVE!r}, and not mapped"
        ]
    named = f"approval task {approval!r}"
    problems: list[str] = []
    if APPROVE not in task.options or task.multiple:
        problems.append(
            f"{named} must offer {APPROVE!r} with one option chosen (multiple=False); it "
            f"offers {list(task.options)}{' with multiple=True' if task.multiple else ''}"
        )
    if task.defaults and APPROVE in task.defaults:
        problems.append(
            f"{named} defaults to {APPROVE!r}: on a response timeout Airflow would record an "
            "approval nobody gave (the gate ignores it); drop the default"
        )
    if REASON_PARAM not in task.params:
        problems.append(
            f"{named} has no {REASON_PARAM!r} param: an approval counts only with a stated "
            f"reason; add params={{{REASON_PARAM!r}: Param(type='string', minLength=1)}}"
        )
    if approval not in gate.downstream_task_ids:
        problems.append(
            f"{named} must be directly downstream of gate {gate.task_id!r} "
            f"({gate.task_id} >> {approval}), so that it asks only after the gate held "
            "refused work back"
        )
    rule = str(getattr(task.trigger_rule, "value", task.trigger_rule))
    if rule != "all_success":
        problems.append(
            f"{named} has trigger_rule {rule!r}, which would ask for an approval after "
            f"{gate.task_id!r} failed, with no refusal to override; use all_success"
        )
    after_approval = set(task.get_flat_relative_ids(upstream=False))
    for task_id in gate.guard:
        guarded = dag.task_dict.get(task_id)
        if task_id in after_approval:
            problems.append(
                f"guarded task {task_id!r} is downstream of {named}: every run would wait "
                f"for a person; put both directly after {gate.task_id!r}, side by side"
            )
        elif guarded is not None and approval in guarded.get_flat_relative_ids(upstream=False):
            problems.append(
                f"{named} is downstream of guarded task {task_id!r}: when the gate holds "
                f"{task_id!r} back, the approval is skipped with it and never asks; put it "
                f"directly after {gate.task_id!r}"
            )
    return problems
