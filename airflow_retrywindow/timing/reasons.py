"""One-line reasons for the model's decisions, in real time.

The reason is what an operator reads on the task instance at 3 a.m.: the
decision first (so it can be grepped), then its numbers as UTC wall-clock times.
Airflow keeps 500 characters of it; we stay under that.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pendulum

from airflow_retrywindow.model.decisions import Decision
from airflow_retrywindow.timing.clock import Clock

if TYPE_CHECKING:
    from airflow_retrywindow.model.fixture import Fixture
    from airflow_retrywindow.model.observation import Observation
    from airflow_retrywindow.model.verdict import TaskDecision

MAX_REASON = 499


def moment(clock: Clock, seconds: int, today: pendulum.DateTime) -> str:
    """A model time as ``HH:MM:SSZ``, with the date when it is not ``today``'s."""
    when = clock.at(seconds)
    if when.date() == today.date():
        return when.format("HH:mm:ss[Z]")
    return when.format("YYYY-MM-DD HH:mm:ss[Z]")


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
    cause = f" ({subject})" if subject else ""
    deadline = at(fixture.deadline)
    found = decision.decision
    if found.scheduled:
        start, finish = (
            at(int(decision.earliest_start or 0)),
            at(int(decision.estimated_finish or 0)),
        )
        nth = f"attempt {attempts + 1} of {limit}"
        if found is Decision.DEADLINE_INFEASIBLE:
            text = (
                f"next attempt would start {start} and finish with validation at {finish}, "
                f"after the {deadline} deadline ({nth}); report the impact instead of retrying"
            )
        else:
            slack = decision.slack(fixture.deadline)
            when = (
                f"at {start} after a {decision.backoff} s backoff"
                if found is Decision.WAIT_BACKOFF
                else f"now ({start})"
            )
            text = (
                f"{nth} may start {when} and finish with validation by {finish}, "
                f"{slack} s before the {deadline} deadline"
            )
    else:
        text = _refusal(found, task=task, fixture=fixture, at=at, attempts=attempts, limit=limit)
    return _fit(f"{found.value}: {text}{cause}")


def _refusal(
    decision: Decision,
    *,
    task: Observation,
    fixture: Fixture,
    at: Any,
    attempts: int,
    limit: int,
) -> str:
    observed = at(task.observed_at)
    texts = {
        Decision.REFRESH_OBSERVATION: (
            f"the last observation ({observed}) is older than the allowed "
            f"{fixture.max_observation_age} s at {at(fixture.as_of)}; observe again"
        ),
        Decision.OBSERVE_RUNNING: (
            f"attempt {attempts} is still running (seen {observed}); observe it"
        ),
        Decision.RECONCILE_REMOTE: (
            f"the outcome of attempt {attempts} of {limit} is unknown; look the remote job up "
            "by its client job id before any retry"
        ),
        Decision.VALIDATE_OUTPUT: (
            f"attempt {attempts} succeeded (seen {observed}); validate its output before "
            "calling the delivery done"
        ),
        Decision.REPAIR_CAUSE: (
            f"attempt {attempts} failed terminally; repair the cause, then clear"
        ),
        Decision.ATTEMPTS_EXHAUSTED: (
            f"attempt {attempts} of {limit} failed and no attempt is left in this window"
        ),
        Decision.RECONCILE_EFFECTS: (
            f"attempt {attempts} of {limit} failed and the task is not claimed safe to "
            "repeat; reconcile what it wrote before repeating it"
        ),
    }
    return texts.get(decision, "no explanation for this decision")


def _fit(text: str) -> str:
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 3] + "..."
