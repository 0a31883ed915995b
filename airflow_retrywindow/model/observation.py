"""What the caller last observed about one task."""

from __future__ import annotations

from airflow_retrywindow.exceptions import InvalidFixture
from airflow_retrywindow.model.bounds import TIME_LIMIT
from airflow_retrywindow.model.states import TaskState
from airflow_retrywindow.model.validation import (
    TASK_FIELDS,
    check_task,
    check_task_object,
    fields,
)
from airflow_retrywindow.model.value import Value


class Observation(Value):
    """One task as last observed, in seconds on the fixture's clock.

    :param id: the task id: 1 to 48 of ``A-Z a-z 0-9 _ -``.
    :param state: the latest attempt's state; a plain state name is accepted.
    :param safe_repeat: the caller's claim that repeating the task is harmless;
        the model takes it as given and never proves it.
    :param attempts: attempts started so far, in the current window (1 to 10).
    :param observed_at: when the state was observed.
    :param last_finished_at: when the latest attempt ended; ``None`` while it is
        running or its outcome is unknown, required otherwise.
    :param duration: the estimated length of one attempt (1 to 1,000,000 s).
    :param validation: the time to validate the output (0 to 1,000,000 s).
    """

    __slots__ = (
        "attempts",
        "duration",
        "id",
        "last_finished_at",
        "observed_at",
        "safe_repeat",
        "state",
        "validation",
    )
    id: str
    state: TaskState
    safe_repeat: bool
    attempts: int
    observed_at: int
    last_finished_at: int | None
    duration: int
    validation: int

    def __init__(  # noqa: PLR0917 - positional, in the JSON object's order
        self,
        id: str,
        state: TaskState | str,
        safe_repeat: bool,
        attempts: int,
        observed_at: int,
        last_finished_at: int | None,
        duration: int,
        validation: int,
    ) -> None:
        try:
            values = check_task(
                identifier=id,
                state=state,
                safe_repeat=safe_repeat,
                attempts=attempts,
                observed_at=observed_at,
                last_finished_at=last_finished_at,
                duration=duration,
                validation=validation,
            )
        except InvalidFixture as error:
            raise error.at(f"task {id!r}" if error.field != "id" else "task") from None
        # the enum even when a plain state name was given
        self._set(
            id=id,
            state=values[1],
            safe_repeat=safe_repeat,
            attempts=attempts,
            observed_at=observed_at,
            last_finished_at=last_finished_at,
            duration=duration,
            validation=validation,
        )

    @classmethod
    def from_dict(cls, raw: object, *, as_of: int = TIME_LIMIT) -> Observation:
        """Read one task from its JSON object.

        :param raw: the task's object, with the fields ``id``, ``state``,
            ``safeRepeat``, ``attempts``, ``observedAt``, ``lastFinishedAt``,
            ``duration`` and ``validation``.
        :param as_of: the fixture's ``asOf``: the observation may not be later.
        :raises InvalidFixture: if the object or any value is invalid.
        """
        try:
            task = fields(raw, "", TASK_FIELDS)
        except InvalidFixture as error:
            raise error.at("task") from None
        return cls(*check_task_object(task, as_of=as_of))

    def to_dict(self) -> dict[str, object]:
        """The task as its JSON object."""
        return {
            "id": self.id,
            "state": self.state.value,
            "safeRepeat": self.safe_repeat,
            "attempts": self.attempts,
            "observedAt": self.observed_at,
            "lastFinishedAt": self.last_finished_at,
            "duration": self.duration,
            "validation": self.validation,
        }

    def age(self, as_of: int) -> int:
        """How old the observation is at ``as_of``.

        :param as_of: the moment of the decision.
        """
        return as_of - self.observed_at
