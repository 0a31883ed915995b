"""A failing try and its pool's breaker: the try opens it before its slot is freed.

Airflow 3.3's retry policy runs in the failing try's process while the try still holds
its pool slot. :func:`failed_try` is called there once a ``RetryWindowPolicy`` classed the
failure. A failure classed retryable or unknown counts against the dependency:

* when the try ends ``failed`` (an unknown outcome, a last attempt), which nothing of
  its task instance's row tells apart from a task's own bug, it pushes
  :func:`~airflow_retrywindow.records.breaker_state.failure_key` for the controller's
  round to count;
* when the pool's breaker is closed and ``trip_calls`` calls, this one included, were
  refused since the pool's last success, the try opens it at once: no slot it frees, nor
  any other, goes to a task that would call the dependency known down. Only while the
  breaker's controller runs (its task is alive and a triggerer is healthy), so a pool is
  never held where no controller would give it back.

A trip costs two requests when it does not open the breaker and five when it does; it
never raises: the controller counts the failure in its next round whatever happens here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from datetime import timedelta
from typing import Any

from airflow_retrywindow import configuration, metrics
from airflow_retrywindow.breaker.control import PAGE, SUCCESS, UP_FOR_RETRY, server_now
from airflow_retrywindow.breaker.law import tripped
from airflow_retrywindow.breaker.settings import CONTROLLER_DAG, CONTROLLER_TASK
from airflow_retrywindow.labels import label
from airflow_retrywindow.records.breaker_state import CLOSED, BreakerState, failure_key
from airflow_retrywindow.redaction import describe_exception
from airflow_retrywindow.timing.time_limit import TimeLimit

log = logging.getLogger(__name__)

#: the failure classes that count against the dependency
COUNTED = frozenset({"retryable", "unknown"})
#: the states of the controller's task while it runs the breakers
CONTROLLING = frozenset({"deferred", "running", "queued", "scheduled"})


def failed_try(context: Mapping[str, Any] | None, failure: str, *, ends: bool) -> None:
    """Count the try's failure against its breaker pool, and trip it when it is time.

    :param context: the failing try's task context.
    :param failure: the class the policy gave the failure.
    :param ends: whether the try ends ``failed`` (no retry follows).
    """
    if context is None or failure not in COUNTED:
        return
    pool = str(context["task"].pool)
    try:
        settings = configuration.breaker_pools().of(pool)
        if settings is None:
            return
        ti = context["ti"]
        if ends:
            ti.xcom_push(key=failure_key(pool), value=int(ti.try_number))
        opened = _trip(context, pool, settings)
    except Exception as error:
        log.warning(
            "Retry window breaker %s: the failing try could not trip it (%s); the controller "
            "counts the failure in its next round", pool, describe_exception(error),
        )  # fmt: skip
        return
    if opened is not None:
        metrics.breaker_trip(context, pool)
        log.warning("Retry window breaker %s: %s", pool, opened.reason)


def _trip(context: Mapping[str, Any], pool: str, settings: Any) -> BreakerState | None:
    from airflow_retrywindow.hooks.airflow_api import AirflowApiHook

    limit = TimeLimit.starting_now(
        configuration.clock_read_limit() / 2,
        what=f"the trip of pool {pool}'s breaker",
        option="clock_read_limit",
    )
    api = AirflowApiHook(
        configuration.default_conn_id(), timeout=configuration.api_timeout(), time_limit=limit
    ).get_conn()
    row = api.pool(pool)
    state = BreakerState.in_description(row.description) if row is not None else None
    if row is None or state is None or state.phase != CLOSED:
        return None  # no controller watches it yet, or it holds already
    now = server_now(api)
    listing = api.pool_listing(
        pool, {SUCCESS, UP_FOR_RETRY}, ended_since=now - timedelta(seconds=settings.round),
        order_by="-end_date", limit=PAGE,
    )  # fmt: skip
    refused = 1 + _refused_since_success(listing.rows)
    ti = context["ti"]
    by = f"{ti.dag_id}.{label(ti.task_id, int(getattr(ti, 'map_index', -1)))} ({ti.run_id})"
    opened = tripped(replace(state, size=row.slots, slots=row.slots), refused, now, by, settings)
    if opened is None:
        return None
    if not (
        api.task_instance_count(CONTROLLER_DAG, CONTROLLER_TASK, CONTROLLING)
        and api.triggerer_runs()
    ):
        log.warning(
            "Retry window breaker %s: %d calls refused, but no controller runs it (the DAG %s "
            "and a healthy triggerer): the pool is not held", pool, refused, CONTROLLER_DAG,
        )  # fmt: skip
        return None
    api.set_pool(row, 0, opened.described(row.description))
    return opened


def _refused_since_success(rows: Any) -> int:
    """The retries listed before the newest success (rows newest first)."""
    count = 0
    for row in rows:
        if row.state == SUCCESS:
            break
        count += 1
    return count
