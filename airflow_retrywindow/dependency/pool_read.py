"""The read of one pool as a dependency, through Airflow's REST API.

The retry-start check (:mod:`.check`) and the gate (:mod:`airflow_retrywindow.gate.read`)
both read a pool here, so both see the same state of the same pool. A read is two
requests (the pool's waiting and live task instances, and its tries ended in the
window) and a third when a try of the pool ended failed (the failure classes the
policy pushed, across DAGs). The client is passed in; nothing here imports Airflow
but :func:`forced_state`, which reads an Airflow Variable when it is called.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

import pendulum

from airflow_retrywindow.dependency.fleet import (
    ENDED,
    FAILED,
    WAITING_OR_LIVE,
    Fleet,
    PoolTry,
    TaskKey,
)
from airflow_retrywindow.dependency.settings import DependencySettings
from airflow_retrywindow.records import evidence
from airflow_retrywindow.records.dependency_state import FORCED
from airflow_retrywindow.redaction import describe_exception

if TYPE_CHECKING:
    from airflow_retrywindow.hooks.api_reader import XComKey

log = logging.getLogger(__name__)

#: the Airflow Variable on-call sets to force a pool ``open`` or ``closed``
FORCE_VARIABLE = "retry_window_dependency_{pool}"
#: the failure classes that count (a terminal failure is the task's own)
_COUNTED = (evidence.RETRYABLE, evidence.UNKNOWN)


class PoolReader(Protocol):
    """The reads of a pool: those of ``AirflowApiHook(...).get_conn()``."""

    def pool_tries(
        self,
        pool: str,
        *,
        states: Collection[str] = (),
        ended_since: datetime | None = None,
    ) -> list[PoolTry]: ...

    def recent_xcom_keys(self, key_prefix: str, since: datetime) -> list[XComKey]: ...


def read_fleet(
    api: PoolReader,
    pool: str,
    settings: DependencySettings,
    *,
    forced: str | None = None,
    now: pendulum.DateTime | None = None,
) -> Fleet:
    """What one read finds of ``pool``: its task instances, read at the API server's "now".

    :param api: the REST API client.
    :param pool: the pool.
    :param settings: the pool's dependency settings (its window).
    :param forced: the state on-call forces (:func:`forced_state`), if any.
    :param now: this worker's "now" (default: the clock's).
    :raises Exception: whatever the client raises when the pool cannot be read.
    """
    local = now or pendulum.now("UTC")
    since = local - timedelta(seconds=settings.window_seconds)
    tries = api.pool_tries(pool, states=WAITING_OR_LIVE)
    tries += api.pool_tries(pool, states=ENDED, ended_since=since)
    # the failure classes matter only for tries that ended failed: most reads have none
    counted = (
        counted_failed(api.recent_xcom_keys(evidence.FAILURE_KEY_PREFIX, since), since)
        if any(item.state == FAILED for item in tries)
        else frozenset()
    )
    return Fleet(pool, server_now(api, local), tuple(tries), counted, forced=forced)


def counted_failed(keys: Sequence[XComKey], since: pendulum.DateTime) -> frozenset[TaskKey]:
    """The task instances whose failed try the policy classed retryable or unknown since
    ``since``, by the XCom keys it pushed."""
    counted = {evidence.failure_key(name) for name in _COUNTED}
    return frozenset(
        (str(key.dag_id), str(key.run_id), key.task_id, key.map_index)
        for key in keys
        if key.key in counted and key.timestamp >= since
    )


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
