"""A pool's task instances as read, and the dependency's state worked out from them (pure).

Nothing new is stored to know the state: it comes from what Airflow records of the
pool's task instances, read in one listing (:mod:`.check`). A task instance counts as
*failing* when

* it waits for a retry (``up_for_retry``): a gated task's policy hands a retry back
  to Airflow only for a failure it classed retryable (a terminal one ends ``failed``
  at once, so one task's own bug never counts);
* it is in a retry that has not ended (``up_for_reschedule``, ``scheduled``,
  ``queued``, ``running`` or ``deferred`` at try 2 or later): its last try failed and
  nothing has succeeded since;
* it ended ``failed`` with the XCom key the policy pushes for a failure it classed
  retryable or unknown (refused for its deadline, or an unknown outcome).

The dependency is ``open`` while ``trip_tasks`` or more task instances are failing
and nothing of the pool has succeeded since the latest failure seen to end (or, with
none seen, in the last two rounds); ``recovering`` once something has; ``closed``
below the threshold.
"""

from __future__ import annotations

from collections.abc import Collection
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
UP_FOR_RESCHEDULE = "up_for_reschedule"
FAILED = "failed"
SUCCESS = "success"
#: a try that has started or is about to, and has not ended
LIVE = frozenset({"scheduled", "queued", "running", "deferred", "restarting"})
#: the states the listing of live task instances asks for
WAITING_OR_LIVE = frozenset({UP_FOR_RETRY, UP_FOR_RESCHEDULE, *LIVE})
#: the states the listing of recent outcomes asks for
ENDED = frozenset({SUCCESS, FAILED})

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

    @property
    def in_retry(self) -> bool:
        """Whether this is a retry that has not ended: try 2 or later, waiting or live."""
        return self.try_number >= 2 and (self.state in LIVE or self.state == UP_FOR_RESCHEDULE)

    @property
    def attempts_left(self) -> int:
        """Tries still open to the task instance, the next or current one included."""
        next_try = self.try_number + 1 if self.state == UP_FOR_RETRY else self.try_number
        return self.max_tries - next_try + 2


def label(key: TaskKey) -> str:
    """``dag.task[3] (run)`` for a task instance."""
    dag_id, run_id, task_id, map_index = key
    task = label_of(task_id, map_index)
    return f"{dag_id}.{task} ({run_id})"


@dataclass(frozen=True)
class Fleet:
    """What one read found of a pool.

    :param pool: the pool's name.
    :param read_at: when it was read, on the API server's clock.
    :param tries: the current try of each task instance listed.
    :param counted_failed: task instances whose ``failed`` try the policy classed
        retryable or unknown (its XCom key says so).
    :param forced: ``"open"`` or ``"closed"`` when on-call forces the state.
    """

    pool: str
    read_at: pendulum.DateTime
    tries: tuple[PoolTry, ...]
    counted_failed: frozenset[TaskKey] = frozenset()
    forced: str | None = None

    def failing(self, window_start: pendulum.DateTime) -> list[PoolTry]:
        """The tries that count as failing, one per task instance (see the module)."""
        found = {}
        for item in self.tries:
            # the state first: a key is a new tuple, and most tries are not failed ones
            counted = _ended_within(item, FAILED, window_start) and item.key in self.counted_failed
            if counted or item.in_retry or _ended_within(item, UP_FOR_RETRY, window_start):
                found[item.key] = item
        return list(found.values())

    def state(self, settings: DependencySettings) -> DependencyState:
        """The dependency's state as this read shows it."""
        window_start = self.read_at - timedelta(seconds=settings.window_seconds)
        failing = self.failing(window_start)
        failures = [
            item.end_date
            for item in failing
            if item.end_date is not None and item.state in (UP_FOR_RETRY, FAILED)
        ]
        successes = [
            item.end_date for item in self.tries if _ended_within(item, SUCCESS, window_start)
        ]
        last_failure = max(failures, default=None)
        last_success = max((at for at in successes if at is not None), default=None)
        since = _earliest(failing)
        if self.forced in FORCED:
            state = str(self.forced)
        elif len(failing) < settings.trip_tasks:
            state = CLOSED
        elif _recovered(last_success, last_failure, self.read_at, settings):
            state = RECOVERING
        else:
            state = OPEN
        round_start = self.read_at - timedelta(seconds=settings.round_seconds)
        first_tries = sum(
            1
            for item in self.tries
            if item.try_number == 1
            and item.start_date is not None
            and item.start_date >= round_start
        )
        return DependencyState(
            pool=self.pool,
            state=state,
            forced=self.forced,
            read_at=self.read_at,
            failing=tuple(sorted(item.key for item in failing)),
            eligible=tuple(sorted(item.key for item in failing if _may_probe(item))),
            failing_since=since,
            last_failure=last_failure,
            last_success=last_success,
            successes=len(successes),
            first_tries=first_tries,
            held=sum(1 for item in failing if item.state == UP_FOR_RESCHEDULE),
            last_probe=_last_probe(self.tries),
        )


@dataclass(frozen=True)
class DependencyState:
    """The dependency's state at one read, and the facts it was worked out from.

    :param pool: the pool.
    :param state: ``open``, ``recovering`` or ``closed``.
    :param forced: the state on-call forced, if any.
    :param read_at: when it was read, on the API server's clock.
    :param failing: the task instances failing in the window.
    :param eligible: those of them that may probe: waiting or in a retry, with at
        least 2 attempts left (a failed probe spends one).
    :param failing_since: the earliest failure or retry of those, as far as the read shows.
    :param last_failure: the latest failure seen to end.
    :param last_success: the latest success of the pool in the window.
    :param successes: the successes of the pool in the window.
    :param first_tries: first tries of the pool started in the last round.
    :param held: retries waiting at their start (``up_for_reschedule``).
    :param last_probe: the start of the latest retry seen to end.
    """

    pool: str
    state: str
    forced: str | None
    read_at: pendulum.DateTime
    failing: tuple[TaskKey, ...]
    eligible: tuple[TaskKey, ...]
    failing_since: pendulum.DateTime | None
    last_failure: pendulum.DateTime | None
    last_success: pendulum.DateTime | None
    successes: int
    first_tries: int
    held: int
    last_probe: pendulum.DateTime | None

    @classmethod
    def unread(cls, pool: str, at: pendulum.DateTime) -> DependencyState:
        """The state of a pool that could not be read at ``at``: nothing known of it."""
        return cls(
            pool=pool,
            state=UNREAD,
            forced=None,
            read_at=at,
            failing=(),
            eligible=(),
            failing_since=None,
            last_failure=None,
            last_success=None,
            successes=0,
            first_tries=0,
            held=0,
            last_probe=None,
        )

    def record(
        self,
        settings: DependencySettings,
        *,
        try_number: int,
        action: str,
        decision: str,
        reason: str,
        budget: int,
        round_start: pendulum.DateTime,
        hold_until: pendulum.DateTime | None = None,
        next_probe: pendulum.DateTime | None = None,
        holds: int = 0,
        probed_round: int | None = None,
    ) -> DependencyRecord:
        """This state beside one task instance's decision, as it is stored.

        :param settings: how the pool is watched (its window and rounds).
        :param try_number: the try the decision is about.
        :param action: ``hold``, ``probe``, ``release``, ``run`` or ``refuse``.
        :param decision: the verdict.
        :param reason: the one-line reason.
        :param budget: the probes of the decision's round.
        :param round_start: when that round began.
        :param hold_until: until when the try is held, ``None`` when it is not.
        :param next_probe: when the next probe round starts, ``None`` when none is planned.
        :param holds: how often the try was held so far, this hold included.
        :param probed_round: the last round the task instance probed in.
        """
        return DependencyRecord(
            pool=self.pool,
            state=self.state,
            forced=self.forced,
            read_at=self.read_at,
            failing_since=self.failing_since,
            failing_tasks=len(self.failing),
            successes=self.successes,
            first_tries=self.first_tries,
            held=self.held,
            budget=budget,
            round_start=round_start,
            round_seconds=settings.round_seconds,
            last_probe=self.last_probe,
            next_probe=next_probe,
            try_number=try_number,
            action=action,
            decision=decision,
            hold_until=hold_until,
            reason=reason,
            holds=holds,
            probed_round=probed_round,
            window_seconds=settings.window_seconds,
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
            f"pool {self.pool} is {self.state}: {len(self.failing)} task instances failing"
            f"{since} in the last {settings.window_seconds} s, {success}"
        )


def _recovered(
    last_success: pendulum.DateTime | None,
    last_failure: pendulum.DateTime | None,
    read_at: pendulum.DateTime,
    settings: DependencySettings,
) -> bool:
    """Whether something of the pool succeeded after the latest failure seen to end.

    With no failure seen to end (every failing task instance is held or in a retry
    whose outcome is not known yet), only a success of the last two rounds counts: a
    retry's start and a held try's check look alike in the listing, so they cannot say
    when the failing began, and an older success may predate it. A success that does
    predate it costs one wave of released retries, which fail and open the pool again.
    """
    if last_success is None:
        return False
    if last_failure is not None:
        return last_success > last_failure
    return read_at - last_success <= timedelta(seconds=2 * settings.round_seconds)


def _ended_within(item: PoolTry, state: str, since: pendulum.DateTime) -> bool:
    return item.state == state and item.end_date is not None and item.end_date >= since


def _may_probe(item: PoolTry) -> bool:
    return item.state != FAILED and item.attempts_left >= 2


def _earliest(tries: Collection[PoolTry]) -> pendulum.DateTime | None:
    times = [item.end_date or item.start_date for item in tries]
    return min((at for at in times if at is not None), default=None)


def _last_probe(tries: Collection[PoolTry]) -> pendulum.DateTime | None:
    ended = (
        item.start_date
        for item in tries
        if item.try_number >= 2 and item.state in (UP_FOR_RETRY, FAILED, SUCCESS)
    )
    return max((at for at in ended if at is not None), default=None)
