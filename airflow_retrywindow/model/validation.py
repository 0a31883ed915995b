"""Checks on raw fixture values, and the error every failed check raises.

The checks follow the contract to the letter: an object must have exactly the
expected fields, an integer must be a real ``int`` (``true`` and ``4.0`` are not
integers), and every bound is inclusive. A fixture is accepted or rejected whole.
"""

from __future__ import annotations

from airflow_retrywindow.exceptions import InvalidFixture
from airflow_retrywindow.model.bounds import (
    DURATION_LIMIT,
    MAX_ATTEMPTS,
    MAX_MULTIPLIER,
    MAX_OBSERVATION_AGE,
    MAX_TASK_ID_LENGTH,
    MAX_TASKS,
    TASK_ID,
    TIME_LIMIT,
)
from airflow_retrywindow.model.states import TaskState

FIXTURE_FIELDS = ("asOf", "deadline", "maxObservationAge", "policy", "tasks")
POLICY_FIELDS = ("maxAttempts", "initialDelay", "maxDelay", "multiplier")
TASK_FIELDS = (
    "id",
    "state",
    "safeRepeat",
    "attempts",
    "observedAt",
    "lastFinishedAt",
    "duration",
    "validation",
)

TaskValues = tuple[str, TaskState, bool, int, int, int | None, int, int]

_STATES = tuple(state.value for state in TaskState)
_STATE_NAMED = {state.value: state for state in TaskState}
_UNCONFIRMED = frozenset({TaskState.RUNNING, TaskState.UNKNOWN})
_FIELD_SETS: dict[tuple[str, ...], frozenset[str]] = {
    fields: frozenset(fields) for fields in (FIXTURE_FIELDS, POLICY_FIELDS, TASK_FIELDS)
}
# a message stays one short line whatever the input holds
_SHOWN = 60
_LISTED = 5


def shown(value: object) -> str:
    """Render an offending value briefly, on one line, without ever failing.

    :param value: any value taken from the input.
    """
    if type(value) is list:
        return f"a list of {len(value)} item{'' if len(value) == 1 else 's'}"
    if type(value) is dict:
        return f"an object with {len(value)} field{'' if len(value) == 1 else 's'}"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        # huge integers cannot always be turned into text, so only estimate their size
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    if isinstance(value, str) and len(value) > _SHOWN:
        value = value[:_SHOWN]
    try:
        text = repr(value)
    except Exception:  # any value must still get a message
        text = f"a {type(value).__name__}"
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def fields(value: object, field: str, expected: tuple[str, ...]) -> dict[str, object]:
    """Return ``value`` if it is an object with exactly the ``expected`` fields.

    :param value: the raw value.
    :param field: its name in messages, e.g. ``policy``.
    :param expected: the field names it must have, in the order messages list them.
    """
    if type(value) is dict and value.keys() == _FIELD_SETS[expected]:
        return value
    listed = ", ".join(expected)
    if type(value) is not dict:
        raise InvalidFixture(
            field, f"must be an object with the fields {listed}, got {shown(value)}"
        )
    missing = [name for name in expected if name not in value]
    unexpected = [shown(name) for name in value if name not in _FIELD_SETS[expected]]
    found = [f"missing {', '.join(map(repr, missing))}"] if missing else []
    if unexpected:
        more = f" and {len(unexpected) - _LISTED} more" if len(unexpected) > _LISTED else ""
        found.append(f"unexpected {', '.join(unexpected[:_LISTED])}{more}")
    raise InvalidFixture(field, f"must have exactly the fields {listed}; {'; '.join(found)}")


def integer(
    value: object,
    field: str,
    low: int,
    high: int,
    *,
    low_name: str = "",
    high_name: str = "",
) -> int:
    """Return ``value`` if it is an ``int`` (never a bool) from ``low`` to ``high``.

    :param value: the raw value.
    :param field: its name in messages.
    :param low: the smallest allowed value.
    :param high: the largest allowed value.
    :param low_name: the field ``low`` comes from, if any, for the message.
    :param high_name: the field ``high`` comes from, if any, for the message.
    """
    if type(value) is int and low <= value <= high:
        return value
    lowest = f"{low} ({low_name})" if low_name else str(low)
    highest = f"{high} ({high_name})" if high_name else str(high)
    raise InvalidFixture(
        field, f"must be an integer from {lowest} to {highest}, got {shown(value)}"
    )


def boolean(value: object, field: str) -> bool:
    """Return ``value`` if it is ``true`` or ``false``.

    :param value: the raw value.
    :param field: its name in messages.
    """
    if type(value) is bool:
        return value
    raise InvalidFixture(field, f"must be true or false, got {shown(value)}")


def task_id(value: object) -> str:
    """Return ``value`` if it is a valid task id: 1 to 48 of ``A-Z a-z 0-9 _ -`` (:data:`TASK_ID`).

    :param value: the raw value.
    """
    if type(value) is str and TASK_ID.fullmatch(value) is not None:
        return value
    raise InvalidFixture(
        "id",
        f"must be 1 to {MAX_TASK_ID_LENGTH} characters from A-Z, a-z, 0-9, _ and -, "
        f"got {shown(value)}",
    )


def task_state(value: object) -> TaskState:
    """Return the state named by ``value``.

    :param value: the raw value.
    """
    # a dict lookup for plain strings; equality, as in the contract, for anything else
    state = _STATE_NAMED.get(value) if type(value) is str else None
    if state is not None:
        return state
    if value in _STATES:
        return TaskState(value)
    raise InvalidFixture("state", f"must be one of {', '.join(_STATES)}, got {shown(value)}")


def task_list(value: object) -> list[object]:
    """Return ``value`` if it is a list of 1 to :data:`MAX_TASKS` entries.

    :param value: the raw value.
    """
    if type(value) is list and 1 <= len(value) <= MAX_TASKS:
        return value
    raise InvalidFixture("tasks", f"must be a list of 1 to {MAX_TASKS} tasks, got {shown(value)}")


def check_clock(
    as_of: object, deadline: object, max_observation_age: object
) -> tuple[int, int, int]:
    """Check the fixture's global times and return them.

    :param as_of: the moment of the decision.
    :param deadline: when the delivery is due.
    :param max_observation_age: how old an observation may be.
    """
    return (
        integer(as_of, "asOf", 0, TIME_LIMIT),
        integer(deadline, "deadline", 0, TIME_LIMIT),
        integer(max_observation_age, "maxObservationAge", 0, MAX_OBSERVATION_AGE),
    )


def check_policy(
    max_attempts: object, initial_delay: object, max_delay: object, multiplier: object
) -> tuple[int, int, int, int]:
    """Check a retry policy's values and return them.

    :param max_attempts: total attempts allowed, the first run included.
    :param initial_delay: the wait after the first attempt.
    :param max_delay: the cap on any wait.
    :param multiplier: how much each wait grows over the one before.
    """
    try:
        attempts = integer(max_attempts, "maxAttempts", 1, MAX_ATTEMPTS)
        initial = integer(initial_delay, "initialDelay", 1, DURATION_LIMIT)
        cap = integer(max_delay, "maxDelay", initial, DURATION_LIMIT, low_name="initialDelay")
        factor = integer(multiplier, "multiplier", 1, MAX_MULTIPLIER)
    except InvalidFixture as error:
        raise error.at("policy") from None
    return attempts, initial, cap, factor


def check_task(
    *,
    identifier: object,
    state: object,
    safe_repeat: object,
    attempts: object,
    observed_at: object,
    last_finished_at: object,
    duration: object,
    validation: object,
    as_of: int = TIME_LIMIT,
) -> TaskValues:
    """Check one task's values and return them, the state as a :class:`TaskState`.

    :param identifier: the task id.
    :param state: the latest attempt's state.
    :param safe_repeat: the caller's claim that repeating the task is harmless.
    :param attempts: attempts started so far.
    :param observed_at: when the state was observed.
    :param last_finished_at: when the latest attempt ended, or ``None`` if unconfirmed.
    :param duration: the estimated length of one attempt.
    :param validation: the time needed to validate the output.
    :param as_of: the moment of the decision: no observation may come after it.
    """
    name = task_id(identifier)
    kind = task_state(state)
    safe = boolean(safe_repeat, "safeRepeat")
    started = integer(attempts, "attempts", 1, MAX_ATTEMPTS)
    # an observation from the future is invalid input, not fresher evidence
    observed = integer(
        observed_at, "observedAt", 0, as_of, high_name="asOf" if as_of < TIME_LIMIT else ""
    )
    length = integer(duration, "duration", 1, DURATION_LIMIT)
    checking = integer(validation, "validation", 0, DURATION_LIMIT)
    finished: int | None = None
    if kind not in _UNCONFIRMED:
        finished = integer(last_finished_at, "lastFinishedAt", 0, observed, high_name="observedAt")
    elif last_finished_at is not None:
        raise InvalidFixture(
            "lastFinishedAt",
            f"must be null while the state is {kind.value} (no confirmed end), "
            f"got {shown(last_finished_at)}",
        )
    return name, kind, safe, started, observed, finished, length, checking


def check_task_object(task: dict[str, object], *, as_of: int = TIME_LIMIT) -> TaskValues:
    """:func:`check_task` on a task's JSON object, its field names already checked.

    :param task: the task's fields, as :func:`fields` returned them for ``TASK_FIELDS``.
    :param as_of: the moment of the decision: no observation may come after it.
    """
    return check_task(
        identifier=task["id"],
        state=task["state"],
        safe_repeat=task["safeRepeat"],
        attempts=task["attempts"],
        observed_at=task["observedAt"],
        last_finished_at=task["lastFinishedAt"],
        duration=task["duration"],
        validation=task["validation"],
        as_of=as_of,
    )


def check_unique(identifier: str, seen: dict[str, int]) -> None:
    """Reject a task id that an earlier task already uses.

    :param identifier: the task id.
    :param seen: task id -> position of the task that uses it.
    """
    if identifier in seen:
        raise InvalidFixture("id", f"is already used by tasks[{seen[identifier]}]")


def task_location(index: int, raw: object) -> str:
    """Name a task in messages by its position, and by its id when that is valid.

    :param index: the task's position in ``tasks``.
    :param raw: the raw task.
    """
    identifier = raw.get("id") if type(raw) is dict else None
    if type(identifier) is str and TASK_ID.fullmatch(identifier) is not None:
        return f"tasks[{index}] (id {identifier!r})"
    return f"tasks[{index}]"
