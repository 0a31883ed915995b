"""Pool capacity: can the next attempt get its slots, now or ever?

Limit concurrency by the real dependency: tasks sharing a database share an
Airflow pool, heavy tasks weigh more through ``pool_slots``. A pool of 2 slots
takes one heavy extraction (``pool_slots=2``) or two light ones (1 each). Free
workers do not create pool slots, and a slot is not a database connection.

The verdicts:

* ``fits-now`` - the pool has at least ``pool_slots`` open slots right now;
* ``wait-capacity`` - it fits the pool but not the open slots: the attempt is
  eligible and will queue until slots free up;
* ``capacity-infeasible`` - ``pool_slots`` is larger than the whole pool (or the
  pool does not exist): the attempt can never run there.

Occupied slots count running and queued task instances, and deferred ones when
the pool has ``include_deferred``, exactly as Airflow counts them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_retrywindow.hooks.api_reader import PoolRow

FITS_NOW = "fits-now"
WAIT_CAPACITY = "wait-capacity"
CAPACITY_INFEASIBLE = "capacity-infeasible"


@dataclass(frozen=True)
class CapacityVerdict:
    """Whether a task's next attempt can get its slots.

    :param verdict: ``fits-now``, ``wait-capacity`` or ``capacity-infeasible``.
    :param reason: one line with the numbers.
    :param pool: the pool's name.
    :param pool_slots: the slots the task needs.
    :param state: the pool as reported, ``None`` when it does not exist.
    """

    verdict: str
    reason: str
    pool: str
    pool_slots: int
    state: PoolRow | None

    @property
    def blocks(self) -> bool:
        """Whether the verdict refuses the attempt (it could never run)."""
        return self.verdict == CAPACITY_INFEASIBLE

    def as_dict(self) -> dict[str, Any]:
        """The verdict as a JSON object for the decision record."""
        numbers = self.state.as_dict() if self.state else {"pool": self.pool, "exists": False}
        return {
            "verdict": self.verdict,
            "reason": self.reason,
            "poolSlots": self.pool_slots,
            **numbers,
        }


def assess(
    pool_name: str, pool_slots: int, state: PoolRow | None, *, size: int | None = None
) -> CapacityVerdict:
    """The capacity verdict for a task needing ``pool_slots`` slots of ``pool_name``.

    :param pool_name: the pool the task runs in.
    :param pool_slots: the slots one attempt holds (``pool_slots`` of the task).
    :param state: the pool as reported by the API, ``None`` if it was not found.
    :param size: the pool's own size when its breaker holds it below that (its slots
        come back as the dependency does): what the task can ever get.
    """
    if isinstance(pool_slots, bool) or not isinstance(pool_slots, int) or pool_slots < 1:
        raise ValueError(f"pool_slots must be a whole number of at least 1, got {pool_slots!r}")
    need = f"needs {pool_slots} slot{'s' if pool_slots != 1 else ''} of pool {pool_name!r}"
    if state is None:
        return CapacityVerdict(
            CAPACITY_INFEASIBLE,
            f"{CAPACITY_INFEASIBLE}: {need}, which does not exist; create the pool or "
            "move the task",
            pool_name,
            pool_slots,
            None,
        )
    free = state.open_slots()
    if free is None:
        return CapacityVerdict(
            FITS_NOW, f"{FITS_NOW}: {need}, which is unlimited", pool_name, pool_slots, state
        )
    whole = state.slots if size is None else max(size, state.slots)
    if pool_slots > whole:
        return CapacityVerdict(
            CAPACITY_INFEASIBLE,
            f"{CAPACITY_INFEASIBLE}: {need}, which has only {whole}; it can never run "
            "there (free workers do not add pool slots)",
            pool_name,
            pool_slots,
            state,
        )
    held = _held(state)
    if pool_slots <= free:
        return CapacityVerdict(
            FITS_NOW,
            f"{FITS_NOW}: {need}; {free} of {state.slots} are open ({held})",
            pool_name,
            pool_slots,
            state,
        )
    return CapacityVerdict(
        WAIT_CAPACITY,
        f"{WAIT_CAPACITY}: {need}; only {max(free, 0)} of {state.slots} are open ({held}), "
        "so the attempt will queue until slots free up",
        pool_name,
        pool_slots,
        state,
    )


def _held(state: PoolRow) -> str:
    deferred = (
        f"{state.deferred} held by deferred tasks"
        if state.include_deferred
        else f"{state.deferred} deferred not counted"
    )
    return f"{state.occupied} occupied, {deferred}"
