"""What ``[retry_window]`` says of each pool as a dependency (pure).

The defaults come from the ``dependency_*`` options; ``dependency_pools`` tunes or
switches off a pool by name, as a JSON object::

    {"positions_api": {"trip_tasks": 5, "round": 30}, "legacy_db": "off"}
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

#: the pool every task is in unless it names one: it is nobody's dependency
DEFAULT_POOL = "default_pool"
#: what switches a pool off in ``dependency_pools``
OFF = "off"
#: the longest a held retry waits before it is checked again, in seconds
MAX_HOLD = 3600
#: the longest round and look-back a setting may give, in seconds
MAX_ROUND = 3600
MAX_WINDOW = 86400
#: the most task instances a trip may need
MAX_COUNT = 1000
#: the most retries a round may probe: a read lists 100 candidates
MAX_PROBES = 100
#: names ``dependency_pools`` no longer uses and passes over: the probes of a round
#: no longer scale with first tries, which a read no longer lists
RETIRED = frozenset({"probe_ratio"})


class DependencySettingError(ValueError):
    """A dependency setting holds a value that cannot be used.

    :param field: the setting, e.g. ``dependency_pools["positions_api"].trip_tasks``.
    :param value: the value found.
    :param expected: what to write instead.
    """

    def __init__(self, field: str, value: object, expected: str) -> None:
        super().__init__(f"{field} = {value!r} is not valid: {expected}")
        self.field = field
        self.value = value


@dataclass(frozen=True)
class DependencySettings:
    """How one pool is watched as a dependency.

    :param round_seconds: probes are budgeted in rounds of this length on the API
        server's clock.
    :param min_probes: the held retries that probe in every round.
    :param trip_tasks: how many distinct task instances must be failing to hold retries.
    :param window_seconds: how far back a failure or a success counts.
    :param enabled: ``False`` when the pool is switched off.
    """

    round_seconds: int = 60
    min_probes: int = 1
    trip_tasks: int = 3
    window_seconds: int = 300
    enabled: bool = True

    def __post_init__(self) -> None:
        _whole("round", self.round_seconds, 1, MAX_ROUND)
        _whole("min_probes", self.min_probes, 1, MAX_PROBES)
        _whole("trip_tasks", self.trip_tasks, 1, MAX_COUNT)
        _whole("window", self.window_seconds, 1, MAX_WINDOW)

    def as_dict(self) -> dict[str, Any]:
        """The settings, as kept beside a decision."""
        return {
            "round": self.round_seconds,
            "minProbes": self.min_probes,
            "tripTasks": self.trip_tasks,
            "window": self.window_seconds,
        }


#: the names ``dependency_pools`` accepts for a pool, and the field each sets
TUNABLE = {
    "round": "round_seconds",
    "min_probes": "min_probes",
    "trip_tasks": "trip_tasks",
    "window": "window_seconds",
}


def _whole(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise DependencySettingError(name, value, f"a whole number from {low} to {high}")


@dataclass(frozen=True)
class PoolSettings:
    """The defaults and each named pool's own settings.

    :param defaults: what every pool other than ``default_pool`` gets.
    :param pools: a pool's own settings by name (``enabled=False`` when switched off).
    """

    defaults: DependencySettings
    pools: dict[str, DependencySettings]

    @classmethod
    def parse(cls, defaults: DependencySettings, text: str, *, option: str) -> PoolSettings:
        """The settings ``text`` (``dependency_pools``'s JSON) gives over ``defaults``.

        :param option: the option's name, for the message.
        :raises DependencySettingError: naming the pool, the field and the value.
        """
        if not text.strip():
            return cls(defaults, {})
        try:
            given = json.loads(text)
        except ValueError:
            given = None
        if not isinstance(given, dict):
            raise DependencySettingError(
                option,
                text,
                'a JSON object of pool names, each "off" or an object of ' + ", ".join(TUNABLE),
            )
        return cls(
            defaults, {name: _pool(defaults, name, value, option) for name, value in given.items()}
        )

    def of(self, pool: str) -> DependencySettings | None:
        """``pool``'s settings, or ``None`` when it is no dependency (off, or ``default_pool``)."""
        if pool == DEFAULT_POOL:
            return None
        found = self.pools.get(pool, self.defaults)
        return found if found.enabled else None

    def unknown(self, existing: set[str]) -> list[str]:
        """The pools named in ``dependency_pools`` that are not in ``existing``."""
        return sorted(name for name in self.pools if name not in existing)


def _pool(
    defaults: DependencySettings, name: str, value: object, option: str
) -> DependencySettings:
    field = f"{option}[{name!r}]"
    if value == OFF:
        return replace(defaults, enabled=False)
    if not isinstance(value, dict):
        raise DependencySettingError(field, value, f'"off" or an object of {", ".join(TUNABLE)}')
    changes: dict[str, Any] = {}
    for key, setting in value.items():
        if key in RETIRED:
            continue
        if key not in TUNABLE:
            raise DependencySettingError(f"{field}.{key}", setting, f"one of {', '.join(TUNABLE)}")
        changes[TUNABLE[key]] = setting
    try:
        return replace(defaults, **changes)
    except DependencySettingError as error:
        raise DependencySettingError(
            f"{field}.{error.field}", error.value, str(error).split(": ", 1)[1]
        ) from None
