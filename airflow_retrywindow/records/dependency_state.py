"""Dependency state: what a held or probing retry stored about its pool, written and read here.

A gated task whose pool is not ``default_pool`` has that pool as its dependency.
At a retry's start the check works out whether the dependency is failing and
holds, probes or releases the retry. Each such decision keeps what it saw, as
JSON, under :data:`KEY` in the task state store and in XCom::

    {"version": 1, "pool": "positions_api", "state": "open", "forced": null,
     "readAt": "2026-12-04T14:02:11+00:00", "failingSince": "2026-12-04T14:00:03+00:00",
     "failingTasks": 12, "successes": 0, "held": 10, "budget": 1,
     "roundStart": "...", "roundSeconds": 60, "nextProbe": "...",
     "tryNumber": 2, "action": "hold", "decision": "dependency-held",
     "holdUntil": "...", "reason": "dependency-held: pool positions_api is failing ...",
     "waitsIn": "triggerer"}

Older records (with ``firstTries`` and ``lastProbe``, which no read counts any more) read
as they were, those two left out.

:class:`DependencyRecord` is both the writer (:meth:`~DependencyRecord.as_dict`)
and the reader (:meth:`~DependencyRecord.of`), so the two cannot drift apart.
The reader never raises: a value that is not such a record, or is of another
version, reads as ``None`` and the view, the notifier and ``explain`` show
nothing of it rather than a guess. Nothing here imports Airflow.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

import pendulum

from airflow_retrywindow.exceptions import RecordError
from airflow_retrywindow.records.decision_record import instant

#: the task state store and XCom key each held, probing or releasing decision stores under;
#: a policy decision that carries the record keeps it under the same key
KEY = "retry_window_dependency"

#: the dependency's states: retries run, are held, or are released in waves
CLOSED = "closed"
OPEN = "open"
RECOVERING = "recovering"
#: the pool could not be read: the retry is held for its own backoff
UNREAD = "unread"
STATES = frozenset({CLOSED, OPEN, RECOVERING, UNREAD})
#: the states a person may force through the Airflow Variable
FORCED = frozenset({CLOSED, OPEN})
#: where a held try waits: deferred in the triggerer, or rescheduled (a worker each check)
TRIGGERER = "triggerer"
WORKER = "worker"
WAITS = frozenset({TRIGGERER, WORKER})
WAITS_WORDS = {
    TRIGGERER: "in the triggerer, holding no worker",
    WORKER: "rescheduled, a worker at each check: no triggerer runs, or none woke it in time",
}
#: what the retry-start check did with the try
ACTIONS = frozenset({"hold", "probe", "release", "run", "refuse"})
#: what each state means for the held retries, in words
STATE_WORDS = {
    OPEN: "failing: retries are held, a few run as probes each round",
    RECOVERING: "recovering: a success came after the latest failure, held retries are "
    "released in waves",
    CLOSED: "healthy: retries run",
    UNREAD: "not read: the pool's task instances could not be read, so the retry is held "
    "for its own backoff",
}

#: how a reader writes a stored time (the view: a dated UTC time; ``explain``: like its table)
TimeText = Callable[[pendulum.DateTime], str]


@dataclass(frozen=True)
class DependencyRecord:
    """One decision's view of its pool as a dependency, as stored.

    :param pool: the pool, the dependency's name.
    :param state: ``open``, ``recovering`` or ``closed``.
    :param forced: ``open`` or ``closed`` when the Airflow Variable forced the state.
    :param read_at: when the pool's task instances were read, on the API server's clock.
    :param failing_since: the first failure of the current outage; ``None`` when not failing.
    :param failing_tasks: distinct task instances of the pool failing in the window.
    :param successes: successes of the pool since the failing began.
    :param held: task instances in a retry now, held or under way.
    :param budget: probes this round.
    :param round_start: when this round began.
    :param round_seconds: how long a round is.
    :param next_probe: when the next probe round starts; ``None`` when none is planned.
    :param try_number: the try the decision is about.
    :param action: ``hold``, ``probe``, ``release``, ``run`` or ``refuse``.
    :param decision: the verdict: ``dependency-held``, ``retry-eligible`` or
        ``deadline-infeasible``.
    :param hold_until: until when the try is held; ``None`` when it is not.
    :param reason: the one-line reason, as stored.
    :param holds: how often this try was held so far, this hold included: each hold is
        twice as long as the one before.
    :param probed_round: the last round this task instance probed in: it probes at most
        once a round.
    :param window_seconds: how far back the successes were counted at most.
    :param waits_in: where a held try waits: ``triggerer`` (deferred: no worker while it
        waits) or ``worker`` (rescheduled: a worker start at each check, where no
        triggerer answered); ``None`` when it is not held.
    """

    #: the shape this class writes and reads; any other is not read
    VERSION: ClassVar[int] = 1

    pool: str
    state: str
    forced: str | None
    read_at: pendulum.DateTime
    failing_since: pendulum.DateTime | None
    failing_tasks: int
    successes: int
    held: int
    budget: int
    round_start: pendulum.DateTime
    round_seconds: int
    next_probe: pendulum.DateTime | None
    try_number: int
    action: str
    decision: str
    hold_until: pendulum.DateTime | None
    reason: str
    holds: int = 0
    probed_round: int | None = None
    window_seconds: int = 0
    waits_in: str | None = None

    def __post_init__(self) -> None:
        """Times become pendulum UTC; a record that would not read back is refused here.

        :raises RecordError: naming the field and the value, so a writer stores nothing
            its readers would drop.
        """
        for name in _TIMES:
            when = getattr(self, name)
            if when is None:
                continue
            if not isinstance(when, datetime) or when.tzinfo is None:
                raise RecordError(name, when, "must be a datetime with a time zone (pendulum)")
            object.__setattr__(self, name, pendulum.instance(when).in_timezone("UTC"))
        _fields_of(self.as_dict())

    def as_dict(self) -> dict[str, Any]:
        """The record exactly as stored: camelCase keys, times in ISO 8601 UTC."""
        return {
            "version": self.VERSION,
            "pool": self.pool,
            "state": self.state,
            "forced": self.forced,
            "readAt": _iso(self.read_at),
            "failingSince": _iso(self.failing_since),
            "failingTasks": self.failing_tasks,
            "successes": self.successes,
            "held": self.held,
            "budget": self.budget,
            "roundStart": _iso(self.round_start),
            "roundSeconds": self.round_seconds,
            "nextProbe": _iso(self.next_probe),
            "tryNumber": self.try_number,
            "action": self.action,
            "decision": self.decision,
            "holdUntil": _iso(self.hold_until),
            "reason": self.reason,
            "holds": self.holds,
            "probedRound": self.probed_round,
            "windowSeconds": self.window_seconds,
            "waitsIn": self.waits_in,
        }

    @classmethod
    def of(cls, value: object) -> DependencyRecord | None:
        """The record ``value`` holds; ``None`` for any other value or version. Never raises.

        :param value: a stored value, decoded from JSON.
        """
        try:
            return cls.read(value)
        except (ValueError, TypeError, OverflowError):  # RecordError and any bad time
            return None

    @classmethod
    def read(cls, value: object) -> DependencyRecord:
        """The record ``value`` holds.

        :param value: a stored value, decoded from JSON.
        :raises RecordError: naming the field and the value that cannot be read.
        """
        return cls(**_fields_of(value))

    def facts(self, written: TimeText, *, by: str | None = None) -> list[tuple[str, str]]:
        """What the record says, as (name, text) pairs: the view and ``explain`` say it alike.

        :param written: how a time is written.
        :param by: the task instance that read it, when the reader knows which.
        """
        forced = f" (forced {self.forced} by the Variable retry_window_dependency_{self.pool})"
        reader = f" by {by}" if by else ""
        return [
            ("State", STATE_WORDS[self.state] + (forced if self.forced else "")),
            ("Failing since", written(self.failing_since) if self.failing_since else "-"),
            (
                "Failing",
                f"{_counted(self.failing_tasks, 'task instance')}, "
                f"{_counted(self.successes, 'success', 'successes')} since it began",
            ),
            ("In a retry", f"{_counted(self.held, 'task instance')} held or under way now"),
            *([("Waits", WAITS_WORDS[self.waits_in])] if self.waits_in in WAITS_WORDS else []),
            (
                "Probes",
                f"{self.budget} this round (rounds of {self.round_seconds} s, this one "
                f"from {written(self.round_start)})",
            ),
            ("Next probe", written(self.next_probe) if self.next_probe else "-"),
            (
                "Read",
                f"{written(self.read_at)} (the API server's clock){reader}, "
                f"try {self.try_number}: {self.did(written)}",
            ),
        ]

    def did(self, written: TimeText) -> str:
        """What the try did: ``hold, held until ...``, ``probe``, ``release``, ``run``, ``refuse``.

        :param written: how a time is written.
        """
        until = f", held until {written(self.hold_until)}" if self.hold_until else ""
        return self.action + until

    @property
    def is_open(self) -> bool:
        """Whether retries are held: the dependency is down."""
        return self.state == OPEN


def dependency_of(stored: object) -> DependencyRecord | None:
    """The dependency record a stored value holds; ``None`` when it holds none it can read.

    :param stored: the record itself (XCom), a decision history whose ``latest`` is one
        (task state store), or a policy decision carrying one under :data:`KEY`.
    """
    found = DependencyRecord.of(stored)
    if found is not None or not isinstance(stored, Mapping):
        return found
    for inner in (stored.get("latest"), stored.get(KEY)):
        found = DependencyRecord.of(inner)
        if found is not None:
            return found
    return None


def latest_per_pool(records: list[DependencyRecord]) -> list[DependencyRecord]:
    """The latest record of each pool, by ``readAt``, sorted by pool name.

    :param records: records of any pools, in any order.
    """
    latest: dict[str, DependencyRecord] = {}
    for record in records:
        kept = latest.get(record.pool)
        if kept is None or record.read_at > kept.read_at:
            latest[record.pool] = record
    return [latest[pool] for pool in sorted(latest)]


#: the attributes that hold a time
_TIMES = ("read_at", "failing_since", "round_start", "next_probe", "hold_until")


def _fields_of(value: object) -> dict[str, Any]:
    """The attributes a stored record gives :class:`DependencyRecord`.

    :raises RecordError: naming the field and the value that cannot be read.
    """
    if not isinstance(value, Mapping):
        raise RecordError("the stored value", value, "must be an object")
    version = value.get("version")
    if isinstance(version, bool) or version != DependencyRecord.VERSION:
        raise RecordError("version", version, f"must be {DependencyRecord.VERSION}")
    return {
        "pool": _text(value, "pool"),
        "state": _one_of(value, "state", STATES),
        "forced": None if value.get("forced") is None else _one_of(value, "forced", FORCED),
        "read_at": instant(value, "readAt"),
        "failing_since": _maybe_instant(value, "failingSince"),
        "failing_tasks": _count(value, "failingTasks"),
        "successes": _count(value, "successes"),
        "held": _count(value, "held"),
        "budget": _count(value, "budget"),
        "round_start": instant(value, "roundStart"),
        "round_seconds": _count(value, "roundSeconds", least=1),
        "next_probe": _maybe_instant(value, "nextProbe"),
        "try_number": _count(value, "tryNumber", least=1),
        "action": _one_of(value, "action", ACTIONS),
        "decision": _text(value, "decision"),
        "hold_until": _maybe_instant(value, "holdUntil"),
        "reason": _text(value, "reason", empty=True),
        "holds": _count(value, "holds") if "holds" in value else 0,
        "probed_round": None if value.get("probedRound") is None else _count(value, "probedRound"),
        "window_seconds": _count(value, "windowSeconds") if "windowSeconds" in value else 0,
        "waits_in": None if value.get("waitsIn") is None else _one_of(value, "waitsIn", WAITS),
    }


def _counted(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else (many or one + 's')}"


def _iso(when: pendulum.DateTime | None) -> str | None:
    return None if when is None else when.in_timezone("UTC").isoformat()


def _maybe_instant(value: Mapping[str, Any], key: str) -> pendulum.DateTime | None:
    return None if value.get(key) is None else instant(value, key)


def _text(value: Mapping[str, Any], key: str, *, empty: bool = False) -> str:
    found = value.get(key)
    if not isinstance(found, str) or (not empty and not found):
        raise RecordError(key, found, "must be text" if empty else "must be a non-empty text")
    return found


def _one_of(value: Mapping[str, Any], key: str, allowed: frozenset[str]) -> str:
    found = value.get(key)
    if not isinstance(found, str) or found not in allowed:
        raise RecordError(key, found, f"must be one of {', '.join(sorted(allowed))}")
    return found


def _count(value: Mapping[str, Any], key: str, *, least: int = 0) -> int:
    found = value.get(key)
    if isinstance(found, bool) or not isinstance(found, int) or found < least:
        raise RecordError(key, found, f"must be a whole number from {least} up")
    return found
