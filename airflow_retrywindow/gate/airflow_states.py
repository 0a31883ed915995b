"""Airflow's task instance states, and what each says about a target's latest try.

========================================================  ============================
Airflow state of the latest try                            model state
========================================================  ============================
``success``                                                ``succeeded``
``queued``, ``scheduled``, ``running``, ``deferred``,      ``running``
``up_for_reschedule``, ``restarting``, ``awaiting_input``
``up_for_retry``, ``failed``                               ``retryable``, unless the
                                                           task's ``RetryWindowPolicy``
                                                           classified the failure as
                                                           ``unknown`` or ``terminal``
never tried (``try_number`` 0)                             ``not-attempted`` (no fixture:
                                                           a first run is not a retry)
========================================================  ============================

Each task instance is judged on its own: every map index of a mapped target too.
A task instance reset since its last try (``None``, ``skipped``,
``upstream_failed``, ``removed``: after a manual clear, a skip, an upstream
failure or a DAG change) is judged by that last try, read from the task's
earlier tries. Those are every state of Airflow 3.3's ``TaskInstanceState``; any
other state is refused (:class:`TargetError`) rather than guessed at, since
reading past it could turn a try we do not understand into a first run.

Both the read (which tries to fetch) and the observation (which model state)
use these; the names are Airflow's, but nothing here imports Airflow.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from airflow_retrywindow.exceptions import TargetError
from airflow_retrywindow.gate.instances import label

if TYPE_CHECKING:
    from airflow_retrywindow.hooks.api_reader import TaskInstanceRow

RUNNING_STATES = frozenset(
    {
        "queued",
        "scheduled",
        "running",
        "deferred",
        "up_for_reschedule",
        "restarting",
        "awaiting_input",
    }
)
FAILED_STATES = frozenset({"failed", "up_for_retry"})
SUCCESS_STATES = frozenset({"success"})
#: states of a try that really started
TRIED_STATES = RUNNING_STATES | FAILED_STATES | SUCCESS_STATES
#: states of a task instance that no longer shows its try (or never had one)
RESET_STATES = frozenset({None, "skipped", "upstream_failed", "removed"})


def known_state(row: TaskInstanceRow) -> TaskInstanceRow:
    """``row``, if the gate knows what its state means; a :class:`TargetError` if not."""
    if row.state in TRIED_STATES or row.state in RESET_STATES:
        return row
    raise TargetError(
        f"task {label(row.task_id, row.map_index)!r}: try {row.try_number} is in the Airflow "
        f"state {row.state!r}, "
        "which the gate does not know, so it cannot tell whether the try ran; check the "
        "Airflow version (the gate knows Airflow 3.3's task instance states) and decide "
        "the repeat by hand"
    )


def needs_history(row: TaskInstanceRow | None) -> bool:
    """Whether the row was reset after a try, so the try itself must be read."""
    return row is not None and row.try_number > 0 and known_state(row).state in RESET_STATES


def latest_try(rows: Sequence[TaskInstanceRow]) -> TaskInstanceRow | None:
    """The latest try that really started, among a task's tries."""
    tried = [row for row in rows if known_state(row).state in TRIED_STATES and row.try_number > 0]
    return max(tried, key=lambda row: row.try_number, default=None)


def failed(row: TaskInstanceRow | None) -> bool:
    """Whether the row is of a try that failed (its failure class may be recorded)."""
    return row is not None and row.state in FAILED_STATES
