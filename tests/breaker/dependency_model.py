"""A dependency a pool's tasks call, as a flow: what a round of a pool with some slots gets.

Each slot the pool gives runs one try after another without a pause (tasks wait for
it). The dependency serves ``capacity`` calls at once, each try holding its slot
``served`` seconds, and refuses the rest at once (a refused try holds its slot
``refused`` seconds: the task's own start and end). ``background`` of the served calls
fail anyway, as a small steady share of any real service's calls does.
"""

from __future__ import annotations

from dataclasses import dataclass

import pendulum

from airflow_retrywindow.breaker.law import Reading


@dataclass
class Dependency:
    """A dependency that serves ``capacity`` calls at once (0: down)."""

    capacity: int
    served: float = 7.0
    refused: float = 4.0
    background: float = 0.0

    def round(self, slots: int, seconds: float, at: pendulum.DateTime) -> Reading:
        """What a round of ``seconds`` with ``slots`` open gets from the dependency (a
        probe's slot, opened and closed within a round, is the caller's to add)."""
        serving = min(slots, self.capacity)
        calls = serving * seconds / self.served
        failed_anyway = calls * self.background
        refused = (slots - serving) * seconds / self.refused
        return Reading(
            at=at,
            size=slots,
            occupied=slots,
            successes=round(calls - failed_anyway),
            failures=round(refused + failed_anyway),
            served=serving,
        )
