"""Try-start marker: what a try of a resumable task found when it started, written and read.

Kept in the task state store under :data:`TRY_START_KEY`, once per try, by
:func:`~airflow_retrywindow.policies.try_start.mark_start`, and read back by the
reconciliation (:mod:`~airflow_retrywindow.policies.reconcile`) to tell whether a
try that was to submit a job stored a new id. Markers carry no schema version:
their shape has only grown, and a marker this release cannot read is no marker.
Nothing here imports Airflow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_retrywindow.records.reconciliation import COLLECT, RECONNECT
from airflow_retrywindow.records.work_scope import WorkScope

#: the task state store key of the try-start marker
TRY_START_KEY = "retry_window.try_start"
#: what a try is expected to do with the remote job: submit one, or reconnect to or
#: collect the stored one (:data:`~airflow_retrywindow.records.reconciliation.ALLOWS`)
SUBMIT = "submit"
EXPECTS = (SUBMIT, RECONNECT, COLLECT)


@dataclass(frozen=True)
class TryStart:
    """What a try of a resumable task found when it started, kept in the task state store.

    A try that is expected to submit must store a new job id; when the id is the
    one it started with, it may have submitted a job whose id was never stored
    (the window Airflow's mixin documents), so its outcome stays unknown.

    :param try_number: the try.
    :param job_id: the stored job id when it started, if any.
    :param expects: ``"submit"``, ``"reconnect"`` or ``"collect"``.
    :param scope: the run, try window and work unit the try runs in.
    :param job_scope: those ``job_id`` was stored in; ``None`` when nothing says.
    """

    try_number: int
    job_id: str | None
    expects: str
    scope: WorkScope | None = None
    job_scope: WorkScope | None = None

    def stored_in(self, job_id: object) -> WorkScope | None:
        """Where the stored ``job_id`` was written: this try's scope when it stored a new one."""
        if job_id in (None, ""):
            return None
        return self.job_scope if str(job_id) == self.job_id else self.scope

    def as_dict(self) -> dict[str, Any]:
        """As stored under :data:`TRY_START_KEY`."""
        return {
            "tryNumber": self.try_number,
            "externalId": self.job_id,
            "expects": self.expects,
            "scope": None if self.scope is None else self.scope.as_dict(),
            "jobScope": None if self.job_scope is None else self.job_scope.as_dict(),
        }

    @classmethod
    def of(cls, stored: object) -> TryStart | None:
        """The marker stored under :data:`TRY_START_KEY`, or ``None`` when it is not one."""
        if not isinstance(stored, Mapping):
            return None
        number, job_id, expects = (
            stored.get("tryNumber"),
            stored.get("externalId"),
            stored.get("expects"),
        )
        if not isinstance(number, int) or expects not in EXPECTS:
            return None
        return cls(
            number,
            None if job_id is None else str(job_id),
            str(expects),
            WorkScope.of(stored.get("scope")),
            WorkScope.of(stored.get("jobScope")),
        )
