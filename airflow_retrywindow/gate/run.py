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

**Breakers.** The pools the targets use carry the breakers of the breaker pools in
their descriptions (:mod:`~airflow_retrywindow.gate.breaker_hold`): a repeat in a pool
whose breaker is open is ``dependency-held``.

Any problem - a target outside the DAG, settings the model cannot express, an
unreachable API, a missing connection, a fixture the model refuses - raises
:class:`RetryWindowGateError`: the caller must then not let the guarded work run.

**One clock.** The run's times (a try's end, the data interval) are the API
server's; "now" is this worker's. The read measures how far the two clocks
disagree (:mod:`~airflow_retrywindow.timing.skew`): beyond ``[retry_window]
clock_skew_tolerance`` the gate refuses, naming the clock that runs ahead and by
how much; within it the gate decides at the earliest and the latest "now" either
clock may mean (this worker's times moved onto the server's clock for the
server's), and keeps the stricter decision of the two for each task instance.

**A time limit.** A whole decision may take ``[retry_window] gate_timeout``:
every request waits at most the time left, and a decision that runs out is
refused.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Protocol

import pendulum

from airflow_retrywindow import configuration
from airflow_retrywindow.exceptions import RetryWindowGateError
from airflow_retrywindow.gate.approve import ApprovalReader
from airflow_retrywindow.gate.budget import Budget
from airflow_retrywindow.gate.decide import DecisionTable, TargetDecision, decide
from airflow_retrywindow.gate.observe import observe_run, parse_observations
from airflow_retrywindow.gate.read import RunReader, RunSnapshot, read_snapshot
from airflow_retrywindow.gate.targets import Target, own_map_indexes, resolve_targets
from airflow_retrywindow.redaction import describe_exception
from airflow_retrywindow.timing.deadline import Deadline
from airflow_retrywindow.timing.skew import (
    ClockOffset,
    confirmed_ahead,
    decide_at_both_ends,
    strictest,
)
from airflow_retrywindow.timing.time_limit import TimeLimit
from airflow_retrywindow.timing.work import Work


class GateReader(RunReader, ApprovalReader, Protocol):
    """Every read of one gate evaluation, through one client: one token for all."""

    def version(self) -> str: ...


@dataclass(frozen=True)
class GateSettings:
    """What a gate decides about, and how it reads the run.

    :param targets: task id -> the estimate for one attempt of it.
    :param deadline: when the delivery is due.
    :param max_observation_age: the allowed age of an observation, whole seconds.
    :param conn_id: the Airflow connection to the REST API.
    :param page_size: rows asked for per page.
    :param timeout: seconds to wait for each request.
    :param time_limit: the time the whole decision may take; :func:`decide_run`
        starts it (``[retry_window] gate_timeout``).
    """

    targets: Mapping[str, Work]
    deadline: Deadline
    max_observation_age: int
    conn_id: str
    page_size: int
    timeout: float
    time_limit: TimeLimit | None = None


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
        configuration.check()  # a bad [retry_window] value refuses before anything is read
        limit = TimeLimit.starting_now(configuration.gate_timeout())
        tolerance = timedelta(seconds=configuration.clock_skew_tolerance())
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
        reader = _client(replace(settings, time_limit=limit))
        snapshot = read_snapshot(
            reader,
            str(dag.dag_id),
            str(run.run_id),
            targets,
            breakers=configuration.breaker_pools(),
        )
        snapshot = replace(snapshot, clock=_confirmed_clock(reader, limit))
        if snapshot.clock is not None:
            snapshot.clock.check(tolerance)  # too far apart: refuse, naming the clock
        own = _own_map_indexes(context, targets)
        table = decide_at_both_ends(
            snapshot.clock,
            lambda now, shift: decide(
                observe_run(
                    targets, on_server_clock(snapshot, shift), explicit, own_map_indexes=own
                ),
                as_of=now,
                deadline=deadline,
                max_observation_age=settings.max_observation_age,
                origin=context.get("data_interval_start"),
                pools=snapshot.pools,
                budget=budget,
                breakers=snapshot.breakers,
            ),
            strictest_table,
        )
        if limit.expired:  # the decision itself outlasted the limit: it is stale
            raise RetryWindowGateError(limit.describe())
        return GateDecision(table, snapshot.requests, snapshot.api, reader)


def on_server_clock(snapshot: RunSnapshot, shift: timedelta) -> RunSnapshot:
    """``snapshot`` with the times this worker noted (when each answer arrived) moved by
    ``shift`` onto the API server's clock; the API's own times stay as they are.

    :param snapshot: what the read found.
    :param shift: the server's clock minus this worker's, within the measurement.
    """
    if not shift:
        return snapshot
    moved = {
        instance: None if row is None else replace(row, observed_at=row.observed_at + shift)
        for instance, row in snapshot.latest_tries.items()
    }
    return replace(snapshot, latest_tries=moved)


def strictest_table(tables: Sequence[DecisionTable]) -> DecisionTable:
    """One table from the tables decided at each possible "now": for every task
    instance the decision that allows least (:func:`~airflow_retrywindow.timing.skew.strictest`),
    with the fixtures that decided those and no others.

    :param tables: the tables, each of the same task instances in the same order,
        earlier "now" first.
    """
    if len(tables) == 1:
        return tables[0]
    chosen: list[tuple[int, TargetDecision]] = []
    for rows in zip(*(table.decisions for table in tables), strict=True):
        if len({(row.task_id, row.map_index) for row in rows}) != 1:
            raise RetryWindowGateError(
                "the decisions at both ends of the clock skew differ in order"
            )
        candidates = list(enumerate(rows))
        chosen.append(
            strictest(
                candidates,
                decision=lambda pair: pair[1].decision,
                wait_until=lambda pair: pair[1].earliest_start,
            )
        )
    kept: dict[tuple[int, int], int] = {}
    fixtures: list[dict[str, Any]] = []
    decisions: list[TargetDecision] = []
    for which, row in chosen:
        if row.fixture is None:
            decisions.append(row)
            continue
        key = (which, row.fixture)
        if key not in kept:
            kept[key] = len(fixtures)
            fixtures.append(tables[which].fixtures[row.fixture])
        decisions.append(replace(row, fixture=kept[key]))
    return replace(tables[-1], decisions=tuple(decisions), fixtures=tuple(fixtures))


def _clock_of(reader: GateReader) -> ClockOffset | None:
    """The reader's measurement of the API server's clock.

    Every answer of the REST reader measures it; a reader answering from memory
    (the pipeline's tests) has none, and the worker's clock is used.
    """
    found = getattr(reader, "clock_offset", None)
    return found if isinstance(found, ClockOffset) else None


def _confirmed_clock(reader: GateReader, limit: TimeLimit) -> ClockOffset | None:
    """The reader's measurement of the API server's clock; a verdict that this worker's
    clock is ahead is confirmed first, as the retry policy confirms its own beyond the
    tolerance (:func:`~airflow_retrywindow.policies.server_clock.server_clock`).

    A busy API server answers with a ``Date`` seconds old, which makes this worker's
    clock look ahead: it is asked again (its version, one request)
    (:func:`~airflow_retrywindow.timing.skew.confirmed_ahead`), within the decision's time.
    Within the tolerance too: the gate decides at both ends of the measurement, and at
    its early end a backoff just over looks still running, and the retry is skipped
    (a gate does not wait).
    """
    clock = _clock_of(reader)
    if clock is None:
        return None

    def again() -> ClockOffset:
        reader.version()  # its answer's Date is taken with the others' by the reader
        return _clock_of(reader) or clock

    return confirmed_ahead(clock, again, timedelta(0), limit.left)


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

    hook = AirflowApiHook(
        settings.conn_id,
        page_size=settings.page_size,
        timeout=settings.timeout,
        time_limit=settings.time_limit,
    )
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
