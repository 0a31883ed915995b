"""Airflow's scheduler race on a try that hands itself back, and where it is still open.

A try that defers, or is rescheduled, ends its worker process with success while
its task instance waits. When the trigger fires, or the reschedule date comes,
before the scheduler has taken in that exit, the scheduler finds the task
instance already ``scheduled``, ``queued`` or ``running`` again and fails it:
"Executor ... reported that the task instance ... finished with state success,
but the task instance's state attribute is queued" (``state mismatch`` in the
event log; ``airflow/jobs/scheduler_job_runner.py``). Airflow then retries the
try on its own, without asking the task's retry policy.

Airflow's own issues, by the state the scheduler finds:

* ``scheduled``: apache/airflow#66374, fixed in 3.2.2 for a try resumed after a
  deferral (``next_method`` set);
* ``queued``: apache/airflow#67287, open;
* ``running``: apache/airflow#72716 and #71580, open against 3.3.

:func:`race_open` says whether a scheduler leaves it open: there a deferrable
``RetryWindowSensor`` sleeps a short wait in the worker instead of deferring it. What
counts is the scheduler's Airflow, as the API server reports it, not the worker's: a
worker may run another Airflow than the scheduler. While an issue has no fixed release,
every scheduler has the race and nothing is asked. The versions are compared by
:mod:`~airflow_retrywindow.version_compat`, which alone reads one. Imports no Airflow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from airflow_retrywindow import version_compat


@dataclass(frozen=True)
class RaceIssue:
    """One of Airflow's issues for the race.

    :param number: the issue's number in apache/airflow.
    :param state: the state the scheduler finds the task instance in.
    :param fixed_in: the first Airflow release with the fix, ``None`` while open.
    """

    number: int
    state: str
    fixed_in: str | None = None

    @property
    def url(self) -> str:
        """The issue's address."""
        return f"https://github.com/apache/airflow/issues/{self.number}"

    def open_in(self, scheduler_version: str) -> bool:
        """Whether a scheduler of ``scheduler_version`` still has this variant of the race."""
        return self.fixed_in is None or not version_compat.scheduler_fixed(
            self.fixed_in, scheduler_version
        )


ISSUES = (
    RaceIssue(66374, "scheduled", fixed_in="3.2.2"),
    RaceIssue(67287, "queued"),
    RaceIssue(72716, "running"),
    RaceIssue(71580, "running"),
)


def open_issues(scheduler_version: str) -> tuple[RaceIssue, ...]:
    """The issues still open in a scheduler of ``scheduler_version``; all of them for a
    version not understood.

    :param scheduler_version: e.g. ``"3.3.2"``; a version that cannot be read is taken to
        have the race (the workaround costs a short sleep, the race a failed try).
    """
    return tuple(issue for issue in ISSUES if issue.open_in(scheduler_version))


def race_open(scheduler_version: Callable[[], str]) -> bool:
    """Whether the scheduler can fail a try that handed itself back.

    :param scheduler_version: reads the scheduler's Airflow version (the API server's
        answer); called only once every issue has a fixed release. A read that fails
        leaves the race open.
    """
    if any(issue.fixed_in is None for issue in ISSUES):
        return True
    try:
        version = scheduler_version()
    except Exception:
        return True
    return bool(open_issues(version))
