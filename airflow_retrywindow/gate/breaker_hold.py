"""A target's pool as a breaker: while it is open, the guarded repeat is held.

The gate already reads the pools its targets use (``GET /pools``): a breaker pool's
description carries its breaker's state
(:mod:`~airflow_retrywindow.records.breaker_state`), so no request is added. While a
target's pool is ``open`` (its dependency down, or forced open by on-call) a repeat the
model would let run now or after its backoff is ``dependency-held``: it would fail the
same way. A held repeat is decided again after as long as the pool has been held (a round
at least, an hour at most), spread over a fifth of that by the task instance, so held
gates and sensors do not read the pools at the same instant. A recovering or limited
breaker holds nothing here: its slots already limit what starts. A refusal of the model
stays a refusal (:mod:`airflow_retrywindow.verdicts`). Nothing here imports Airflow.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import timedelta

import pendulum

from airflow_retrywindow.breaker.settings import BreakerSettings
from airflow_retrywindow.labels import UTC_CLOCK, UTC_SHOWN
from airflow_retrywindow.records.breaker_state import OPEN, BreakerState
from airflow_retrywindow.timing.reasons import verdict_reason
from airflow_retrywindow.timing.status import verdict_status
from airflow_retrywindow.verdicts import DEPENDENCY_HELD, HOLDS, Fields, verdict

#: the longest a held repeat waits before it is decided again, in seconds
MAX_HOLD = 3600
#: the share of a hold its spread may add
SPREAD = 0.2


@dataclass(frozen=True)
class BreakerHold:
    """One pool of the targets as a breaker, as its description held it.

    :param state: its breaker.
    :param settings: how it is run (its round).
    """

    state: BreakerState
    settings: BreakerSettings

    @property
    def pool(self) -> str:
        """The pool's name."""
        return self.state.pool

    def holds(self, decision: str) -> bool:
        """Whether the breaker holds a repeat the model decided ``decision``: it is open, and
        the decision lets the repeat start now or after a wait (a refusal stays)."""
        found = verdict(decision)
        return self.state.phase == OPEN and found is not None and found.rank > HOLDS

    def hold_until(
        self, earliest: pendulum.DateTime | None, key: str, now: pendulum.DateTime
    ) -> pendulum.DateTime:
        """When a held repeat is decided again, or at the model's ``earliest`` start when
        that is later.

        :param earliest: the model's earliest start of the repeat.
        :param key: the task instance whose repeat is held, for its spread.
        :param now: the decision's "now".
        """
        rounds = self.settings.round
        held = min(max((now - self.state.since).total_seconds(), rounds), MAX_HOLD)
        share = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")
        spread = max(SPREAD * held, rounds) * share / 2**64
        until = now + timedelta(seconds=round(held + spread, 3))
        return until if earliest is None or earliest <= until else earliest

    def reason(self, until: pendulum.DateTime, today: pendulum.DateTime) -> str:
        """The reason of a held repeat: the pool and its breaker (the verdicts' words)."""
        fields = Fields(
            pool=lambda: self.pool,
            breaker=self.state.words,
            hold_until=lambda: _shown(until, today),
        )
        forced = "forced open by on-call" if self.state.by == "on-call" else ""
        return verdict_reason(DEPENDENCY_HELD, fields, subject=forced)

    def status(
        self, subject: str, model: Fields, until: pendulum.DateTime, today: pendulum.DateTime
    ) -> str:
        """The status update of a held repeat.

        :param subject: the task instance's name.
        :param model: the values the model decision's own status words name.
        :param until: when it is decided again.
        :param today: the decision's "now".
        """
        fields = Fields(
            state=lambda: model["state"],
            following=lambda: model["following"],
            deadline=lambda: model["deadline"],
            pool=lambda: self.pool,
            hold_until=lambda: _shown(until, today),
        )
        return verdict_status(DEPENDENCY_HELD, subject, fields)


def _shown(when: pendulum.DateTime, today: pendulum.DateTime) -> str:
    """``HH:MM:SSZ``, with the date when it is not ``today``'s."""
    at = when.in_timezone("UTC")
    return at.format(UTC_CLOCK if at.date() == today.in_timezone("UTC").date() else UTC_SHOWN)
