"""One-line reasons for the model's decisions, and the other verdicts, in real time.

The reason is what an operator reads on the task instance at 3 a.m.: the
decision first (so it can be grepped), then its numbers as UTC wall-clock times.
Airflow keeps 500 characters of it; we stay under that. The words of each
verdict are in :mod:`airflow_retrywindow.verdicts`; this module fills them in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import pendulum

from airflow_retrywindow.labels import UTC_CLOCK, UTC_SHOWN
from airflow_retrywindow.timing.clock import Clock
from airflow_retrywindow.verdicts import Fields, entry_of, worded

if TYPE_CHECKING:
    from airflow_retrywindow.model.fixture import Fixture
    from airflow_retrywindow.model.observation import Observation
    from airflow_retrywindow.model.verdict import TaskDecision

MAX_REASON = 499


def moment(clock: Clock, seconds: int, today: pendulum.DateTime) -> str:
    """A model time as ``HH:MM:SSZ``, with the date when it is not ``today``'s."""
    when = clock.at(seconds)
    if when.date() == today.date():
        return when.format(UTC_CLOCK)
    return when.format(UTC_SHOWN)


def reason(
    decision: TaskDecision,
    *,
    task: Observation,
    fixture: Fixture,
    clock: Clock,
    subject: str = "",
) -> str:
    """Explain one task's decision with its numbers as real times.

    :param decision: the model's decision for the task.
    :param task: the task as the model saw it.
    :param fixture: the whole fixture the model decided.
    :param clock: the clock that fixture is on.
    :param subject: what failed, e.g. ``"TimeoutError: no response"``, if known.
    """
    today = clock.at(fixture.as_of)

    def at(seconds: int) -> str:
        return moment(clock, seconds, today)

    attempts, limit = task.attempts, fixture.policy.max_attempts
    fields = Fields(
        attempts=lambda: attempts,
        limit=lambda: limit,
        observed=lambda: at(task.observed_at),
        max_age=lambda: fixture.max_observation_age,
        as_of=lambda: at(fixture.as_of),
        deadline=lambda: at(fixture.deadline),
        nth=lambda: f"attempt {attempts + 1} of {limit}",
        # asked only by the words of a scheduled decision, which has both
        start=lambda: at(int(decision.earliest_start or 0)),
        finish=lambda: at(int(decision.estimated_finish or 0)),
        backoff=lambda: decision.backoff,
        slack=lambda: decision.slack(fixture.deadline),
    )
    return verdict_reason(decision.decision.value, fields, subject=subject)


def verdict_reason(
    verdict: str, fields: Fields | Mapping[str, object], *, subject: str = ""
) -> str:
    """A verdict's reason: its name, then its words from the verdicts table, filled in.

    :param verdict: the verdict's name, e.g. ``"dependency-held"``.
    :param fields: the values its words name (see
        :attr:`~airflow_retrywindow.verdicts.VerdictEntry.reason`).
    :param subject: what failed, e.g. ``"TimeoutError: no response"``, if known.
    :raises KeyError: for a name that is not a verdict, or a field not supplied.
    """
    cause = f" ({subject})" if subject else ""
    text = worded(entry_of(verdict).reason, fields)
    return _fit(f"{verdict}: {text}{cause}")


def _fit(text: str) -> str:
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 3] + "..."
