"""The read of one pool as a dependency, through Airflow's REST API.

The retry-start check (:mod:`.check`), the triggerer's hold
(:mod:`airflow_retrywindow.triggers.dependency_hold`) and the gate
(:mod:`airflow_retrywindow.gate.read`) all read a pool here, so all see the same state
of the same pool. A read is at most three requests, each a count with at most one page
of 100 rows, whatever the pool holds (:class:`~.fleet.PoolCount`):

1. the task instances waiting for a retry, and the newest 100 of them;
2. those in a retry, held or under way, and the first 100 of them by id: with the
   waiting ones, the probes' candidates;
3. the pool's successes since the failing began, and the newest of them (one row):
   only when enough are failing to trip it.

Every cut-off is on the API server's clock, as the answers before it measured it. The
client is passed in; nothing here imports Airflow but :func:`forced_state`, which reads
an Airflow Variable when it is called.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any, Protocol

import pendulum

from airflow_retrywindow.dependency.fleet import (
    CANDIDATES,
    IN_RETRY,
    RETRY_TRIES,
    SUCCESS,
    UP_FOR_RETRY,
    PoolCount,
    PoolListing,
    failing_since,
)
from airflow_retrywindow.dependency.settings import DependencySettings
from airflow_retrywindow.records.dependency_state import FORCED
from airflow_retrywindow.redaction import describe_exception

log = logging.getLogger(__name__)

#: the Airflow Variable on-call sets to force a pool ``open`` or ``closed``
FORCE_VARIABLE = "retry_window_dependency_{pool}"


class PoolReader(Protocol):
    """The read of a pool: that of ``AirflowApiHook(...).get_conn()``."""

    def pool_listing(
        self,
        pool: str,
        states: Collection[str],
        *,
        try_numbers: Collection[int] = (),
        ended_since: datetime | None = None,
        order_by: str = "id",
        limit: int = 0,
    ) -> PoolListing: ...


def read_pool(
    api: PoolReader,
    pool: str,
    settings: DependencySettings,
    *,
    forced: str | None = None,
    now: pendulum.DateTime | None = None,
) -> PoolCount:
    """What one read counts of ``pool``, at the API server's "now".

    :param api: the REST API client.
    :param pool: the pool.
    :param settings: the pool's dependency settings (its window and trip).
    :param forced: the state on-call forces (:func:`forced_state`), if any.
    :param now: this worker's "now" (default: the clock's after the first two requests).
    :raises Exception: whatever the client raises when the pool cannot be read.
    """
    # the newest first, and with those in a retry the probes' candidates
    waiting = api.pool_listing(pool, {UP_FOR_RETRY}, order_by="-end_date", limit=CANDIDATES)
    in_retry = api.pool_listing(
        pool, IN_RETRY, try_numbers=RETRY_TRIES, order_by="id", limit=CANDIDATES
    )
    # measured by the two answers: the look-back and the read's time are the server's
    local = now or pendulum.now("UTC")
    read_at = server_now(api, local)
    last_failure = waiting.first.end_date if waiting.first else None
    window_start = read_at - timedelta(seconds=settings.window_seconds)
    since = max(_began(waiting, in_retry) or window_start, window_start)
    tripped = waiting.total + in_retry.total >= settings.trip_tasks
    # a pool below its trip is closed whatever succeeded: the third request is not needed
    successes = (
        api.pool_listing(pool, {SUCCESS}, ended_since=since, order_by="-end_date", limit=1)
        if tripped and forced not in FORCED
        else PoolListing((), 0)
    )
    return PoolCount(
        pool=pool,
        read_at=read_at,
        waiting=waiting.total,
        last_failure=last_failure,
        in_retry=in_retry.total,
        candidates=in_retry.rows,
        successes=successes.total,
        last_success=successes.first.end_date if successes.first else None,
        since=since,
        forced=forced,
        clock_offset=read_at - local,
        waiting_tries=waiting.rows,
    )


def _began(waiting: PoolListing, in_retry: PoolListing) -> pendulum.DateTime | None:
    """When the failing began, as far as the read shows: the newest failure waiting for
    its retry (a success before it recovered nothing), else the oldest retry listed."""
    newest = waiting.first.end_date if waiting.first else None
    return newest or failing_since(in_retry.rows, None)


def server_now(api: object, now: pendulum.DateTime | None = None) -> pendulum.DateTime:
    """Now on the API server's clock, as its answers told it (this worker's without them).

    :param api: the client whose answers measured the server's clock, if any did.
    :param now: this worker's "now" (default: the clock's).
    """
    local = now or pendulum.now("UTC")
    offset: Any = getattr(api, "clock_offset", None)
    if offset is None:
        return local
    middle: timedelta = (offset.low + offset.high) / 2
    return local + middle


def forced_state(pool: str) -> str | None:
    """The state on-call forces with the pool's Variable, or ``None``.

    A Variable that cannot be read, or holds neither state, is logged and forces nothing.
    """
    from airflow.sdk import Variable

    name = FORCE_VARIABLE.format(pool=pool)
    try:
        value = Variable.get(name, default=None)
    except Exception as error:
        log.warning(
            "Retry window: Variable %s could not be read (%s)", name, describe_exception(error)
        )
        return None
    if value is None or not str(value).strip():
        return None
    forced = str(value).strip().lower()
    if forced not in FORCED:
        log.warning(
            "Retry window: Variable %s = %r is neither %s; it is ignored",
            name,
            value,
            " nor ".join(sorted(FORCED)),
        )
        return None
    return forced
