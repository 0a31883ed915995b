"""Which pools are breakers, and how each is run (pure).

``[retry_window] breaker_pools`` names them, as a JSON object by pool name, each with its
own settings or none::

    {"positions_api": {"round": 30}, "warehouse": {}}

A pool is a breaker only there: holding a pool holds every task in it, any DAG's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

#: the pool of every task that names none, the breakers' own controller's among them
DEFAULT_POOL = "default_pool"
#: where the controller runs: the DAG ``pool_breaker_dag()`` makes, and its one task
CONTROLLER_DAG = "retry_window_pool_breakers"
CONTROLLER_TASK = "control"
#: the bounds of a round, in seconds
MIN_ROUND = 5
MAX_ROUND = 3600
#: the most refused calls a trip may wait for
MAX_TRIP_CALLS = 1000


class BreakerSettingError(ValueError):
    """A breaker setting holds a value that cannot be used.

    :param field: the setting, e.g. ``breaker_pools["positions_api"].round``.
    :param value: the value found.
    :param expected: what to write instead.
    """

    def __init__(self, field: str, value: object, expected: str) -> None:
        super().__init__(f"{field} = {value!r} is not valid: {expected}")
        self.field = field
        self.value = value


@dataclass(frozen=True)
class BreakerSettings:
    """How one breaker pool is run.

    :param round: seconds between two looks of the controller at the pool.
    :param trip_calls: refused calls, with none served, that open the breaker.
    """

    round: int = 60
    trip_calls: int = 3

    def __post_init__(self) -> None:
        _whole("round", self.round, MIN_ROUND, MAX_ROUND)
        _whole("trip_calls", self.trip_calls, 1, MAX_TRIP_CALLS)


#: the names a pool's object in ``breaker_pools`` may set
TUNABLE = tuple(field.name for field in fields(BreakerSettings))


@dataclass(frozen=True)
class BreakerPools:
    """The breaker pools and each one's settings.

    :param pools: settings by pool name.
    """

    pools: Mapping[str, BreakerSettings]

    @classmethod
    def parse(cls, text: str, *, option: str) -> BreakerPools:
        """The breakers ``text`` (``breaker_pools``'s JSON) names.

        :param option: the option's name, for the message.
        :raises BreakerSettingError: naming the pool, the field and the value.
        """
        if not text.strip():
            return cls({})
        try:
            given = json.loads(text)
        except ValueError:
            given = None
        if not isinstance(given, dict):
            raise BreakerSettingError(
                option, text, "a JSON object of pool names, each an object of " + ", ".join(TUNABLE)
            )
        return cls({name: _pool(name, value, option) for name, value in given.items()})

    def of(self, pool: str) -> BreakerSettings | None:
        """``pool``'s settings, ``None`` when it is no breaker."""
        return self.pools.get(pool)

    def shortest_round(self) -> int:
        """The shortest round of any breaker (the longest allowed when there is none)."""
        return min((each.round for each in self.pools.values()), default=MAX_ROUND)


def _pool(name: str, value: object, option: str) -> BreakerSettings:
    field = f"{option}[{name!r}]"
    if name == DEFAULT_POOL:
        raise BreakerSettingError(
            field,
            value,
            f"{DEFAULT_POOL} cannot be a breaker: every task that names no pool runs in it, "
            "the breakers' controller too; give the dependency's tasks a pool of their own",
        )
    if not isinstance(value, dict):
        raise BreakerSettingError(field, value, f"an object of {', '.join(TUNABLE)}, or {{}}")
    unknown = sorted(set(value) - set(TUNABLE))
    if unknown:
        raise BreakerSettingError(f"{field}.{unknown[0]}", value[unknown[0]], f"one of {TUNABLE}")
    try:
        return BreakerSettings(**value)
    except BreakerSettingError as error:
        expected = str(error).split(": ", 1)[1]
        raise BreakerSettingError(f"{field}.{error.field}", error.value, expected) from None


def _whole(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BreakerSettingError(name, value, f"a whole number from {low} to {high}")
