"""One round of the breaker pools: read each through the REST API, step it, write its slots.

The controller's trigger runs a round for the pools whose round is due, in a thread (the
reads block); the controller's task runs :meth:`Controller.give_back` when no trigger ran
in time. A round reads every pool at once (``GET /pools``, which carries each breaker's
state in its description, see :mod:`~airflow_retrywindow.records.breaker_state`) and
on-call's Variables, then per breaker pool at most three more requests:

* the pool's tries that ended since the round before, successes and retries, in one
  count with the newest page of rows (their durations give the slots served);
* on Airflow 3.3, the failures its tries' retry policies marked (an unknown outcome or a
  last attempt, which end ``failed``), in one page (not while it is open);
* the change of its slots, when there is one: two for a probe, whose slot is closed
  again once a task took it.

A pool that carries a breaker's line but is named no more (switched off, or renamed) is
given back its owner's size. Nothing here imports Airflow; the client is passed in.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

import pendulum

from airflow_retrywindow import metrics
from airflow_retrywindow.breaker.law import Reading, Step, step
from airflow_retrywindow.breaker.settings import BreakerPools, BreakerSettings
from airflow_retrywindow.records.breaker_state import (
    CLOSED,
    OPEN,
    BreakerState,
    failure_key,
    forced_of,
    owners_lines,
)

log = logging.getLogger(__name__)

#: the Variable on-call sets to ``open`` or ``closed`` to force a pool's breaker
FORCE_PREFIX = "retry_window_breaker_"
#: the task instance states a round counts: a success, or a retry Airflow scheduled
SUCCESS = "success"
UP_FOR_RETRY = "up_for_retry"
#: rows of a round's page: a sample of its tries' durations when more ended
PAGE = 100
#: how long before a held pool's next round its controller's lease is renewed (a worker
#: start's time, or a new run's); a trigger that starts that close to a pool's round makes
#: it at once, with the reads it makes anyway
RENEW_AHEAD = timedelta(seconds=5)
#: how long a probe's slot stays open before it is closed again: past the scheduler's
#: next loop (about a second). A gated probe that fails sooner closes it itself, before
#: its slot is freed (:mod:`.trip`); a task without a retry policy cannot
PROBE_WAIT = 1.5


class BreakerClient(Protocol):
    """The REST API reads and writes a round makes: those of ``AirflowApi``."""

    clock_offset: Any

    def pools(self, names: Collection[str] | None = None) -> Mapping[str, Any]: ...

    def pool_listing(
        self,
        pool: str,
        states: Collection[str],
        *,
        ended_since: datetime | None = None,
        order_by: str = "id",
        limit: int = 0,
    ) -> Any: ...

    def xcom_count(self, key: str, since: datetime) -> int: ...

    def variables(self, prefix: str) -> dict[str, str]: ...

    def set_pool(self, pool: Any, slots: int, description: str) -> Any: ...


@dataclass(frozen=True)
class Turn:
    """What a round did to one pool.

    :param pool: the pool.
    :param state: its breaker after the round, ``None`` once it is no breaker.
    :param slots: the size given to the pool, ``None`` when left as it was.
    :param reason: why, in one line.
    :param wait: how long until the pool's next round, when it was not looked at: its
        line says its last round was less than a round ago.
    """

    pool: str
    state: BreakerState | None
    slots: int | None
    reason: str
    wait: timedelta | None = None


@dataclass
class Controller:
    """The breakers of one Airflow, run a round at a time.

    :param api: the REST API client.
    :param pools: the breaker pools and their settings.
    :param marked: whether failing tries mark their failures (Airflow 3.3's retry policies).
    :param sleep: how the probe's wait is waited (a test passes its own).
    :param states: each pool's breaker as last seen: kept when its line is lost.
    """

    api: BreakerClient
    pools: BreakerPools
    marked: bool = True
    sleep: Callable[[float], None] = time.sleep
    states: dict[str, BreakerState] = field(default_factory=dict)

    def round(self, due: Collection[str], *, unscheduled: Collection[str] = ()) -> list[Turn]:
        """One round of the pools ``due``, and of every pool that is a breaker no more.

        A pool of ``unscheduled`` (its trigger started with no time for its next round)
        whose line says its round is not due within :data:`RENEW_AHEAD` is not looked at:
        its turn says how long until its round, so that its rounds keep their length.
        """
        rows = dict(self.api.pools())
        now = server_now(self.api)
        turns = []
        for row in [row for row in rows.values() if self._stray(row)]:
            # the pool as given back: a renamed pool due under its new name starts from it
            turn, rows[row.name] = self._release(row, now)
            turns.append(turn)
        forced = self._forced(due, rows)
        for name in due:
            if name not in rows:
                turns.append(Turn(name, None, None, f"pool {name!r} does not exist"))
                continue
            waiting = self._waiting(rows[name], now) if name in unscheduled else None
            turns.append(waiting or self._turn(rows[name], now, forced.get(name)))
        return turns

    def give_back(self, reason: str) -> list[Turn]:
        """Give every pool that a breaker holds its owner's size: the controller was lost."""
        rows = self.api.pools()
        now = server_now(self.api)
        turns = []
        for row in rows.values():
            state = BreakerState.in_description(row.description)
            if state is not None and state.holds:
                closed = replace(state.moved(CLOSED, state.size, now, reason), owed=0)
                self.api.set_pool(row, state.size, closed.described(row.description))
                turns.append(Turn(row.name, closed, state.size, reason))
        return turns

    # -- one pool ------------------------------------------------------------------

    def _turn(self, row: Any, now: pendulum.DateTime, forced: str | None) -> Turn:
        name = row.name
        settings = self.pools.of(name)
        assert settings is not None  # only breaker pools are due
        state = BreakerState.in_description(row.description) or self.states.get(name)
        if state is None or state.pool != name:
            state = BreakerState.closed(name, row.slots, now, "watching the pool")
            self.api.set_pool(row, row.slots, state.described(row.description))
            self.states[name] = state
            return Turn(name, state, None, state.reason)
        counted = self._reading(row, state, settings, now, forced)
        found = step(state, counted, settings)
        done = self._apply(row, state, found)
        self.states[name] = done
        metrics.breaker_state(name, slots=done.slots, size=done.size, is_open=done.phase == OPEN)
        return Turn(name, done, found.slots, done.reason)

    def _waiting(self, row: Any, now: pendulum.DateTime) -> Turn | None:
        """The turn of a pool whose round is not due yet, else ``None``."""
        settings = self.pools.of(row.name)
        state = BreakerState.in_description(row.description)
        if settings is None or state is None or state.pool != row.name:
            return None
        wait = state.checked_at + timedelta(seconds=settings.round) - now
        if wait <= RENEW_AHEAD:
            return None
        self.states[row.name] = state
        return Turn(row.name, state, None, f"its last round was {state.checked_at}", wait=wait)

    def _reading(
        self,
        row: Any,
        state: BreakerState,
        settings: BreakerSettings,
        now: pendulum.DateTime,
        forced: str | None,
    ) -> Reading:
        """What the pool's tries got from the dependency since the round before."""
        since = max(state.checked_at, now - timedelta(seconds=settings.round))
        listing = self.api.pool_listing(
            row.name, {SUCCESS, UP_FOR_RETRY}, ended_since=since, order_by="-end_date",
            limit=PAGE,
        )  # fmt: skip
        successes, retries, served = _counted(listing, now - since)
        marked = 0
        if self.marked and state.phase != OPEN:
            marked = self.api.xcom_count(failure_key(row.name), since)
        return Reading(
            at=now, size=row.slots, occupied=row.occupied, successes=successes,
            failures=retries + marked, served=served, forced=forced,
        )  # fmt: skip

    def _apply(self, row: Any, before: BreakerState, found: Step) -> BreakerState:
        """Write what ``found`` changed; the state as written."""
        state = found.state
        if found.probe:
            # its outcome, or that no task took it, is what the next round reads
            self.api.set_pool(row, row.occupied + 1, state.described(row.description))
            self.sleep(PROBE_WAIT)
            self.api.set_pool(row, 0, state.described(row.description))
            metrics.breaker_probe(row.name)
            log.info("Retry window breaker %s: probe slot opened and closed", row.name)
            return state
        # a closed breaker that stays so writes nothing; a holding one keeps its line current
        moved = state.phase != before.phase or state.size != before.size
        if found.slots is None and not (state.holds or moved):
            return state
        slots = row.slots if found.slots is None else found.slots
        self.api.set_pool(row, slots, state.described(row.description))
        if found.slots is not None or moved:
            log.info("Retry window breaker %s: %s (%s)", row.name, state.words(), state.reason)
        return state

    def _forced(self, due: Collection[str], rows: Mapping[str, Any]) -> dict[str, str]:
        """On-call's force of each pool due, read in one request when any may be forced."""
        found = self.api.variables(FORCE_PREFIX)
        return {
            name: forced
            for name in due
            if (forced := forced_of(found.get(FORCE_PREFIX + name))) is not None
        }

    def _stray(self, row: Any) -> bool:
        """Whether ``row`` carries a breaker's line but is no breaker pool (any more)."""
        state = BreakerState.in_description(row.description)
        return state is not None and (self.pools.of(row.name) is None or state.pool != row.name)

    def _release(self, row: Any, now: pendulum.DateTime) -> tuple[Turn, Any]:
        """Give a pool that is no breaker any more its owner's size, and drop the line; the
        pool as the API server answered the change."""
        state = BreakerState.in_description(row.description)
        assert state is not None
        renamed = state.pool != row.name
        why = f"was pool {state.pool!r}" if renamed else "is no longer in breaker_pools"
        size = state.size if state.holds else row.slots
        answer = self.api.set_pool(row, size, "\n".join(owners_lines(row.description)))
        self.states.pop(row.name, None)
        reason = f"pool {row.name!r} {why}: given back its size, {size} slots"
        log.warning("Retry window breaker: %s", reason)
        return Turn(row.name, None, size, reason), answer


def _counted(listing: Any, span: timedelta) -> tuple[int, int, float]:
    """Successes, retries and slots served of one round's page, scaled to its count."""
    rows = listing.rows
    if not rows:
        return 0, 0, 0.0
    succeeded = [each for each in rows if each.state == SUCCESS]
    scale = listing.total / len(rows)
    successes = round(len(succeeded) * scale)
    retries = listing.total - successes
    busy = sum(each.seconds for each in succeeded) * scale
    return successes, retries, busy / max(span.total_seconds(), 1.0)


def server_now(api: object) -> pendulum.DateTime:
    """Now on the API server's clock, as its answers told it (this process's without them)."""
    local = pendulum.now("UTC")
    offset: Any = getattr(api, "clock_offset", None)
    if offset is None:
        return local
    middle: timedelta = (offset.low + offset.high) / 2
    return local + middle
