"""Evidence entry: one stored decision of the policy (or of the retry-start check), read back.

Written by :func:`airflow_retrywindow.records.evidence.record` (or
:func:`~airflow_retrywindow.records.evidence.gate_error`) and kept in the task
state store as a history ``{"latest": ..., "decisions": [...]}``, and the latest
one in XCom under the same key. Read here for the view and the notifier alike:
the entries of a stored value, their shape version, their try and action, the
fixture to replay (:mod:`~airflow_retrywindow.records.stored_fixture`) and the
status read of a resumable job (:mod:`~airflow_retrywindow.records.reconciliation`).

A value that is not an entry is "not a retry window record"
(:data:`~airflow_retrywindow.records.schema.NOT_A_RECORD`); an entry of a newer
shape is reported, never guessed at. Nothing here imports Airflow.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_retrywindow.model.fixture import Fixture
from airflow_retrywindow.records.reconciliation import KEY as RECONCILIATION
from airflow_retrywindow.records.reconciliation import Mask, Reconciliation
from airflow_retrywindow.records.schema import NOT_A_RECORD, version_problem

#: the reason a decision taken without the model starts with
GATE_ERROR = "gate-error"


def evidence_entries(stored: object) -> list[object]:
    """The decisions in a stored evidence value, oldest first; ``[]`` when it holds none.

    :param stored: the task state store value ``{"latest": ..., "decisions": [...]}``,
        or one decision as kept in XCom.
    """
    if isinstance(stored, Mapping) and isinstance(stored.get("decisions"), list):
        return list(stored["decisions"])
    if isinstance(stored, Mapping) and "tryNumber" in stored:
        return [stored]
    return []


def latest_entry(stored: object) -> object:
    """The latest decision of a stored history (``None`` when it has none)."""
    return stored.get("latest") if isinstance(stored, Mapping) else None


def entry_problem(entry: object) -> str | None:
    """Why ``entry`` cannot be read as a decision of the policy, or ``None`` when it can."""
    if not isinstance(entry, Mapping):
        return NOT_A_RECORD
    return version_problem(entry)


def has_fixture(entry: Mapping[str, Any]) -> bool:
    """Whether the model decided (a fixture to replay), rather than a gate error."""
    return "fixture" in entry


def reconciliation_of(
    entry: Mapping[str, Any], *, mask: Mask | None = None
) -> Reconciliation | None:
    """The status read of a resumable job the decision was taken on; ``None`` if none was.

    :param mask: makes each stored text safe to show (the reader's default if ``None``).
    :raises RecordError: naming the field and the value when it cannot be read.
    """
    if RECONCILIATION not in entry:
        return None
    stored = entry[RECONCILIATION]
    return Reconciliation.of(stored) if mask is None else Reconciliation.of(stored, mask=mask)


def model_id_of(entry: Mapping[str, Any], fixture: Fixture, task_id: str) -> str:
    """The id the model knew ``task_id`` by: ``taskIds`` maps it back, or the only task.

    :raises ValueError: when the fixture has several tasks and none is mapped to ``task_id``.
    """
    ids = entry.get("taskIds")
    if isinstance(ids, Mapping):
        for model_id, airflow_id in ids.items():
            if airflow_id == task_id:
                return str(model_id)
    if len(fixture.tasks) != 1:
        raise ValueError(f"the stored fixture does not say which of its tasks is {task_id!r}")
    return fixture.tasks[0].id
