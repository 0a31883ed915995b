"""A pool breaker's state, kept on the pool itself: written and read here.

A pool named in ``[retry_window] breaker_pools`` is a breaker: its slots are the valve
that holds every task of the pool while the dependency it stands for is down, and
follow what the dependency serves while it is partly up. The state lives in the pool's
own description, one line after whatever its owner wrote there, so Airflow's Pools page
shows it and every reader (the controller, a failing try that trips it, the gate, the
sensor, the view, the notifier) reads the same thing in the request it already makes::

    retry window breaker: open since 14:05:00Z, 0 of 24 slots; last probe ... -- {"v": 1, ...}

The JSON after :data:`SEPARATOR` is the state; the words before it are for people.
:class:`BreakerState` is both the writer and the reader, so the two cannot drift. The
reader never raises: a line that is not such a state, or of another version, reads as
``None``. Nothing here imports Airflow.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any, ClassVar

import pendulum

from airflow_retrywindow.labels import UTC_CLOCK

#: the key a gate's or sensor's decision row keeps its target's pool's breaker under
KEY = "retry_window_breaker"
#: what the refusal of a try its breaker held past its latest start says, and is found by
LATE_START = "past its latest start"
#: how the breaker's line in a pool's description begins
MARK = "retry window breaker:"
#: between the line's words and its JSON
SEPARATOR = " -- "

#: the pool is at its owner's size and every task runs
CLOSED = "closed"
#: the dependency is down: no slot open but a probe's, now and then
OPEN = "open"
#: the dependency answered again: the slots double each round up to the owner's size
RECOVERING = "recovering"
#: the dependency serves part of the load: the slots follow what it serves
LIMITED = "limited"
PHASES = frozenset({CLOSED, OPEN, RECOVERING, LIMITED})
#: what each phase means, in words
PHASE_WORDS = {
    CLOSED: "closed: every task of the pool runs, up to the pool's size",
    OPEN: "open: the dependency is down; the pool holds every task but a probe now and then",
    RECOVERING: "recovering: the dependency answers again; the slots double each round",
    LIMITED: "limited: the dependency serves part of the load; the slots follow what it serves",
}
#: how a probe went: a task took its slot, it succeeded or failed, or none took it
STARTED = "started"
SUCCEEDED = "succeeded"
FAILED = "failed"
MISSED = "missed"
OUTCOMES = frozenset({STARTED, SUCCEEDED, FAILED, MISSED})
#: the states on-call may force with the pool's Variable
FORCED = frozenset({OPEN, CLOSED})
#: the XCom key a try whose failure counts against its breaker pool's dependency, and
#: that ends ``failed`` (an unknown outcome, a last attempt), pushes: its retry policy
#: classed the failure, which nothing of the task instance's row tells
FAILURE_KEY = "retry_window.breaker_failure.{pool}"


def failure_key(pool: str) -> str:
    """The XCom key of a failure that counts against ``pool``'s dependency."""
    return FAILURE_KEY.format(pool=pool)


def forced_of(value: object) -> str | None:
    """The state on-call's Variable forces (``open`` or ``closed``), ``None`` for any other."""
    if not isinstance(value, str):
        return None
    found = value.strip().strip('"').lower()
    return found if found in FORCED else None


@dataclass(frozen=True)
class Probe:
    """The last slot opened to find out whether the dependency is back.

    :param at: when it was opened, on the API server's clock.
    :param outcome: ``started``, then ``succeeded`` or ``failed``; ``missed`` when no
        task took the slot.
    """

    at: pendulum.DateTime
    outcome: str


@dataclass(frozen=True)
class BreakerState:
    """One pool's breaker, as stored in the pool's description.

    :param pool: the pool.
    :param phase: ``closed``, ``open``, ``recovering`` or ``limited``.
    :param size: the pool's size as its owner set it: the most slots the breaker gives.
    :param slots: the slots the breaker set (the pool's size now).
    :param since: when the phase began, on the API server's clock.
    :param checked_at: the end of the last round counted: the next round counts the
        pool's outcomes since.
    :param probes: probes since the breaker opened.
    :param next_probe: when an open breaker opens its next probe.
    :param last_probe: the last probe, if any.
    :param owed: successes still owed before a limited breaker tries one slot more: each
        refused call of its last try costs nine, so refusals stay near a tenth of calls.
    :param by: who set this state: ``controller``, ``on-call``, or the task instance whose
        failure tripped it.
    :param reason: why, in one line.
    :param held_since: when the breaker last began to hold the pool (it left ``closed``),
        whatever phases followed; ``None`` while it is closed: the outage's name.
    :param quiet: rounds in a row whose calls were refused with none served.
    :param price: the successes a limited breaker owes before each slot more: nine for
        each refusal of the round that last cut it.
    """

    VERSION: ClassVar[int] = 1

    pool: str
    phase: str
    size: int
    slots: int
    since: pendulum.DateTime
    checked_at: pendulum.DateTime
    probes: int = 0
    next_probe: pendulum.DateTime | None = None
    last_probe: Probe | None = None
    owed: int = 0
    by: str = "controller"
    reason: str = ""
    held_since: pendulum.DateTime | None = None
    quiet: int = 0
    price: int = 0

    @classmethod
    def closed(cls, pool: str, size: int, at: pendulum.DateTime, reason: str) -> BreakerState:
        """A breaker that starts watching ``pool`` at its owner's ``size``."""
        return cls(pool, CLOSED, size, size, at, at, reason=reason)

    @property
    def holds(self) -> bool:
        """Whether the pool holds tasks its owner's size would let run."""
        return self.phase != CLOSED

    def moved(self, phase: str, slots: int, at: pendulum.DateTime, reason: str) -> BreakerState:
        """This breaker in ``phase`` with ``slots`` from ``at`` (its start kept within a
        phase), checked at ``at``."""
        since = self.since if phase == self.phase else at
        held = None if phase == CLOSED else (self.held_since or at)
        return replace(
            self, phase=phase, slots=slots, since=since, checked_at=at, by="controller",
            reason=reason, held_since=held, quiet=0,
        )  # fmt: skip

    def words(self) -> str:
        """The line's words: the phase, since when, the slots against the size, the probe."""
        text = (
            f"{self.phase} since {self.since.format(UTC_CLOCK)}, {self.slots} of {self.size} slots"
        )
        if self.last_probe is not None:
            text += f"; last probe {self.last_probe.at.format(UTC_CLOCK)} {self.last_probe.outcome}"
        return text

    def as_dict(self) -> dict[str, Any]:
        """The state as its JSON holds it."""
        fields = {key: value for key, value in asdict(self).items() if value is not None}
        for key in ("since", "checked_at", "next_probe", "held_since"):
            if key in fields:
                fields[key] = fields[key].isoformat()
        if self.last_probe is not None:
            fields["last_probe"] = {
                "at": self.last_probe.at.isoformat(), "outcome": self.last_probe.outcome,
            }  # fmt: skip
        return {"v": self.VERSION, **fields}

    def line(self) -> str:
        """The line kept in the pool's description."""
        state = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))
        return f"{MARK} {self.words()}{SEPARATOR}{state}"

    def described(self, description: str | None) -> str:
        """``description`` with this state's line in place of any earlier one."""
        return "\n".join([*owners_lines(description), self.line()])

    @classmethod
    def of(cls, value: object) -> BreakerState | None:
        """The state ``value`` (a dict as :meth:`as_dict` writes it) holds, or ``None``."""
        if not isinstance(value, Mapping) or value.get("v") != cls.VERSION:
            return None
        try:
            return cls._read(value)
        except (KeyError, TypeError, ValueError):
            return None

    @classmethod
    def _read(cls, value: Mapping[str, Any]) -> BreakerState:
        probe = value.get("last_probe")
        state = cls(
            pool=_text(value["pool"]),
            phase=_one_of(value["phase"], PHASES),
            size=_count(value["size"]),
            slots=_count(value["slots"]),
            since=_instant(value["since"]),
            checked_at=_instant(value["checked_at"]),
            probes=_count(value.get("probes", 0)),
            next_probe=_instant(value["next_probe"]) if value.get("next_probe") else None,
            last_probe=(
                Probe(_instant(probe["at"]), _one_of(probe["outcome"], OUTCOMES))
                if isinstance(probe, Mapping)
                else None
            ),
            owed=_count(value.get("owed", 0)),
            by=_text(value.get("by", "controller")),
            reason=str(value.get("reason", "")),
            held_since=_instant(value["held_since"]) if value.get("held_since") else None,
            quiet=_count(value.get("quiet", 0)),
            price=_count(value.get("price", 0)),
        )
        return state

    @classmethod
    def in_description(cls, description: str | None) -> BreakerState | None:
        """The state a pool's description holds, or ``None`` when it holds none."""
        for line in (description or "").splitlines():
            if line.startswith(MARK) and SEPARATOR in line:
                try:
                    return cls.of(json.loads(line.rsplit(SEPARATOR, 1)[1]))
                except ValueError:
                    return None
        return None


def owners_lines(description: str | None) -> list[str]:
    """What the pool's owner wrote in its description, the breaker's line left out."""
    return [line for line in (description or "").splitlines() if not line.startswith(MARK)]


def _text(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(value)
    return value


def _one_of(value: object, allowed: frozenset[str]) -> str:
    if value not in allowed:
        raise ValueError(value)
    return str(value)


def _count(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(value)
    return value


def _instant(value: object) -> pendulum.DateTime:
    found = pendulum.parse(str(value))
    if not isinstance(found, pendulum.DateTime) or found.tzinfo is None:
        raise ValueError(value)
    return found.in_timezone("UTC")
