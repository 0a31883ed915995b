"""``PoolBreakerTrigger``: the breaker pools' rounds, run in the triggerer.

One trigger runs every breaker pool of the Airflow (at most one per pool, none per held
task): each pool's round when it is due (:class:`~airflow_retrywindow.breaker.control.Controller`,
in a thread, as its reads block). The controller's task defers to it with a timeout, its
lease: the trigger yields to have the lease renewed before it runs out, before every round
while a pool is held, about every ten rounds while none is. A held pool's renewal on
Airflow 3.3 ends the controller's run (a task success event, no worker); the next run's
trigger, which the scheduler starts, reads from each pool's line when its round is due,
so that a round keeps its length. When no triggerer runs the
trigger in time the lease runs out and the task gives every pool back its size
(:mod:`airflow_retrywindow.operators.pool_breaker`). A round that cannot be made (the API
server away, the connection's password changed) is logged and made again the next
time, with the connection read anew; it never ends the trigger.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

import pendulum
from airflow.triggers.base import BaseTrigger, TaskSuccessEvent, TriggerEvent

from airflow_retrywindow.breaker.control import RENEW_AHEAD, Controller
from airflow_retrywindow.redaction import describe_exception
from airflow_retrywindow.version_compat import AIRFLOW_V_3_3_PLUS

log = logging.getLogger(__name__)

#: where the triggerer imports the trigger from
CLASSPATH = f"{__name__}.PoolBreakerTrigger"
#: the controller of each connection, kept in the triggerer's process from one trigger to
#: the next: a held pool's trigger lasts a round (a run of the controller's DAG), and one
#: kept keeps its client's token (a login a token's lifetime, not a round: a round stays
#: within five requests) and the states it saw; dropped when a round fails, so that the
#: next reads the connection anew
KEPT: dict[str, Controller] = {}


class PoolBreakerTrigger(BaseTrigger):
    """Run the breaker pools' rounds until the controller's lease is to be renewed.

    :param conn_id: the connection to Airflow's REST API.
    :param due: when each breaker pool's next round is due (ISO 8601), by pool.
    :param renew_at: when to yield for the lease's renewal at the latest (ISO 8601); empty
        when the scheduler started the trigger, as each run of the controller starts.
    """

    #: the trigger's clock and wait: a test gives its own, which move together
    clock: Callable[[], pendulum.DateTime] = staticmethod(lambda: pendulum.now("UTC"))
    sleep: Callable[[float], Awaitable[None]] = staticmethod(asyncio.sleep)

    def __init__(self, *, conn_id: str, due: dict[str, str], renew_at: str) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.conn_id = conn_id
        self.due = dict(due)
        self.renew_at = renew_at

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """This trigger's classpath and arguments, as the triggerer rebuilds it."""
        return CLASSPATH, {"conn_id": self.conn_id, "due": self.due, "renew_at": self.renew_at}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """One event, when the lease is to be renewed: each pool's next round, and whether
        a pool is held (the next lease is then a short one)."""
        from airflow_retrywindow import configuration

        pools = configuration.breaker_pools()
        now = self.clock()
        due = {name: _instant(self.due[name]) if name in self.due else now for name in pools.pools}
        # started with no time for a pool's next round (by the scheduler, as each run of the
        # controller starts): its line tells when its last round was
        unscheduled = [name for name in pools.pools if name not in self.due]
        # started by the scheduler (a run's first lease): the lease began a moment ago
        renew_at = (
            _instant(self.renew_at) if self.renew_at else now.add(seconds=pools.shortest_round())
        )
        controller: Controller | None = None
        held = False
        while (now := self.clock()) < renew_at:
            ready = sorted(name for name, at in due.items() if at <= now)
            if ready:
                controller, waits = await asyncio.to_thread(self._round, ready, unscheduled)
                unscheduled = []
                for name in ready:
                    due[name] = now + waits.get(name, timedelta(seconds=pools.pools[name].round))
                held = _holding(controller)
                if held and len(waits) < len(ready):  # after a round that looked at a pool
                    # held pools renew the lease before each round: it stays short
                    renew_at = min(renew_at, min(due.values()) - RENEW_AHEAD)
            wake = min([renew_at, *due.values()])
            await self.sleep(max((wake - self.clock()).total_seconds(), 0.0))
        if held and AIRFLOW_V_3_3_PLUS:
            # the run ends; the next starts its trigger with no worker, on a short lease
            yield TaskSuccessEvent()
            return
        event = {"due": {name: at.isoformat() for name, at in due.items()}}
        yield TriggerEvent({**event, "holding": held})  # type: ignore[no-untyped-call]

    def _round(
        self, ready: list[str], unscheduled: list[str]
    ) -> tuple[Controller | None, dict[str, timedelta]]:
        """One round of the pools ``ready``: the controller (``None`` after a failed round:
        the next one reads the connection anew, its password may have changed), and how
        long until the round of each pool it did not look at."""
        try:
            controller = KEPT.get(self.conn_id) or breaker_controller(self.conn_id)
            turns = controller.round(ready, unscheduled=unscheduled)
        except Exception as error:
            KEPT.pop(self.conn_id, None)
            log.warning(
                "Retry window breakers: a round of %s could not be made (%s); the pools stay "
                "as they are until the next",
                ", ".join(ready),
                describe_exception(error),
            )
            return None, {}
        KEPT[self.conn_id] = controller
        for turn in turns:
            if turn.wait is None:
                log.info("Retry window breaker %s: %s", turn.pool, turn.reason)
        return controller, {turn.pool: turn.wait for turn in turns if turn.wait is not None}


def breaker_controller(conn_id: str) -> Controller:
    """The controller of this Airflow's breaker pools, reading through ``conn_id``."""
    from airflow_retrywindow import configuration
    from airflow_retrywindow.hooks.airflow_api import AirflowApiHook
    from airflow_retrywindow.version_compat import AIRFLOW_V_3_3_PLUS

    api = AirflowApiHook(conn_id, timeout=configuration.api_timeout()).get_conn()
    # only Airflow 3.3's retry policies mark the failures that end a task instance
    return Controller(api, configuration.breaker_pools(), marked=AIRFLOW_V_3_3_PLUS)


def _holding(controller: Controller | None) -> bool:
    """Whether a pool was held at its last round (a controller that failed: assume so)."""
    if controller is None:
        return True
    return any(state.holds for state in controller.states.values())


def _instant(text: str) -> pendulum.DateTime:
    found = pendulum.parse(text)
    assert isinstance(found, pendulum.DateTime)  # written by isoformat() of one
    return found.in_timezone("UTC")
