"""A short status update for one task's decision, for the people on the incident.

Each update says, on one line, what is confirmed, what is still unknown, the
next action and when the next evidence is due. Times are rendered by a function
the caller supplies, so the same wording serves the fixture's clock (``t=103``)
and real wall-clock times. The words of each verdict are in
:mod:`airflow_retrywindow.verdicts`; this module fills them in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from airflow_retrywindow.model.fixture import Fixture
from airflow_retrywindow.model.observation import Observation
from airflow_retrywindow.model.states import TaskState
from airflow_retrywindow.model.verdict import TaskDecision
from airflow_retrywindow.verdicts import Fields, entry_of, worded

#: renders a time on the fixture's clock as text: ``t=103``, or a wall-clock time
TimeFormat = Callable[[int], str]


def fixture_time(seconds: int) -> str:
    """A time on the fixture's clock, e.g. ``t=103``.

    :param seconds: seconds on the fixture's clock.
    """
    return f"t={seconds}"


def status_update(
    decision: TaskDecision,
    observation: Observation,
    fixture: Fixture,
    *,
    clock: TimeFormat = fixture_time,
) -> str:
    """One line: confirmed state, what is unknown, the next action, the next evidence.

    :param decision: the model's decision for the task.
    :param observation: the task as observed, from the same fixture.
    :param fixture: the fixture that was decided.
    :param clock: renders a fixture time; ``t=<seconds>`` by default.
    """
    return verdict_status(
        decision.decision.value, decision.id, _fields(decision, observation, fixture, clock)
    )


def decision_fields(
    decision: TaskDecision,
    observation: Observation,
    fixture: Fixture,
    *,
    clock: TimeFormat = fixture_time,
) -> Fields:
    """The values the status words of a model decision name, for a verdict given beside it
    (a hold on a failing dependency says the same state, next attempt and deadline).

    :param decision: the model's decision for the task.
    :param observation: the task as observed, from the same fixture.
    :param fixture: the fixture that was decided.
    :param clock: renders a fixture time; ``t=<seconds>`` by default.
    """
    return _fields(decision, observation, fixture, clock)


def verdict_status(verdict: str, subject: str, fields: Fields | Mapping[str, object]) -> str:
    """A verdict's status update: its four parts from the verdicts table, filled in.

    :param verdict: the verdict's name, e.g. ``"dependency-held"``.
    :param subject: what the update is about: the model's task id, or a task's name.
    :param fields: the values its words name (see
        :attr:`~airflow_retrywindow.verdicts.VerdictEntry.status`).
    :raises KeyError: for a name that is not a verdict, or a field not supplied.
    """
    confirmed, unknown, action, evidence = (
        worded(template, fields) for template in entry_of(verdict).status.parts()
    )
    return (
        f"{subject}: confirmed {confirmed}; unknown: {unknown}; "
        f"next: {action}; next evidence: {evidence}."
    )


def _fields(
    decision: TaskDecision, task: Observation, fixture: Fixture, show: TimeFormat
) -> Fields:
    """What the status words of a model decision name, worked out when named."""

    def scheduled(seconds: int | None) -> int:
        if seconds is None:  # asked only by the words of a scheduled decision
            raise ValueError(
                f"{decision.decision.value} for {decision.id!r} comes without a schedule"
            )
        return seconds

    def before_deadline() -> str:
        deadline = show(fixture.deadline)
        if fixture.as_of <= fixture.deadline:
            return f"before the deadline {deadline}"
        return f"now ({show(fixture.as_of)}): the deadline {deadline} has passed"

    attempt = f"attempt {task.attempts}"
    return Fields(
        state=lambda: _confirmed(task, attempt, show),
        attempt=lambda: attempt,
        following=lambda: f"attempt {task.attempts + 1}",
        now=lambda: show(fixture.as_of),
        deadline=lambda: show(fixture.deadline),
        before_deadline=before_deadline,
        observed_state=lambda: task.state.value,
        observed_at=lambda: show(task.observed_at),
        age=lambda: task.age(fixture.as_of),
        max_age=lambda: fixture.max_observation_age,
        observe_due=lambda: show(task.observed_at + fixture.max_observation_age),
        validation=lambda: task.validation,
        validation_due=lambda: show(fixture.as_of + task.validation),
        max_attempts=lambda: fixture.policy.max_attempts,
        backoff=lambda: decision.backoff,
        start=lambda: show(scheduled(decision.earliest_start)),
        finish=lambda: show(scheduled(decision.estimated_finish)),
        slack=lambda: fixture.deadline - scheduled(decision.estimated_finish),
        late=lambda: scheduled(decision.estimated_finish) - fixture.deadline,
    )


def _confirmed(task: Observation, attempt: str, show: TimeFormat) -> str:
    if task.last_finished_at is None:
        seen = show(task.observed_at)
        if task.state is TaskState.RUNNING:
            return f"{attempt} running (seen {seen})"
        return f"{attempt} submitted, outcome unknown (seen {seen})"
    ended = show(task.last_finished_at)
    outcome = {
        TaskState.SUCCEEDED: "succeeded",
        TaskState.RETRYABLE: "failed with a retryable error",
        TaskState.TERMINAL: "failed terminally",
    }[task.state]
    return f"{attempt} {outcome}, ended {ended}"
