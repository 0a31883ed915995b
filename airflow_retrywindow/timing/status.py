"""A short status update for one task's decision, for the people on the incident.

Each update says, on one line, what is confirmed, what is still unknown, the
next action and when the next evidence is due. Times are rendered by a function
the caller supplies, so the same wording serves the fixture's clock (``t=103``)
and real wall-clock times.
"""

from __future__ import annotations

from collections.abc import Callable

from airflow_retrywindow.model.decisions import Decision
from airflow_retrywindow.model.fixture import Fixture
from airflow_retrywindow.model.observation import Observation
from airflow_retrywindow.model.states import TaskState
from airflow_retrywindow.model.verdict import TaskDecision

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
    confirmed, unknown, action, evidence = _parts(decision, observation, fixture, clock)
    return (
        f"{decision.id}: confirmed {confirmed}; unknown: {unknown}; "
        f"next: {action}; next evidence: {evidence}."
    )


def _parts(
    decision: TaskDecision, task: Observation, fixture: Fixture, show: TimeFormat
) -> tuple[str, str, str, str]:
    attempt, following = f"attempt {task.attempts}", f"attempt {task.attempts + 1}"
    now, deadline = show(fixture.as_of), show(fixture.deadline)
    before_deadline = (
        f"before the deadline {deadline}"
        if fixture.as_of <= fixture.deadline
        else f"now ({now}): the deadline {deadline} has passed"
    )
    kind = decision.decision
    if kind is Decision.REFRESH_OBSERVATION:
        return (
            f"nothing current (the last observation, {task.state.value} at "
            f"{show(task.observed_at)}, is {task.age(fixture.as_of)} s old; the limit is "
            f"{fixture.max_observation_age} s)",
            "the task's current state",
            "observe the task again at its state source before deciding anything",
            f"a fresh observation, due now ({now})",
        )
    state = _confirmed(task, attempt, show)
    if kind is Decision.OBSERVE_RUNNING:
        due = show(task.observed_at + fixture.max_observation_age)
        return (
            state,
            f"whether {attempt} succeeds",
            "keep observing it; start no other attempt while it runs",
            f"the next observation, due by {due}",
        )
    if kind is Decision.RECONCILE_REMOTE:
        return (
            state,
            "whether the request reached the service, whether the job finished "
            "and whether its result is correct",
            "look the remote job up by its client-chosen job id; do not resubmit "
            "until its outcome is known",
            f"the remote job's status, due now ({now})",
        )
    if kind is Decision.VALIDATE_OUTPUT:
        return (
            state,
            "whether the output is correct and complete",
            f"validate the output against the acceptance criteria ({task.validation} s)",
            f"the validation result, due by {show(fixture.as_of + task.validation)}",
        )
    if kind is Decision.REPAIR_CAUSE:
        return (
            state,
            "the cause of the failure",
            "repair the cause; another attempt would fail the same way",
            f"the repair owner's diagnosis, {before_deadline}",
        )
    if kind is Decision.ATTEMPTS_EXHAUSTED:
        return (
            state,
            "how to deliver without another attempt",
            f"escalate, as all {fixture.policy.max_attempts} attempts of the budget are used",
            f"the escalation owner's decision, {before_deadline}",
        )
    if kind is Decision.RECONCILE_EFFECTS:
        return (
            state,
            "what the earlier attempts already wrote; repeating may duplicate it",
            "reconcile those effects before repeating, as the task is not claimed safe to repeat",
            f"the reconciliation result, due now ({now})",
        )
    start, finish = decision.earliest_start, decision.estimated_finish
    if start is None or finish is None:  # only the scheduled decisions are left
        raise ValueError(f"{kind.value} for {decision.id!r} comes without a schedule")
    slack = fixture.deadline - finish
    outlook = f"estimated finish {show(finish)} with validation"
    if kind is Decision.DEADLINE_INFEASIBLE:
        return (
            state,
            "nothing that would change the forecast",
            f"report the delivery at risk (impact, affected population, operational "
            f"alternative) instead of retrying: {following} would end {show(finish)}, "
            f"{-slack} s after the deadline {deadline}",
            f"the decision on the alternative, {before_deadline}",
        )
    if kind is Decision.WAIT_BACKOFF:
        return (
            state,
            f"whether {following} succeeds",
            f"wait out the {decision.backoff} s backoff, then start {following} at "
            f"{show(start)}; {outlook}, {slack} s before the deadline {deadline}",
            f"the start of {following}, at {show(start)}",
        )
    return (
        state,
        f"whether {following} succeeds",
        f"start {following} now; {outlook}, {slack} s before the deadline {deadline}",
        f"the result of {following} with its validation, by {show(finish)}",
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
