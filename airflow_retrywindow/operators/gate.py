"""``RetryWindowGateOperator``: decide the retries of a run's tasks, skip the ones refused."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.providers.standard.utils.skipmixin import SkipMixin
from airflow.sdk import BaseOperator

from airflow_retrywindow import metrics
from airflow_retrywindow.exceptions import RetryWindowGateError
from airflow_retrywindow.gate.arguments import RetryWindowArguments, targets_argument
from airflow_retrywindow.gate.budget import Budget
from airflow_retrywindow.gate.record import build
from airflow_retrywindow.gate.run import GateSettings, decide_run
from airflow_retrywindow.gate.targets import resolve_targets, unsafe_trigger_rule
from airflow_retrywindow.hooks.airflow_api import (
    DEFAULT_CONN_ID,
    DEFAULT_PAGE_SIZE,
    DEFAULT_TIMEOUT,
)
from airflow_retrywindow.plugins.link import RetryWindowLink
from airflow_retrywindow.timing.deadline import Deadline

if TYPE_CHECKING:
    from airflow.sdk import Context

GuardArgument = Collection[str] | Mapping[str, str | Collection[str]] | None


class RetryWindowGateOperator(RetryWindowArguments, BaseOperator, SkipMixin):
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

    :param targets: task id -> :class:`~airflow_retrywindow.Work` (duration,
        validation, safe_repeat) of each task of this DAG to decide about
        (``"grp.load"`` for a task in a task group). A mapped target is decided
        per map index, and lets its guarded tasks run only when every map index may.
    :param deadline: when the delivery is due: a :class:`~airflow_retrywindow.Deadline`,
        an aware datetime, or a callable of the context returning one.
    :param guard: the tasks this gate protects: a list of target ids (each guards
        itself), or a mapping of downstream task id -> the target id(s) it repeats.
        Guarded tasks must be direct downstream tasks of the gate with the
        trigger rule ``all_success``, so that they never run without a decision;
        they may be mapped or inside a (mapped) task group.
        Default: every target. A gate placed after its targets, to publish the
        table only, takes ``guard=[]``.
    :param observations: explicit observations overriding Airflow's view of
        targets, as a mapping or its JSON text (templated); see
        :mod:`airflow_retrywindow.gate.observations` for the shape.
    :param budget: an approved resource budget for the next attempt; its
        ``estimate`` is templated.
    :param work_unit: the unit of work (business_date, input_partition,
        transform_version, destination, remote_job_id), templated.
    :param max_observation_age: how old an observation may be (default 60 s).
    :param airflow_conn_id: the connection to Airflow's REST API.
    :param ignore_downstream_trigger_rules: if ``True`` (default), a refused
        guarded task is skipped with everything downstream of it; if ``False``,
        only the guarded task is skipped and the trigger rules of the tasks
        after it decide.
    :param page_size: rows asked for per API page.
    :param api_timeout: seconds to wait for each API request.
    """

    # a button on the task instance to its Retry window tab
    operator_extra_links = (RetryWindowLink(),)

    def __init__(
        self,
        *,
        targets: Mapping[str, Any],
        deadline: Deadline | Any,
        guard: GuardArgument = None,
        observations: Mapping[str, Any] | str | None = None,
        budget: Budget | None = None,
        work_unit: Mapping[str, Any] | str | None = None,
        max_observation_age: timedelta | float = timedelta(seconds=60),
        airflow_conn_id: str = DEFAULT_CONN_ID,
        ignore_downstream_trigger_rules: bool = True,
        page_size: int = DEFAULT_PAGE_SIZE,
        api_timeout: float = DEFAULT_TIMEOUT,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.targets = targets_argument(targets, self.task_id)
        self.deadline = Deadline.coerce(deadline)
        self.guard = _guard_argument(guard, self.targets, self.task_id)
        self._set_gate_arguments(
            observations=observations,
            budget=budget,
            work_unit=work_unit,
            max_observation_age=max_observation_age,
            airflow_conn_id=airflow_conn_id,
            ignore_downstream_trigger_rules=ignore_downstream_trigger_rules,
            page_size=page_size,
            api_timeout=api_timeout,
        )

    def gate_settings(self) -> GateSettings:
        """What this gate decides about, and how it reads its run."""
        return self._gate_settings(self.targets)

    def retry_window_problems(self) -> list[str]:
        """Everything wrong with this gate in its DAG, checked when the DAG is parsed.

        Targets must be tasks of the DAG with retry settings the model can
        express; guarded tasks must be direct downstream tasks with a trigger
        rule that keeps them from running when the gate fails.
        """
        if not self.has_dag():  # type: ignore[no-untyped-call]
            return [f"gate {self.task_id!r} is not in a DAG"]
        problems: list[str] = []
        try:
            resolve_targets(self.dag, self.targets)
        except ValueError as error:  # UnsupportedRetrySettings
            problems.append(str(error))
        except RetryWindowGateError as error:
            problems.append(str(error))
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
        return problems

    @metrics.counts_gate_errors(by=metrics.GATE)
    def execute(self, context: Context) -> None:
        problems = self.retry_window_problems()
        if problems:
            raise RetryWindowGateError(
                "the retry window gate is misconfigured, so the guarded work does not run: "
                + "; ".join(problems)
            )
        decided = decide_run(
            self.gate_settings(), context, observations=self.observations, budget=self.budget
        )
        table = decided.table
        guard, held = [], []
        for task_id, targets in self.guard.items():
            blockers = [text for target in targets for text in table.blockers(target)]
            guard.append(
                {
                    "taskId": task_id,
                    "targets": list(targets),
                    "action": "skip" if blockers else "run",
                    "blockers": blockers,
                }
            )
            if blockers:
                held.append(task_id)
        to_skip = self._to_skip(held)
        ti = context["ti"]
        record = build(
            table,
            requests=decided.requests,
            api=decided.api,
            gate=self.task_id,
            dag_id=self.dag_id,
            run_id=str(context["dag_run"].run_id),
            try_number=int(ti.try_number),
            deadline_rule=self.deadline.describe(),
            work_unit=self.work_unit,
            guard=guard,
            skipped=[task.task_id for task in to_skip],
        )
        metrics.gate_decided(record, by=metrics.GATE)
        for row in table.decisions:
            self.log.info("Retry window %s: %s", row.label, row.reason)
        self.log.info("Retry window status update:\n%s", record["statusUpdate"])
        # the record first: skipping ends the task, and the evidence must survive it
        ti.xcom_push(key="return_value", value=record)
        if not to_skip:
            self.log.info("Every guarded task may run.")
            return
        self.log.info("Skipping %s", ", ".join(task.task_id for task in to_skip))
        self.skip(ti=ti, tasks=to_skip)

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
