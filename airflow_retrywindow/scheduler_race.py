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

:func:`race_open` says whether an Airflow version is one these leave open: there
a deferrable ``RetryWindowSensor`` sleeps a short wait in the worker instead of
deferring it. Imports no Airflow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: a release number, and what follows it: ``3.3.2``, ``3.2.2rc1``, ``3.4.0.dev0+local``
_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?(.*)", re.DOTALL)
#: what may follow a release number without making it an earlier build
_FINAL_SUFFIX = re.compile(r"(\.?post\d*)?(\+.*)?", re.DOTALL)

#: a release, and whether it is that release itself (not a pre-release or a development build)
Release = tuple[tuple[int, int, int], bool]


def parse_version(text: str) -> Release | None:
    """``text`` as a comparable release, ``None`` when it is not an Airflow version.

    A pre-release or a development build (``3.2.2rc1``, ``3.2.2.dev0``) comes
    before its release: it may not have the release's fix yet.
    """
    found = _VERSION.fullmatch(text.strip()) if isinstance(text, str) else None
    if found is None:
        return None
    major, minor, patch, rest = found.groups()
    final = _FINAL_SUFFIX.fullmatch(rest) is not None
    return (int(major), int(minor), int(patch or 0)), final


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

    def open_in(self, version: Release) -> bool:
        """Whether Airflow ``version`` still has this variant of the race."""
        fixed = parse_version(self.fixed_in) if self.fixed_in else None
        return fixed is None or version < fixed


ISSUES = (
    RaceIssue(66374, "scheduled", fixed_in="3.2.2"),
    RaceIssue(67287, "queued"),
    RaceIssue(72716, "running"),
    RaceIssue(71580, "running"),
)


def open_issues(airflow_version: str) -> tuple[RaceIssue, ...]:
    """The issues still open in ``airflow_version``; all of them for a version not understood.

    :param airflow_version: e.g. ``"3.3.2"``; a version that cannot be read is
        taken to have the race (the workaround costs a short sleep, the race a failed try).
    """
    version = parse_version(airflow_version)
    if version is None:
        return ISSUES
    return tuple(issue for issue in ISSUES if issue.open_in(version))


def race_open(airflow_version: str) -> bool:
    """Whether the scheduler of ``airflow_version`` can fail a try that handed itself back."""
    return bool(open_issues(airflow_version))
