"""A failing try and its pool's breaker: read before the retry is decided, tripped before
the try's slot is freed.

Airflow 3.3's retry policy runs in the failing try's process while the try still holds
its pool slot. Once a ``RetryWindowPolicy`` classed the failure, a failure classed
retryable or unknown counts against the dependency, and in a breaker pool:

* :func:`read` reads the pool (one request): while its breaker is open, the retry waits
  at least :func:`~airflow_retrywindow.breaker.law.open_wait`, a floor the model then
  checks against the deadline like any wait, so the breaker's next probes go to other
  task instances;
* :func:`failed_try`: when the try ends ``failed`` (an unknown outcome, a last attempt),
  which nothing of its task instance's row tells apart from a task's own bug, it pushes
  :func:`~airflow_retrywindow.records.breaker_state.failure_key` for the controller's
  round to count; and when the breaker is closed and ``trip_calls`` calls, this one
  included, were refused since the pool's last success, it opens it at once: no slot
  it frees, nor any other, goes to a task that would call the dependency known down.
  Only while the breaker's controller runs (its task is alive and a triggerer is
  healthy), so a pool is never held where no controller would give it back.

Neither raises: the controller counts the failure in its next round whatever happens here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import pendulum

from airflow_retrywindow import configuration, metrics
from airflow_retrywindow.breaker.control import PAGE, SUCCESS, UP_FOR_RETRY, server_now
from airflow_retrywindow.breaker.law import open_wait, tripped
from airflow_retrywindow.breaker.settings import CONTROLLER_DAG, CONTROLLER_TASK, BreakerSettings
from airflow_retrywindow.labels import label
from airflow_retrywindow.records.breaker_state import CLOSED, OPEN, BreakerState, failure_key
from airflow_retrywindow.redaction import describe_exception
from airflow_retrywindow.timing.time_limit import TimeLimit

log = logging.getLogger(__name__)

#: the failure classes that count against the dependency
COUNTED = frozenset({"retryable", "unknown"})
#: the states of the controller's task while it runs the breakers (a paused controller's
#: waits ``scheduled``: it gives nothing back, so nothing is tripped)
CONTROLLING = frozenset({"deferred", "running", "queued"})


@dataclass(frozen=True)
class BreakerRead:
    """A failing try's breaker pool, as read before its retry is decided.

    :param api: the REST reader it was read with.
    :param row: the pool.
    :param state: its breaker, ``None`` before a controller watched it.
    :param settings: how the breaker is run.
    :param at: when it was read, on the API server's clock.
    """

    api: Any
    row: Any
    state: BreakerState | None
    settings: BreakerSettings
    at: pendulum.DateTime

    def wait(self) -> int | None:
        """The shortest wait of the retry while the breaker is open, else ``None``."""
        return open_wait(self.state, self.at, self.settings) if self.state else None


def read(context: Mapping[str, Any] | None, failure: str) -> BreakerRead | None:
    """The failing try's breaker pool, when its failure counts; never raises."""
    if context is None or failure not in COUNTED:
        return None
    pool = str(context["task"].pool)
    try:
        settings = configuration.breaker_pools().of(pool)
        if settings is None:
            return None
        from airflow_retrywindow.hooks.airflow_api import AirflowApiHook

        limit = TimeLimit.starting_now(
            configuration.clock_read_limit() / 2,
            what=f"the read of pool {pool}'s breaker",
            option="clock_read_limit",
        )
        api = AirflowApiHook(
            configuration.default_conn_id(), timeout=configuration.api_timeout(), time_limit=limit
        ).get_conn()
        row = api.pool(pool)
    except Exception as error:
        _cannot(pool, "read", error)
        return None
    if row is None:
        return None
    state = BreakerState.in_description(row.description)
    return BreakerRead(
        api, row, state if state and state.pool == pool else None, settings, server_now(api)
    )


def failed_try(
    context: Mapping[str, Any] | None, failure: str, *, ends: bool, found: BreakerRead | None
) -> None:
    """Count the try's failure against its breaker pool, and trip it when it is time.

    :param context: the failing try's task context.
    :param failure: the class the policy gave the failure.
    :param ends: whether the try ends ``failed`` (no retry follows).
    :param found: the pool as :func:`read` read it; without it the failure is only marked.
    """
    if context is None or failure not in COUNTED:
        return
    pool = str(context["task"].pool)
    try:
        if configuration.breaker_pools().of(pool) is None:
            return
        ti = context["ti"]
        if ends:  # through the task's supervisor: even when the REST API cannot be read
            ti.xcom_push(key=failure_key(pool), value=int(ti.try_number))
        opened = _trip(context, found) if found is not None else None
    except Exception as error:
        _cannot(pool, "trip", error)
        return
    if opened is not None:
        metrics.breaker_trip(context, pool)
        log.warning("Retry window breaker %s: %s", pool, opened.reason)


def _trip(context: Mapping[str, Any], found: BreakerRead) -> BreakerState | None:
    api, row, state = found.api, found.row, found.state
    if state is not None and state.phase == OPEN and row.slots > 0:
        # a probe that failed: its slot is closed before it is freed, or the scheduler
        # would give it to the next task, a second call into the outage
        api.set_pool(row, 0, row.description or "")
        return None
    if state is None or state.phase != CLOSED:
        return None  # no controller watches it yet, or it holds already
    listing = api.pool_listing(
        row.name, {SUCCESS, UP_FOR_RETRY},
        ended_since=found.at - timedelta(seconds=found.settings.round),
        order_by="-end_date", limit=PAGE,
    )  # fmt: skip
    refused = 1 + _refused_since_success(listing.rows)
    ti = context["ti"]
    by = f"{ti.dag_id}.{label(ti.task_id, int(getattr(ti, 'map_index', -1)))} ({ti.run_id})"
    closed = replace(state, size=row.slots, slots=row.slots)
    opened = tripped(closed, refused, found.at, by, found.settings)
    if opened is None:
        return None
    controller = api.task_instance_count(CONTROLLER_DAG, CONTROLLER_TASK, CONTROLLING)
    if not (controller and api.triggerer_runs()):
        log.warning(
            "Retry window breaker %s: %d calls refused, but no controller runs it (the DAG %s "
            "and a healthy triggerer): the pool is not held", row.name, refused, CONTROLLER_DAG,
        )  # fmt: skip
        return None
    api.set_pool(row, 0, opened.described(row.description))
    return opened


def _refused_since_success(rows: Any) -> int:
    """The retries that ended after the newest served call began: the start of the newest
    success's try (rows newest first). A call under way when the dependency went down may
    still be served after the refusals began, and counts for nothing against them."""
    starts = [row.start_date for row in rows if row.state == SUCCESS and row.start_date]
    began = max(starts, default=None)
    return sum(
        1
        for row in rows
        if row.state != SUCCESS and (began is None or (row.end_date and row.end_date > began))
    )


def _cannot(pool: str, what: str, error: Exception) -> None:
    log.warning(
        "Retry window breaker %s: the failing try could not %s it (%s); the controller "
        "counts the failure in its next round", pool, what, describe_exception(error),
    )  # fmt: skip
