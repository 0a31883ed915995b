"""Where a stored job id belongs: the run, the try window and the work unit.

Airflow's task state store keeps a resumable job's id per task instance across
every try, and a manual clear does not remove it. So the id a try finds may have
been stored before a clear (another try window) or by another version of the DAG.
Reconnecting to that job, or collecting its result, would hand this window's try
the work of another one. Each try of a resumable task therefore keeps, with the id
it starts with, the :class:`WorkScope` it runs in, and a stored id is reconnected
to or collected only in the scope it was stored in. Pure: no Airflow import.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class WorkScope:
    """The run, the try window and the work unit a try runs in.

    :param run_id: the DAG run.
    :param window: the first try of the try window (a manual clear opens a new one).
    :param task_id: the task.
    :param map_index: the map index, ``-1`` for a task that is not mapped.
    :param dag_version: the DAG version Airflow runs the try under, when it says.
    """

    run_id: str
    window: int
    task_id: str
    map_index: int
    dag_version: str | None

    @classmethod
    def of_try(cls, ti: Any, window: int) -> WorkScope:
        """The scope of the try ``ti`` runs, in the window that began at try ``window``."""
        version = getattr(ti, "dag_version_id", None)
        map_index = getattr(ti, "map_index", -1)
        return cls(
            run_id=str(ti.run_id),
            window=window,
            task_id=str(ti.task_id),
            map_index=-1 if map_index is None else int(map_index),
            dag_version=None if version is None else str(version),
        )

    def as_dict(self) -> dict[str, Any]:
        """As stored with a try's start."""
        return {
            "runId": self.run_id,
            "window": self.window,
            "taskId": self.task_id,
            "mapIndex": self.map_index,
            "dagVersion": self.dag_version,
        }

    @classmethod
    def of(cls, stored: object) -> WorkScope | None:
        """The scope as stored, or ``None`` when it is not one (an earlier release's)."""
        if not isinstance(stored, Mapping):
            return None
        run_id, window, task_id = stored.get("runId"), stored.get("window"), stored.get("taskId")
        map_index, version = stored.get("mapIndex"), stored.get("dagVersion")
        if not (isinstance(run_id, str) and isinstance(task_id, str)):
            return None
        if not (isinstance(window, int) and isinstance(map_index, int)):
            return None
        if version is not None and not isinstance(version, str):
            return None
        return cls(run_id, window, task_id, map_index, version)

    def same_work(self, other: WorkScope) -> str | None:
        """What differs between the two, the window aside; ``None`` when nothing does."""
        if (self.run_id, self.task_id, self.map_index) != (
            other.run_id,
            other.task_id,
            other.map_index,
        ):
            return (
                f"it was stored for run {other.run_id}, task {other.task_id}, map index "
                f"{other.map_index}, not this try's"
            )
        if self.dag_version != other.dag_version:
            return (
                f"it was stored under DAG version {other.dag_version}, and this try runs "
                f"under {self.dag_version}"
            )
        return None

    def differs(self, other: WorkScope | None) -> str | None:
        """Why a job id stored in ``other`` is not this try's, or ``None`` when it is."""
        if other is None:
            return "no record says in which run, try window and DAG version it was stored"
        if other.window != self.window:
            return (
                f"it was stored in the try window that began at try {other.window} (before "
                f"a clear), not in this one, which began at try {self.window}"
            )
        return self.same_work(other)
