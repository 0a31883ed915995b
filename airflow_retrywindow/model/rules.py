"""The decision rules for one task, on already validated values.

Each task is decided on its own: the rules do not model dependencies, capacity
or queues, so two eligible tasks are not promised to run side by side.
"""

from __future__ import annotations

from airflow_retrywindow.model.decisions import Decision
from airflow_retrywindow.model.states import TaskState

#: decision, backoff, earliest start, estimated finish
Outcome = tuple[Decision, int | None, int | None, int | None]

# states that settle the decision before attempts or timing are looked at
_BY_STATE = {
    TaskState.RUNNING: Decision.OBSERVE_RUNNING,
    TaskState.UNKNOWN: Decision.RECONCILE_REMOTE,
    TaskState.SUCCEEDED: Decision.VALIDATE_OUTPUT,
    TaskState.TERMINAL: Decision.REPAIR_CAUSE,
}


def backoff_delay(attempts: int, *, initial_delay: int, max_delay: int, multiplier: int) -> int:
    """The wait before the next attempt: exponential in the attempts so far, capped.

    There is deliberately no jitter, so the same fixture always gets the same answer.

    :param attempts: attempts started so far (1 or more).
    :param initial_delay: the wait after the first attempt.
    :param max_delay: the cap on any wait.
    :param multiplier: how much each wait grows over the one before.
    """
    growth: int = multiplier ** (attempts - 1)
    return min(max_delay, initial_delay * growth)


def decide_task(
    *,
    as_of: int,
    deadline: int,
    max_observation_age: int,
    max_attempts: int,
    initial_delay: int,
    max_delay: int,
    multiplier: int,
    state: TaskState,
    safe_repeat: bool,
    attempts: int,
    observed_at: int,
    last_finished_at: int | None,
    duration: int,
    validation: int,
) -> Outcome:
    """Decide one task; the first rule that applies wins.

    :param as_of: the moment of the decision.
    :param deadline: when the delivery is due.
    :param max_observation_age: how old an observation may be.
    :param max_attempts: total attempts allowed, the first run included.
    :param initial_delay: the wait after the first attempt.
    :param max_delay: the cap on any wait.
    :param multiplier: how much each wait grows.
    :param state: the latest attempt's state.
    :param safe_repeat: the caller's claim that repeating the task is harmless.
    :param attempts: attempts started so far.
    :param observed_at: when the state was observed.
    :param last_finished_at: when the latest attempt ended (required once it has).
    :param duration: the estimated length of one attempt.
    :param validation: the time to validate the output; it always counts.
    """
    if as_of - observed_at > max_observation_age:
        return Decision.REFRESH_OBSERVATION, None, None, None
    settled = _BY_STATE.get(state)
    if settled is not None:
        return settled, None, None, None
    if attempts >= max_attempts:
        return Decision.ATTEMPTS_EXHAUSTED, None, None, None
    # safeRepeat is only the caller's claim; without it, effects come first. A
    # retryable attempt always has a confirmed end once validated; without one,
    # there is nothing to time a retry from, so effects come first as well.
    if not safe_repeat or last_finished_at is None:
        return Decision.RECONCILE_EFFECTS, None, None, None
    delay = backoff_delay(
        attempts, initial_delay=initial_delay, max_delay=max_delay, multiplier=multiplier
    )
    start = max(as_of, last_finished_at + delay)
    finish = start + duration + validation
    if finish > deadline:
        return Decision.DEADLINE_INFEASIBLE, delay, start, finish
    if start > as_of:
        return Decision.WAIT_BACKOFF, delay, start, finish
    return Decision.RETRY_ELIGIBLE, delay, start, finish
