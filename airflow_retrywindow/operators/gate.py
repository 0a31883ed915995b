"""``RetryWindowGateOperator``: decide the retries of a run's tasks, skip the ones refused."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.providers.standard.utils.skipmixin import SkipMixin
from airflow.sdk import BaseOperator

from airflow_retrywindow import metrics
from airflow_retrywindow.gate.approve import (
    approval_problems,
    asks_in_vain,
    gate_override,
    guarded_actions,
)
from airflow_retrywindow.gate.estimates import GivenEstimate, estimate_problems
from airflow_retrywindow.gate.targets import guard_problems, target_problems
from airflow_retrywindow.operators.arguments import (
    GuardArgument,
    approval_argument,
    guard_argument,
    targets_argument,
)
from airflow_retrywindow.operators.retry_window_mixin import RetryWindowMixin

if TYPE_CHECKING:
    from airflow.sdk import Context


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
        self.guard = guard_argument(guard, self.targets, self.task_id)
        self.approval, self.approval_targets = approval_argument(
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
        problems.extend(
            guard_problems(self.dag, self.guard, self.task_id, self.downstream_task_ids)
        )
        problems.extend(
            approval_problems(
                self.dag,
                self.approval,
                gate_id=self.task_id,
                downstream=self.downstream_task_ids,
                guard=self.guard,
            )
        )
        return problems

    @metrics.counts_gate_errors(by=metrics.GATE)
    def execute(self, context: Context) -> None:
        self._refuse_if_misconfigured("the guarded work")
        estimates = self.estimates()
        decided = self._decide(context, estimates)
        table = decided.table
        override, approval_requests = gate_override(
            table,
            self.guard,
            self.approval,
            self.approval_targets,
            decided.reader,
            dag_id=self.dag_id,
            run_id=str(context["dag_run"].run_id),
            gate_id=self.task_id,
            gate_try=int(context["ti"].try_number),
        )
        guard, held = guarded_actions(table, self.guard, override)
        to_skip = self._to_skip(held)
        if self.approval is not None and asks_in_vain(
            table, self.guard, held, self.approval_targets, override
        ):
            to_skip.append(self.dag.get_task(self.approval))  # nobody is asked in vain
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
