"""What the retry-start check does with a try, once the model has decided.

A try that starts without a decision handing it back to Airflow is decided before
its code runs (:meth:`RetryWindowPolicy.decide_start`). The model's answer becomes
one of three things: the try runs, it is rescheduled to the end of the model's
backoff (same try number), or it is refused. A running resumable job only takes
reconnecting, a succeeded one only collecting its result: those tries run
because they repeat nothing. Pure: no Airflow import.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow_retrywindow.model.decisions import Decision
from airflow_retrywindow.policies.job_status import JobRead
from airflow_retrywindow.records.reconciliation import RESCHEDULE, RUN
from airflow_retrywindow.records.try_start import SUBMIT, TRY_START_KEY, TryStart
from airflow_retrywindow.records.work_scope import WorkScope

__all__ = ["REFUSE", "RESCHEDULE", "RUN", "StartVerdict", "mark_start"]

#: the action of a refused try, as stored: the same word as a refused retry's
REFUSE = "fail"


@dataclass(frozen=True)
class StartVerdict:
    """Whether a starting try runs, waits or is refused, and why.

    :param action: ``"run"``, ``"reschedule"`` or ``"fail"``, as kept in the evidence.
    :param reason: the decision's reason.
    :param start_at: when a rescheduled try may start.
    :param expects: what a running try does with the job: submit, reconnect or collect.
    :param scope: the run, try window and work unit the try runs in.
    :param job_scope: for a try that reconnects or collects, where the job's id belongs.
    """

    action: str
    reason: str
    start_at: datetime | None = None
    expects: str = SUBMIT
    scope: WorkScope | None = None
    job_scope: WorkScope | None = None

    @classmethod
    def of(
        cls, decision: str, reason: str | None, start_at: datetime | None, job: JobRead | None
    ) -> StartVerdict:
        """The verdict for the model's ``decision`` on the previous try.

        :param decision: the model's decision, e.g. ``"wait-backoff"``.
        :param reason: its reason.
        :param start_at: the model's earliest start, for scheduled decisions.
        :param job: what the status read found, when a job was read.
        """
        text = reason or decision
        found = Decision(decision)
        if job is not None and job.allows and found.repeats_nothing:
            return cls(RUN, text, expects=job.allows)
        if found.allows_now:
            return cls(RUN, text)
        if found.allows_retry and start_at is not None:
            return cls(RESCHEDULE, text, start_at=start_at)
        return cls(REFUSE, text)


def mark_start(task: Any, store: Any, try_number: int, verdict: StartVerdict) -> None:
    """Keep the job id a resumable task's try starts with, and where it belongs, once per try.

    A try resumed after deferral keeps its first marker: the job id it started
    with is the one that tells whether it stored a new one.

    :param task: a resumable-job operator.
    :param store: the try's task state store.
    :param try_number: the starting try.
    :param verdict: what the try does with the job, and in which scope.
    """
    marked = TryStart.of(store.get(TRY_START_KEY))
    if marked is not None and marked.try_number == try_number:
        return
    job_id = store.get(str(task.external_id_key))
    job_scope = verdict.job_scope
    if job_scope is None and marked is not None:
        job_scope = marked.stored_in(job_id)  # the id keeps the scope it was stored in
    marker = TryStart(
        try_number,
        None if job_id in (None, "") else str(job_id),
        verdict.expects,
        verdict.scope,
        job_scope,
    )
    store.set(TRY_START_KEY, marker.as_dict())
