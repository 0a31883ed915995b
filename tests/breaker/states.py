"""Breakers as a pool's description holds them, for the tests of every reader of one."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pendulum

from airflow_retrywindow.records.breaker_state import OPEN, RECOVERING, STARTED, BreakerState, Probe

POOL = "positions_api"
#: when the example breaker opened
OPENED = pendulum.datetime(2026, 12, 4, 14, 0, 3, tz="UTC")
#: when its controller last looked at it
CHECKED = OPENED.add(minutes=2, seconds=8)


def opened(pool: str = POOL, *, size: int = 24, since: pendulum.DateTime = OPENED) -> BreakerState:
    """``pool``'s breaker, open since ``since``, one probe started at the last round."""
    probe = since.add(minutes=2, seconds=8)
    return BreakerState(
        pool=pool, phase=OPEN, size=size, slots=0, since=since, checked_at=probe, probes=1,
        next_probe=probe + timedelta(seconds=60), last_probe=Probe(probe, STARTED),
        reason="3 calls refused, none served", held_since=since,
    )  # fmt: skip


def recovering(pool: str = POOL, *, size: int = 24) -> BreakerState:
    """``pool``'s breaker after its dependency answered again: two slots of ``size``."""
    back = OPENED.add(minutes=5)
    return replace(
        opened(pool, size=size).moved(RECOVERING, 2, back, "1 calls served"), next_probe=None
    )


def closed(pool: str = POOL, *, size: int = 24) -> BreakerState:
    """``pool``'s breaker watching the pool at its owner's size."""
    return BreakerState.closed(pool, size, OPENED.subtract(hours=1), "watching the pool")
