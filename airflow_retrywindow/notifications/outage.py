"""Outage: a breaker pool's outage as a notification tells it, and whether it was told.

A failed try of a task whose pool is a breaker pool is read with its pool's breaker
(the pool's description holds it, :mod:`~airflow_retrywindow.records.breaker_state`):
while the breaker holds the pool (open, recovering or limited), the failure is part of
an *outage* of that pool, named by the pool and when the breaker began holding it. So is
a try refused at its start because the breaker held it past its latest start.

**Once per outage.** With no lock service, the outage last told is written where every
worker reads it: the Airflow Variable ``retry_window_notice_<pool>``
(:data:`NOTICE_VARIABLE`) holds the outage told and whether a try refused for its
deadline was told. :func:`settle` decides, from that entry and one failure, whether to
send and what to write back: an outage not told yet is sent, by the first failure that
reads it; then nothing more of it, except its first refusal, a missed delivery being
worth its own notice. Reading and writing the entry is not atomic: failures that read it
before the first of them wrote it all send, a duplicate being better than a silenced
outage; so does an entry that cannot be read.

Pure: nothing here imports Airflow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_retrywindow.labels import UTC_SHOWN
from airflow_retrywindow.records.breaker_state import BreakerState

#: the Airflow Variable that holds the outage of a pool last told
NOTICE_VARIABLE = "retry_window_notice_{pool}"
#: the shape of that Variable's value this release writes and reads
NOTICE_VERSION = 2


@dataclass(frozen=True)
class Outage:
    """A failed try of a breaker pool whose breaker holds the pool.

    :param state: the pool's breaker, as its description held it.
    :param refused: whether the try was refused at its start, held past its latest start.
    """

    state: BreakerState
    refused: bool = False

    @property
    def pool(self) -> str:
        """The breaker pool."""
        return self.state.pool

    @property
    def name(self) -> str:
        """``positions_api since 2026-12-04 14:00:00Z``: the outage's id, from when the
        breaker began to hold the pool, whatever phases followed."""
        began = self.state.held_since or self.state.since
        return f"{self.pool} since {began.format(UTC_SHOWN)}"

    @property
    def variable(self) -> str:
        """The Airflow Variable that says whether this pool's outage was told."""
        return NOTICE_VARIABLE.format(pool=self.pool)

    def line(self) -> str:
        """The outage in one sentence: the breaker's state, its slots against the pool's
        size, since when, and the last probe."""
        reason = f" ({self.state.reason})" if self.state.reason else ""
        return f"pool {self.pool}'s breaker is {self.state.words()}{reason}"


def outage_of(state: BreakerState | None, *, refused: bool = False) -> Outage | None:
    """The outage a failed try of a breaker pool belongs to, ``None`` when its breaker
    holds nothing (or the pool carries none)."""
    if state is None or not state.holds:
        return None
    return Outage(state, refused)


@dataclass(frozen=True)
class Settled:
    """Whether a failure in an outage is sent, and what the notice entry becomes.

    :param send: whether this task instance sends the notice.
    :param entry: what to write to the notice Variable, ``None`` to leave it.
    :param why: why it is sent or not, for the log.
    """

    send: bool
    entry: dict[str, Any] | None
    why: str


def settle(kept: object, outage: Outage, *, by: str) -> Settled:
    """Whether ``outage``'s failure is told, given the notice entry ``kept``.

    :param kept: the notice Variable's value, as read (``None`` when unset).
    :param outage: the outage the failure belongs to.
    :param by: the task instance, as the entry names who told.
    """
    told = kept if isinstance(kept, Mapping) and kept.get("version") == NOTICE_VERSION else {}
    if told.get("outage") != outage.name:
        entry = {
            "version": NOTICE_VERSION, "pool": outage.pool, "outage": outage.name,
            "deadlineTold": outage.refused, "by": by,
        }  # fmt: skip
        return Settled(True, entry, f"outage {outage.name} was not told yet")
    if outage.refused and told.get("deadlineTold") is not True:
        return Settled(True, {**told, "deadlineTold": True}, f"the first refusal in {outage.name}")
    return Settled(False, None, f"outage {outage.name} was told by {told.get('by', 'another')}")
