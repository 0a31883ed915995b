"""``DependencyHoldTrigger``: a retry held by its failing pool waits in the triggerer.

A held retry holds no worker and no pool slot while it waits: the retry-start check
defers the try to this trigger (same try, no attempt spent). In the triggerer the
trigger watches the pool once a round and wakes the try only to run (it probes, it is
released in a wave, the pool closed) or to be refused at its latest start; the try's
start check then decides again before the task's code runs, so the triggerer opens no
path around the gate. A try that waited :data:`~airflow_retrywindow.dependency.settings.MAX_HOLD`
is woken once to be decided again, so a held try starts a worker at most once an hour.

Every trigger of one pool in one triggerer process shares one read a round
(:class:`PoolWatch`): a thousand held retries cost the API server what one does. The
trigger never raises: a read that fails is one round without news, and the try is
still woken at its latest start.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

import pendulum
from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_retrywindow.dependency.admission import HOLD, Retry, admit, round_of, round_start
from airflow_retrywindow.dependency.fleet import DependencyState
from airflow_retrywindow.dependency.settings import DependencySettings

log = logging.getLogger(__name__)

#: where the triggerer imports the trigger from
CLASSPATH = f"{__name__}.DependencyHoldTrigger"
#: how long after a round begins the watch reads the pool: past the round's turn, so
#: the probes of the round before have ended their tries
READ_AFTER_ROUND = 1.0


class DependencyHoldTrigger(BaseTrigger):
    """Wake a held retry when it may run, or at its latest start.

    :param pool: the pool the retry is held by.
    :param conn_id: the connection to Airflow's REST API the pool is read with.
    :param settings: the pool's dependency settings, as :class:`DependencySettings` fields.
    :param retry: the held retry, as :class:`~airflow_retrywindow.dependency.admission.Retry`
        fields (times in ISO 8601).
    :param watch_until: when the try is woken at the latest (ISO 8601, the API server's
        clock): its latest start, or an hour after the hold began.
    :param not_before: when it may be woken at the soonest (ISO 8601): a try woken
        within seconds of its deferral meets Airflow's scheduler race.
    """

    def __init__(
        self,
        *,
        pool: str,
        conn_id: str,
        settings: dict[str, Any],
        retry: dict[str, Any],
        watch_until: str,
        not_before: str,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.pool = pool
        self.conn_id = conn_id
        self.settings = dict(settings)
        self.retry = dict(retry)
        self.watch_until = watch_until
        self.not_before = not_before

    @classmethod
    def holding(
        cls,
        retry: Retry,
        *,
        pool: str,
        conn_id: str,
        settings: DependencySettings,
        watch_until: pendulum.DateTime,
        not_before: pendulum.DateTime,
    ) -> DependencyHoldTrigger:
        """The trigger that holds ``retry`` in ``pool``."""
        return cls(
            pool=pool,
            conn_id=conn_id,
            settings=asdict(settings),
            retry=_retry_fields(retry),
            watch_until=watch_until.isoformat(),
            not_before=not_before.isoformat(),
        )

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """This trigger's classpath and arguments, as the triggerer rebuilds it."""
        return CLASSPATH, {
            "pool": self.pool,
            "conn_id": self.conn_id,
            "settings": self.settings,
            "retry": self.retry,
            "watch_until": self.watch_until,
            "not_before": self.not_before,
        }

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """One event: why the held try is woken."""
        settings = DependencySettings(**self.settings)
        retry = _retry_of(self.retry)
        watch = PoolWatch.of(self.conn_id, self.pool, settings)
        until = _instant(self.watch_until)
        while True:
            state = await watch.state()
            now = watch.server_now()
            if now >= until:
                woken = {"action": HOLD, "reason": "held an hour, or to its latest start"}
                break
            if state is not None:
                admission = admit(state, retry, settings)
                if admission.action != HOLD:
                    woken = {"action": admission.action, "reason": admission.reason}
                    break
            wake = min(round_start(round_of(now, settings) + 1, settings), until)
            await asyncio.sleep((wake - now).total_seconds() + READ_AFTER_ROUND)
        soonest = _instant(self.not_before) - watch.server_now()
        await asyncio.sleep(max(soonest.total_seconds(), 0.0))
        yield TriggerEvent({"pool": self.pool, **woken})  # type: ignore[no-untyped-call]


@dataclass
class PoolWatch:
    """One pool read once a round for every trigger of it in this process.

    :param conn_id: the REST API connection.
    :param pool: the pool.
    :param settings: its dependency settings.
    """

    conn_id: str
    pool: str
    settings: DependencySettings
    offset: timedelta = timedelta(0)
    round: int | None = None
    read: asyncio.Future[DependencyState | None] | None = None
    api: Any = None

    @classmethod
    def of(cls, conn_id: str, pool: str, settings: DependencySettings) -> PoolWatch:
        """The process's watch of ``pool`` (made on first use)."""
        key = (conn_id, pool, settings)
        found = _WATCHES.get(key)
        if found is None:
            found = _WATCHES[key] = cls(conn_id, pool, settings)
        return found

    def server_now(self) -> pendulum.DateTime:
        """Now on the API server's clock, as the last read measured it."""
        return pendulum.now("UTC") + self.offset

    async def state(self) -> DependencyState | None:
        """The pool's state this round: read by the first trigger to ask, shared by all."""
        number = round_of(self.server_now(), self.settings)
        if self.read is None or self.round != number:
            self.round = number
            self.read = asyncio.ensure_future(asyncio.to_thread(self._read))
        return await asyncio.shield(self.read)

    def _read(self) -> DependencyState | None:
        """One read of the pool, in a thread (the REST reads and the Variable block)."""
        from airflow_retrywindow import configuration
        from airflow_retrywindow.dependency.pool_read import forced_state, read_pool
        from airflow_retrywindow.redaction import describe_exception

        try:
            if self.api is None:
                from airflow_retrywindow.hooks.airflow_api import AirflowApiHook

                # kept: one token for every round, renewed by the reader when it expires
                self.api = AirflowApiHook(
                    self.conn_id, timeout=configuration.api_timeout()
                ).get_conn()
            count = read_pool(self.api, self.pool, self.settings, forced=forced_state(self.pool))
        except Exception as error:
            log.warning(
                "Retry window: pool %s could not be read (%s); the held retries wait a round",
                self.pool,
                describe_exception(error),
            )
            return None
        self.offset = count.clock_offset
        return count.state(self.settings)


_WATCHES: dict[tuple[str, str, DependencySettings], PoolWatch] = {}


def _retry_fields(retry: Retry) -> dict[str, Any]:
    fields = asdict(retry)
    fields["key"] = list(retry.key)
    latest = retry.latest_start
    fields["latest_start"] = latest.isoformat() if latest is not None else None
    return fields


def _retry_of(fields: dict[str, Any]) -> Retry:
    dag_id, run_id, task_id, map_index = fields["key"]
    latest = fields.get("latest_start")
    return Retry(
        **{
            **fields,
            "key": (str(dag_id), str(run_id), str(task_id), int(map_index)),
            "latest_start": _instant(latest) if latest else None,
        }
    )


def _instant(text: str) -> pendulum.DateTime:
    found = pendulum.parse(text)
    assert isinstance(found, pendulum.DateTime)  # written by isoformat() of one
    return found.in_timezone("UTC")
