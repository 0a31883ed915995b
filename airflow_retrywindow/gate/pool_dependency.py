"""A target's pool as a dependency: while it is failing, the guarded repeat is held.

The gate reads each pool its targets use (other than ``default_pool``, and not
switched off in ``[retry_window] dependency_pools``) as the retry-start check does
(:mod:`airflow_retrywindow.dependency.pool_read`), and works out the same state
(:mod:`airflow_retrywindow.dependency.fleet`). While it is ``open`` (failing over
``trip_tasks``, or forced open by on-call) a repeat the model would let run now or
after its backoff is ``dependency-held`` instead: it would fail the same way. The
hold lasts until the pool's next probe round, or the model's earliest start if that
is later, spread by task instance and growing with the outage; the gate or sensor
decides again then. ``recovering`` and ``closed`` hold
nothing. A decision the model refuses stays refused: a refusal is stricter than a
hold (:mod:`airflow_retrywindow.verdicts`).

Every retried task instance's row keeps the pool's state as read, in the shape
the retry-start check stores
(:class:`~airflow_retrywindow.records.dependency_state.DependencyRecord`).
Nothing here imports Airflow.
"""

from __future__ import annotations

from dataclasses import dataclass

import pendulum

from airflow_retrywindow.dependency.admission import (
    HOLD,
    REFUSE,
    RUN,
    repeat_held_until,
    round_of,
    round_start,
)
from airflow_retrywindow.dependency.fleet import DependencyState, TaskKey
from airflow_retrywindow.dependency.pool_read import FORCE_VARIABLE
from airflow_retrywindow.dependency.settings import DependencySettings
from airflow_retrywindow.labels import UTC_CLOCK, UTC_SHOWN
from airflow_retrywindow.records.dependency_state import OPEN, DependencyRecord
from airflow_retrywindow.timing.reasons import verdict_reason
from airflow_retrywindow.timing.status import verdict_status
from airflow_retrywindow.verdicts import DEPENDENCY_HELD, HOLDS, Fields, verdict


@dataclass(frozen=True)
class PoolDependency:
    """One pool of the targets as a dependency, as the gate's read found it.

    :param state: its state and the facts it was worked out from.
    :param settings: how it is watched (its window and rounds).
    """

    state: DependencyState
    settings: DependencySettings

    @property
    def pool(self) -> str:
        """The pool's name."""
        return self.state.pool

    @property
    def is_open(self) -> bool:
        """Whether it is failing (or forced open): repeats in it are held."""
        return self.state.state == OPEN

    def holds(self, decision: str) -> bool:
        """Whether the pool holds a repeat the model decided ``decision``: it is open, and
        the decision lets the repeat start now or after a wait (a refusal stays)."""
        found = verdict(decision)
        return self.is_open and found is not None and found.rank > HOLDS

    def hold_until(self, earliest: pendulum.DateTime | None, key: TaskKey) -> pendulum.DateTime:
        """When a held repeat is decided again: as a held retry is
        (:func:`~airflow_retrywindow.dependency.admission.repeat_held_until`), or at
        ``earliest`` (the model's own earliest start) when that is later.

        :param earliest: the model's earliest start of the repeat.
        :param key: the task instance whose repeat is held.
        """
        until = repeat_held_until(self.state, key, self.settings)
        return until if earliest is None or earliest <= until else earliest

    def reason(self, until: pendulum.DateTime, today: pendulum.DateTime) -> str:
        """The reason of a held repeat: the pool and its state as read (the verdicts' words).

        :param until: when it is decided again.
        :param today: the decision's "now", to tell whether a time needs its date.
        """
        state = self.state
        started = state.failing_since or state.read_at
        fields = Fields(
            pool=lambda: self.pool,
            failing_since=lambda: _shown(started, today),
            failing_tasks=lambda: state.failing,
            hold_until=lambda: _shown(until, today),
        )
        return verdict_reason(DEPENDENCY_HELD, fields, subject=self._beside())

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

    def record(
        self,
        *,
        decision: str,
        try_number: int,
        reason: str,
        hold_until: pendulum.DateTime | None,
    ) -> DependencyRecord:
        """The pool's state as read, beside a task instance's decision, as it is stored.

        :param decision: the task instance's verdict.
        :param try_number: the try the decision is about (the repeat).
        :param reason: the hold's reason, or ``""`` for the state's own words.
        :param hold_until: when a held repeat is decided again, ``None`` when not held.
        """
        state, settings = self.state, self.settings
        found = verdict(decision)
        if decision == DEPENDENCY_HELD:
            action = HOLD
        elif found is not None and found.refuses:
            action = REFUSE
        else:
            action = RUN
        return state.record(
            settings,
            try_number=max(try_number, 1),
            action=action,
            decision=decision,
            reason=reason or state.describe(settings),
            round_start=round_start(round_of(state.read_at, settings), settings),
            hold_until=hold_until,
            # no next probe: the gate runs none of its own, the retry-start check plans those
        )

    def _beside(self) -> str:
        """What the reason's words leave out: who forced it, and successes before the failing."""
        if self.state.forced:
            variable = FORCE_VARIABLE.format(pool=self.pool)
            return f"forced {self.state.forced} by on-call with the Variable {variable}"
        successes = self.state.successes
        if successes:
            many = "success" if successes == 1 else "successes"
            return f"{successes} {many} in the window, none since the latest failure"
        return ""


def _shown(when: pendulum.DateTime, today: pendulum.DateTime) -> str:
    """``HH:MM:SSZ``, with the date when it is not ``today``'s."""
    at = when.in_timezone("UTC")
    return at.format(UTC_CLOCK if at.date() == today.in_timezone("UTC").date() else UTC_SHOWN)
