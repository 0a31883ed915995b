"""Reviewing the targets of a DAG run: Airflow's view, explicit observations, the model.

This is the part the gate operator and the sensor share. It resolves each
target in the gate's own DAG (its retry settings and whether a
``RetryWindowPolicy`` classifies its failures), reads the run through the REST
API, lets explicit observations override what Airflow says, and hands
everything to the :mod:`~airflow_retrywindow.gate.decision_table`.

Any problem - a target outside the DAG, settings the model cannot express, an
unreachable API, a missing connection, a fixture the model refuses - raises
:class:`RetryWindowGateError`: the caller must then not let the guarded work run.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pendulum

from airflow_retrywindow.exceptions import RetryWindowGateError
from airflow_retrywindow.gate.budget import Budget
from airflow_retrywindow.gate.decision_table import DecisionTable, decide
from airflow_retrywindow.gate.targets import (
    FAILED_STATES,
    Observed,
    Target,
    latest_try,
    needs_history,
    observe,
    observe_explicitly,
    parse_observations,
    target_of,
)
from airflow_retrywindow.hooks.airflow_api import AirflowApi, TaskInstanceRow, XComKey
from airflow_retrywindow.policies import evidence
from airflow_retrywindow.policies.check import gated
from airflow_retrywindow.redaction import describe_exception
from airflow_retrywindow.timing.deadline import Deadline
from airflow_retrywindow.timing.retry_settings import RetrySettings, airflow_delay_cap
from airflow_retrywindow.timing.work import Work

#: the trigger rule under which a guarded task runs only after its gate succeeded: any
#: other lets it run after the gate failed or was skipped, without a decision
SAFE_TRIGGER_RULES = frozenset({"all_success"})
#: the XCom keys a RetryWindowPolicy leaves (evidence and failure class)
POLICY_XCOM_PREFIX = "retry_window."


@dataclass(frozen=True)
class Review:
    """What one evaluation produced.

    :param table: the decisions.
    :param requests: REST API requests made.
    :param api: the API's base URL, without credentials.
    """

    table: DecisionTable
    requests: int
    api: str


@dataclass(frozen=True)
class RunReview:
    """How to review the targets of the run a task belongs to.

    :param targets: task id -> the estimate for one attempt of it.
    :param deadline: when the delivery is due.
    :param max_observation_age: the allowed age of an observation, whole seconds.
    :param conn_id: the Airflow connection to the REST API.
    :param page_size: rows asked for per page.
    :param timeout: seconds to wait for each request.
    """

    targets: Mapping[str, Work]
    deadline: Deadline
    max_observation_age: int
    conn_id: str
    page_size: int
    timeout: float

    def resolve_targets(self, dag: Any) -> list[Target]:
        """The targets as tasks of ``dag``; raises when one cannot be a target."""
        return [self._target(dag, task_id, work) for task_id, work in self.targets.items()]

    def _target(self, dag: Any, task_id: str, work: Work) -> Target:
        task = task_in(dag, task_id)
        return target_of(task_id, work, task, settings_of(task))

    def review(
        self,
        context: Mapping[str, Any],
        *,
        observations: object = None,
        budget: Budget | None = None,
    ) -> Review:
        """Decide every target of the context's run now.

        :param context: the Airflow task context of the deciding task.
        :param observations: the rendered explicit observations, if any.
        :param budget: the rendered resource budget, if any.
        :raises RetryWindowGateError: when anything stops a sound decision.
        """
        try:
            return self._review(context, observations, budget)
        except RetryWindowGateError:
            raise
        except Exception as error:
            # the message may be stored (the task's failure): secrets masked, length capped
            raise RetryWindowGateError(
                f"the retry window gate could not decide, so the guarded work does not run: "
                f"{describe_exception(error)}"
            ) from error

    def _review(
        self, context: Mapping[str, Any], observations: object, budget: Budget | None
    ) -> Review:
        dag = context["dag"]
        run = context["dag_run"]
        dag_id, run_id = str(dag.dag_id), str(run.run_id)
        targets = self.resolve_targets(dag)
        ids = [target.task_id for target in targets]
        deadline = self.deadline.resolve(context)
        # bad observations are refused before any request is made
        explicit = parse_observations(observations, ids, as_of=pendulum.now("UTC"))
        api = AirflowApi.from_connection(
            self.conn_id, page_size=self.page_size, timeout=self.timeout
        )
        current = unmapped_rows(api.task_instances(dag_id, run_id, ids), ids)
        latest: dict[str, TaskInstanceRow | None] = {}
        for task_id in ids:
            row = current.get(task_id)
            if needs_history(row):
                latest[task_id] = latest_try(api.task_tries(dag_id, run_id, task_id))
            else:
                latest[task_id] = row
        failed = [t for t in targets if (r := latest[t.task_id]) and r.state in FAILED_STATES]
        keys = api.xcom_keys(dag_id, run_id, POLICY_XCOM_PREFIX) if failed else []
        observed = {
            target.task_id: self._observe(
                api,
                dag_id=dag_id,
                run_id=run_id,
                target=target,
                row=latest[target.task_id],
                keys=keys,
            )
            for target in targets
        }
        for task_id, observation in explicit.items():
            observed[task_id] = observe_explicitly(
                observed[task_id].target, observation, observed[task_id]
            )
        views = [observed[task_id] for task_id in ids]
        pools = api.pools({view.pool for view in views})
        as_of = pendulum.now("UTC")
        table = decide(
            views,
            as_of=as_of,
            deadline=deadline,
            max_observation_age=self.max_observation_age,
            origin=context.get("data_interval_start"),
            pools=pools,
            budget=budget,
        )
        return Review(table=table, requests=api.requests, api=api.base_url)

    def _observe(
        self,
        api: AirflowApi,
        *,
        dag_id: str,
        run_id: str,
        target: Target,
        row: TaskInstanceRow | None,
        keys: list[XComKey],
    ) -> Observed:
        failure, source = None, ""
        if row is not None and row.state in FAILED_STATES:
            failure, source = _failure(
                api, dag_id=dag_id, run_id=run_id, target=target, row=row, keys=keys
            )
        return observe(target, row, failure=failure, failure_source=source)


def unmapped_rows(
    rows: Sequence[TaskInstanceRow], task_ids: Collection[str]
) -> dict[str, TaskInstanceRow]:
    """task id -> its task instance, for the targets that have one yet.

    A target whose task instances are all mapped (``map_index`` 0, 1, ...: it sits
    in a mapped task group) has none the gate can decide about; it is refused
    rather than taken for a task never tried, which would let its work run.

    :param rows: the run's task instances of the targets.
    :param task_ids: the targets.
    :raises RetryWindowGateError: naming the first such target.
    """
    found = {row.task_id: row for row in rows if row.map_index == -1}
    for task_id in task_ids:
        indexes = sorted(row.map_index for row in rows if row.task_id == task_id)
        if task_id not in found and indexes:
            raise RetryWindowGateError(
                f"target {task_id!r} has only mapped task instances in this run (map_index "
                f"{', '.join(map(str, indexes[:5]))}{', ...' if len(indexes) > 5 else ''}), "
                "none with map_index -1 to decide about; it is probably inside a mapped task "
                "group. Target tasks outside mapped task groups"
            )
    return found


def _failure(
    api: AirflowApi,
    *,
    dag_id: str,
    run_id: str,
    target: Target,
    row: TaskInstanceRow,
    keys: list[XComKey],
) -> tuple[str | None, str]:
    """The failure class the policy recorded for the row's try, and where it was read.

    XComs are cleared when a try starts, so a key present now was pushed by the
    latest try that started; the timestamp check guards against anything else.
    """
    mine = [
        key
        for key in keys
        if key.task_id == target.task_id
        and key.map_index == -1
        and (row.start_date is None or key.timestamp >= row.start_date)
    ]
    marked = [(key, evidence.failure_of_key(key.key)) for key in mine]
    classes = [(key, failure) for key, failure in marked if failure is not None]
    if classes:
        key, failure = max(classes, key=lambda item: item[0].timestamp)
        return failure, f"XCom {key.key} of try {row.try_number}"
    if any(key.key == evidence.EVIDENCE_KEY for key in mine):
        # evidence without the class in a key (an older policy): read that one value
        entry = api.xcom_value(dag_id, run_id, target.task_id, evidence.EVIDENCE_KEY)
        if isinstance(entry, dict) and entry.get("tryNumber") == row.try_number:
            recorded = entry.get("failure")
            if isinstance(recorded, str):
                return recorded, f"XCom {evidence.EVIDENCE_KEY} of try {row.try_number}"
    return None, ""


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


# -- checked for the gate operator and the sensor when the DAG is parsed ------------


def unsafe_trigger_rule(task: Any, gate_id: str) -> str | None:
    """Why ``task`` could run without a decision of ``gate_id``, or ``None``."""
    rule = str(getattr(task.trigger_rule, "value", task.trigger_rule))
    if rule in SAFE_TRIGGER_RULES:
        return None
    return (
        f"guarded task {task.task_id!r} has trigger_rule {rule!r}, which would let it run "
        f"after {gate_id!r} failed or was skipped, without a decision; use all_success"
    )
