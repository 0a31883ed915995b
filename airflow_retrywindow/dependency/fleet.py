"""A pool's task instances as one read counts them, and the dependency's state (pure).

Nothing new is stored to know the state: it comes from what Airflow records of the
pool's task instances, counted by the REST API (:mod:`.pool_read`) in three requests
whose size does not grow with the pool. A task instance counts as *failing* when

* it waits for a retry (``up_for_retry``), however long its ``retry_delay``: a gated
  task's policy hands a retry back to Airflow only for a failure it classed retryable
  (a terminal one ends ``failed`` at once, so one task's own bug never counts);
* it is in a retry that has not ended: at try 2 or later and held (``deferred``,
  ``up_for_reschedule``) or under way (``scheduled``, ``queued``, ``running``).

A try the policy refused for good (an unknown outcome, a deadline) ends ``failed`` and
no longer counts: it has nothing left to hold.

The dependency is ``open`` while ``trip_tasks`` or more task instances are failing and
nothing of the pool has succeeded since the failing began (since the newest failure
that waits for its retry, or, with none waiting, since the oldest retry listed
started); ``recovering`` once something has; ``closed`` below the threshold.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pendulum

from airflow_retrywindow.dependency.settings import DependencySettings
from airflow_retrywindow.labels import VIEW_CLOCK
from airflow_retrywindow.labels import label as label_of
from airflow_retrywindow.records.dependency_state import (
    CLOSED,
    FORCED,
    OPEN,
    RECOVERING,
    UNREAD,
    DependencyRecord,
)

#: Airflow's states of a task instance this module reads
UP_FOR_RETRY = "up_for_retry"
SUCCESS = "success"
#: a retry held at its start: in the triggerer, or rescheduled where none runs
HELD = frozenset({"deferred", "up_for_reschedule"})
#: a retry that is held or under way
IN_RETRY = frozenset({*HELD, "scheduled", "queued", "running", "restarting"})
#: the tries of a retry: the listing filters try numbers by equality only, so it is
#: given every one a task instance reaches (ten tries a window, and the clears after)
RETRY_TRIES = tuple(range(2, 101))
#: the retries listed by one read, the first by id: the round's probes are drawn from them
CANDIDATES = 100

#: a task instance: DAG, run, task, map index
TaskKey = tuple[str, str, str, int]


@dataclass(frozen=True)
class PoolTry:
    """The current try of one task instance of the pool, as the REST API listed it.

    :param dag_id: its DAG.
    :param run_id: its DAG run.
    :param task_id: its task.
    :param map_index: ``-1`` unless the task is mapped.
    :param state: Airflow's state name, ``None`` when it has none.
    :param try_number: Airflow's try number (for ``up_for_retry``, the try that failed).
    :param max_tries: Airflow's ``max_tries``.
    :param start_date: when the try started.
    :param end_date: when it ended.
    """

    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    state: str | None
    try_number: int
    max_tries: int
    start_date: pendulum.DateTime | None
    end_date: pendulum.DateTime | None

    @property
    def key(self) -> TaskKey:
        """The task instance this try belongs to."""
        return (self.dag_id, self.run_id, self.task_id, self.map_index)


@dataclass(frozen=True)
class PoolListing:
    """One answer of the REST API's task instance listing: its rows and how many matched.

    :param rows: the rows of the one page asked for (none for a count).
    :param total: every task instance the filters matched.
    """

    rows: tuple[PoolTry, ...]
    total: int

    @property
    def first(self) -> PoolTry | None:
        """The first row, ``None`` when the page is empty."""
        return self.rows[0] if self.rows else None


def label(key: TaskKey) -> str:
    """``dag.task[3] (run)`` for a task instance."""
    dag_id, run_id, task_id, map_index = key
    task = label_of(task_id, map_index)
    return f"{dag_id}.{task} ({run_id})"


@dataclass(frozen=True)
class PoolCount:
    """What one read counted of a pool.

    :param pool: the pool's name.
    :param read_at: when it was read, on the API server's clock.
    :param waiting: task instances waiting for a retry (``up_for_retry``).
    :param last_failure: when the newest of them failed.
    :param in_retry: task instances at try 2 or later, held or under way.
    :param candidates: the first :data:`CANDIDATES` of those, by id.
    :param successes: successes of the pool since :attr:`since`.
    :param last_success: the newest of them.
    :param since: from when the successes were counted: when the failing began.
    :param forced: ``"open"`` or ``"closed"`` when on-call forces the state.
    :param clock_offset: the API server's clock minus the reader's, as the read measured it.
    :param waiting_tries: the newest :data:`CANDIDATES` of those waiting for a retry.
    """

    pool: str
    read_at: pendulum.DateTime
    waiting: int
    last_failure: pendulum.DateTime | None
    in_retry: int
    candidates: tuple[PoolTry, ...]
    successes: int
    last_success: pendulum.DateTime | None
    since: pendulum.DateTime
    forced: str | None = None
    clock_offset: timedelta = timedelta(0)
    waiting_tries: tuple[PoolTry, ...] = ()

    def state(self, settings: DependencySettings) -> DependencyState:
        """The dependency's state as this read shows it."""
        failing = self.waiting + self.in_retry
        if self.forced in FORCED:
            state = str(self.forced)
        elif failing < settings.trip_tasks:
            state = CLOSED
        elif self.successes:
            state = RECOVERING
        else:
            state = OPEN
        return DependencyState(
            pool=self.pool,
            state=state,
            forced=self.forced,
            read_at=self.read_at,
            failing=failing,
            held=self.in_retry,
            candidates=probe_candidates(self.candidates, self.waiting_tries),
            failing_since=failing_since(self.candidates, self.last_failure),
            last_success=self.last_success,
            successes=self.successes,
            clock_offset=self.clock_offset,
        )


def probe_candidates(
    in_retry: tuple[PoolTry, ...], waiting: tuple[PoolTry, ...]
) -> tuple[TaskKey, ...]:
    """The task instances a round's probes are drawn from: every failing one listed, in a
    retry or waiting for one.

    A task instance goes on failing through the outage, between its retry's start (in a
    retry) and its failure (waiting): drawn from both, a round's order stays the same
    while retries start one after another and failed probes wait for their next try.
    Drawn from those in a retry alone, each retry that started ahead of the others, or
    after the round's probe failed and left them, found itself first and probed.
    """
    keys = [item.key for item in in_retry]
    listed = set(keys)
    keys.extend(item.key for item in waiting if item.key not in listed)
    return tuple(keys)


def failing_since(
    candidates: tuple[PoolTry, ...], last_failure: pendulum.DateTime | None
) -> pendulum.DateTime | None:
    """The earliest sign of the failing a read shows: the oldest retry listed, or the
    newest failure waiting for its retry when none is listed."""
    started = [item.start_date for item in candidates if item.start_date is not None]
    return min(started, default=last_failure)


@dataclass(frozen=True)
class DependencyState:
    """The dependency's state at one read, and the facts it was worked out from.

    :param pool: the pool.
    :param state: ``open``, ``recovering``, ``closed`` (or ``unread``).
    :param forced: the state on-call forced, if any.
    :param read_at: when it was read, on the API server's clock.
    :param failing: task instances failing: waiting for a retry, or in one.
    :param held: those in a retry, held or under way.
    :param candidates: the failing task instances the round's probes are drawn from:
        those in a retry (the first by id) and those waiting for one (the newest).
    :param failing_since: the earliest sign of the failing, as far as the read shows.
    :param last_success: the newest success since the failing began.
    :param successes: successes of the pool since the failing began.
    :param clock_offset: the API server's clock minus the reader's at the read.
    """

    pool: str
    state: str
    forced: str | None
    read_at: pendulum.DateTime
    failing: int
    held: int
    candidates: tuple[TaskKey, ...]
    failing_since: pendulum.DateTime | None
    last_success: pendulum.DateTime | None
    successes: int
    clock_offset: timedelta = timedelta(0)

    @classmethod
    def unread(cls, pool: str, at: pendulum.DateTime) -> DependencyState:
        """The state of a pool that could not be read at ``at``: nothing known of it."""
        return cls(pool, UNREAD, None, at, 0, 0, (), None, None, 0)

    def record(
        self,
        settings: DependencySettings,
        *,
        try_number: int,
        action: str,
        decision: str,
        reason: str,
        round_start: pendulum.DateTime,
        hold_until: pendulum.DateTime | None = None,
        next_probe: pendulum.DateTime | None = None,
        holds: int = 0,
        probed_round: int | None = None,
        waits_in: str | None = None,
    ) -> DependencyRecord:
        """This state beside one task instance's decision, as it is stored.

        :param settings: how the pool is watched (its window and rounds).
        :param try_number: the try the decision is about.
        :param action: ``hold``, ``probe``, ``release``, ``run`` or ``refuse``.
        :param decision: the verdict recorded.
        :param reason: the decision's reason.
        :param round_start: when the decision's round began.
        :param hold_until: until when the try is held, ``None`` when it is not.
        :param next_probe: when the next probe round starts, ``None`` when none is planned.
        :param holds: how often the try was held so far, this hold included.
        :param probed_round: the last round the task instance probed in.
        :param waits_in: where a held try waits: ``triggerer`` or ``worker``.
        """
        return DependencyRecord(
            pool=self.pool,
            state=self.state,
            forced=self.forced,
            read_at=self.read_at,
            failing_since=self.failing_since,
            failing_tasks=self.failing,
            successes=self.successes,
            held=self.held,
            budget=settings.min_probes,
            round_start=round_start,
            round_seconds=settings.round_seconds,
            next_probe=next_probe,
            try_number=try_number,
            action=action,
            decision=decision,
            hold_until=hold_until,
            reason=reason,
            holds=holds,
            probed_round=probed_round,
            window_seconds=settings.window_seconds,
            waits_in=waits_in,
        )

    def describe(self, settings: DependencySettings) -> str:
        """One line for a reason: what the pool's state is and what it rests on."""
        if self.forced:
            return f"pool {self.pool} is forced {self.forced} by on-call"
        since = f" since {self.failing_since.format(VIEW_CLOCK)}" if self.failing_since else ""
        success = (
            f"last success {self.last_success.format(VIEW_CLOCK)}"
            if self.last_success
            else "no success"
        )
        return (
            f"pool {self.pool} is {self.state}: {self.failing} task instances failing"
            f"{since}, {success} since it began"
        )
