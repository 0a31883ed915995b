"""The gate over one DAG run, top to bottom: read, observe, decide.

:func:`decide_run` is the whole path the gate operator and the sensor share:
it finds the targets in the run's DAG, reads one snapshot of the run through
the REST API, observes each task instance of each target (every map index of a
mapped one), and decides. They then record the
decision (:mod:`~airflow_retrywindow.gate.record`) and skip what may not run.

This module and :mod:`~airflow_retrywindow.gate.targets` are the gate's
Airflow-facing parts: they take the task context, the DAG's tasks and the
connection to the API (Airflow is imported when they run, not on import). The
stages (:mod:`~airflow_retrywindow.gate.read`,
:mod:`~airflow_retrywindow.gate.observe`, :mod:`~airflow_retrywindow.gate.decide`,
:mod:`~airflow_retrywindow.gate.record`) import no Airflow.

Any problem - a target outside the DAG, settings the model cannot express, an
unreachable API, a missing connection, a fixture the model refuses - raises
:class:`RetryWindowGateError`: the caller must then not let the guarded work run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import pendulum

from airflow_retrywindow.exceptions import RetryWindowGateError
from airflow_retrywindow.gate.approve import ApprovalReader
from airflow_retrywindow.gate.budget import Budget
from airflow_retrywindow.gate.decide import DecisionTable, decide
from airflow_retrywindow.gate.observe import observe_run, parse_observations
from airflow_retrywindow.gate.read import RunReader, read_snapshot
from airflow_retrywindow.gate.targets import Target, own_map_indexes, resolve_targets
from airflow_retrywindow.redaction import describe_exception
from airflow_retrywindow.timing.deadline import Deadline
from airflow_retrywindow.timing.work import Work


class GateReader(RunReader, ApprovalReader, Protocol):
    """Every read of one gate evaluation, through one client: one token for all."""


@dataclass(frozen=True)
class GateSettings:
    """What a gate decides about, and how it reads the run.

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


@dataclass(frozen=True)
class GateDecision:
    """What the gate decided about one run, and how it read the run.

    :param table: the decisions.
    :param requests: REST API requests made.
    :param api: the API's base URL, without credentials.
    :param reader: the client that read the run, for any further read of the same
        evaluation (an approval), so that it needs no second token.
    """

    table: DecisionTable
    requests: int
    api: str
    reader: GateReader | None = None


def decide_run(
    settings: GateSettings,
    context: Mapping[str, Any],
    *,
    observations: object = None,
    budget: Budget | None = None,
) -> GateDecision:
    """Decide every target of the context's run now.

    :param settings: the gate's settings.
    :param context: the Airflow task context of the deciding task.
    :param observations: the rendered explicit observations, if any.
    :param budget: the rendered resource budget, if any.
    :raises RetryWindowGateError: when anything stops a sound decision.
    """
    with _fail_closed():
        dag, run = context["dag"], context["dag_run"]
        targets = resolve_targets(dag, settings.targets)
        deadline = settings.deadline.resolve(context)
        # bad observations are refused before any request is made
        explicit = parse_observations(
            observations,
            [target.task_id for target in targets],
            as_of=pendulum.now("UTC"),
            mapped=[target.task_id for target in targets if target.mapped],
        )
        reader = _client(settings)
        snapshot = read_snapshot(reader, str(dag.dag_id), str(run.run_id), targets)
        own = _own_map_indexes(context, targets)
        observed = observe_run(targets, snapshot, explicit, own_map_indexes=own)
        table = decide(
            observed,
            as_of=pendulum.now("UTC"),
            deadline=deadline,
            max_observation_age=settings.max_observation_age,
            origin=context.get("data_interval_start"),
            pools=snapshot.pools,
            budget=budget,
        )
        return GateDecision(table, snapshot.requests, snapshot.api, reader)


def _own_map_indexes(context: Mapping[str, Any], targets: list[Target]) -> dict[str, int]:
    """Targets decided for the deciding task instance's map index only (a gate in a
    mapped task group; see :func:`~airflow_retrywindow.gate.targets.own_map_indexes`)."""
    deciding, ti = context.get("task"), context.get("ti")
    if deciding is None or ti is None:
        return {}
    return own_map_indexes(context["dag"], deciding, int(ti.map_index), targets)


def _client(settings: GateSettings) -> GateReader:
    """The REST API reader of the gate's connection (no request is made yet)."""
    from airflow_retrywindow.hooks.airflow_api import AirflowApiHook

    hook = AirflowApiHook(settings.conn_id, page_size=settings.page_size, timeout=settings.timeout)
    return hook.get_conn()


@contextmanager
def _fail_closed() -> Iterator[None]:
    """Turn any error into a :class:`RetryWindowGateError`, so the guarded work does not run."""
    try:
        yield
    except RetryWindowGateError:
        raise
    except Exception as error:
        # the message may be stored (the task's failure): secrets masked, length capped
        raise RetryWindowGateError(
            f"the retry window gate could not decide, so the guarded work does not run: "
            f"{describe_exception(error)}"
        ) from error
