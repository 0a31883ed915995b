"""The REST API a breaker's round uses, answered from memory, with a scheduler in its sleep.

It holds the pools (each a :class:`PoolRow`, its description the breaker's line), the
tries of their task instances, the failure marks their failing tries pushed and
on-call's Variables, and logs each request. The round's wait for its probe is
:meth:`FakePools.scheduler_loop`: it queues as many of a pool's waiting task instances
as its open slots let, as Airflow's scheduler does in its loop.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

import pendulum

from airflow_retrywindow.hooks.api_reader import PoolListing, PoolRow, PoolTry

START = pendulum.datetime(2026, 12, 7, 14, 0, tz="UTC")


def pool_row(name: str, slots: int, description: str | None = None, occupied: int = 0) -> PoolRow:
    """A pool as ``GET /pools`` lists it."""
    return PoolRow(name, slots, occupied, 0, slots - occupied, False, description)


def tried(pool: str, state: str, ended: pendulum.DateTime, seconds: float = 7.0) -> PoolTry:
    """A try of a task instance of ``pool`` that ended ``state`` at ``ended``."""
    return PoolTry(
        f"dag_of_{pool}", "run_1", "call", -1, state, 1, 3, ended.subtract(seconds=seconds), ended
    )


@dataclass
class FakePools:
    """What a round reads and writes, in memory; ``now`` is the API server's clock."""

    rows: dict[str, PoolRow]
    now: pendulum.DateTime = START
    tries: list[PoolTry] = field(default_factory=list)
    #: (XCom key, when pushed) of each failure mark
    marks: list[tuple[str, pendulum.DateTime]] = field(default_factory=list)
    forced: dict[str, str] = field(default_factory=dict)
    #: task instances of each pool waiting for a slot (``scheduled``)
    waiting: dict[str, int] = field(default_factory=dict)
    calls: list[tuple[object, ...]] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)
    clock_offset: object = None

    def pools(self, names: Collection[str] | None = None) -> Mapping[str, PoolRow]:
        self.calls.append(("pools",))
        return {name: row for name, row in self.rows.items() if names is None or name in names}

    def pool_listing(
        self,
        pool: str,
        states: Collection[str],
        *,
        ended_since: datetime | None = None,
        order_by: str = "id",
        limit: int = 0,
    ) -> PoolListing:
        self.calls.append(("pool_listing", pool))
        found = [
            each
            for each in self.tries
            if each.dag_id == f"dag_of_{pool}"
            and each.state in states
            and (
                ended_since is None or (each.end_date is not None and each.end_date >= ended_since)
            )
        ]
        if order_by == "-end_date":
            found.sort(key=lambda each: each.end_date or START, reverse=True)
        return PoolListing(tuple(found[:limit]), len(found))

    def xcom_count(self, key: str, since: datetime) -> int:
        self.calls.append(("xcom_count", key))
        return sum(1 for pushed, at in self.marks if pushed == key and at >= since)

    def variables(self, prefix: str) -> dict[str, str]:
        self.calls.append(("variables", prefix))
        return {key: value for key, value in self.forced.items() if key.startswith(prefix)}

    def set_pool(self, pool: PoolRow, slots: int, description: str) -> PoolRow:
        name = pool.name
        self.calls.append(("set_pool", name, slots))
        row = self.rows[name]
        self.rows[name] = replace(
            row, slots=slots, description=description, open=slots - row.occupied
        )
        return self.rows[name]

    def scheduler_loop(self, seconds: float) -> None:
        """The round's wait: the scheduler queues waiting task instances into open slots."""
        self.waits.append(seconds)
        for name, row in self.rows.items():
            taken = min(self.waiting.get(name, 0), max(row.slots - row.occupied, 0))
            self.waiting[name] = self.waiting.get(name, 0) - taken
            occupied = row.occupied + taken
            self.rows[name] = replace(row, occupied=occupied, open=row.slots - occupied)

    def writes(self) -> list[tuple[object, ...]]:
        """The changes of slots made, in order."""
        return [call[1:] for call in self.calls if call[0] == "set_pool"]

    def requests(self) -> list[object]:
        """The kind of each request made, in order."""
        return [call[0] for call in self.calls]
