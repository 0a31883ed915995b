"""A fixture: everything the model needs to decide, on one integer clock."""

from __future__ import annotations

from airflow_retrywindow.exceptions import InvalidFixture
from airflow_retrywindow.model.bounds import MAX_TASKS
from airflow_retrywindow.model.observation import Observation
from airflow_retrywindow.model.policy import Policy
from airflow_retrywindow.model.validation import (
    FIXTURE_FIELDS,
    check_clock,
    check_unique,
    fields,
    integer,
    shown,
    task_list,
    task_location,
)
from airflow_retrywindow.model.value import Value


class Fixture(Value):
    """The facts for one decision, in whole seconds on one clock.

    :param as_of: the moment of the decision.
    :param deadline: when the delivery is due; validation must end by then.
    :param max_observation_age: how old an observation may be and still count.
    :param policy: the retry policy shared by the tasks.
    :param tasks: 1 to 20 tasks with distinct ids.
    """

    __slots__ = ("as_of", "deadline", "max_observation_age", "policy", "tasks")
    as_of: int
    deadline: int
    max_observation_age: int
    policy: Policy
    tasks: tuple[Observation, ...]

    def __init__(
        self,
        as_of: int,
        deadline: int,
        max_observation_age: int,
        policy: Policy,
        tasks: tuple[Observation, ...],
    ) -> None:
        self._set(
            as_of=as_of,
            deadline=deadline,
            max_observation_age=max_observation_age,
            policy=policy,
            tasks=tasks,
        )
        self._check()

    def _check(self) -> None:
        check_clock(self.as_of, self.deadline, self.max_observation_age)
        if not isinstance(self.policy, Policy):
            raise InvalidFixture("policy", f"must be a Policy, got {shown(self.policy)}")
        tasks = self.tasks
        if not (isinstance(tasks, tuple) and 1 <= len(tasks) <= MAX_TASKS):
            raise InvalidFixture(
                "tasks", f"must be a tuple of 1 to {MAX_TASKS} observations, got {shown(tasks)}"
            )
        seen: dict[str, int] = {}
        for index, task in enumerate(tasks):
            if not isinstance(task, Observation):
                raise InvalidFixture(
                    "", f"must be an Observation, got {shown(task)}", f"tasks[{index}]"
                )
            try:
                integer(task.observed_at, "observedAt", 0, self.as_of, high_name="asOf")
                check_unique(task.id, seen)
            except InvalidFixture as error:
                raise error.at(f"tasks[{index}] (id {task.id!r})") from None
            seen[task.id] = index

    @classmethod
    def from_dict(cls, payload: object) -> Fixture:
        """Read a fixture from its JSON object, rejecting exactly what the model rejects.

        :param payload: the decoded fixture.
        :raises InvalidFixture: if anything in it is invalid.
        """
        fixture = fields(payload, "fixture", FIXTURE_FIELDS)
        as_of, deadline, max_age = check_clock(
            fixture["asOf"], fixture["deadline"], fixture["maxObservationAge"]
        )
        policy = Policy.from_dict(fixture["policy"])
        seen: dict[str, int] = {}
        tasks: list[Observation] = []
        for index, raw in enumerate(task_list(fixture["tasks"])):
            try:
                task = Observation.from_dict(raw, as_of=as_of)
                check_unique(task.id, seen)
            except InvalidFixture as error:
                raise error.at(task_location(index, raw)) from None
            seen[task.id] = index
            tasks.append(task)
        return cls(as_of, deadline, max_age, policy, tuple(tasks))

    def to_dict(self) -> dict[str, object]:
        """The fixture as its JSON object, tasks in their given order."""
        return {
            "asOf": self.as_of,
            "deadline": self.deadline,
            "maxObservationAge": self.max_observation_age,
            "policy": self.policy.to_dict(),
            "tasks": [task.to_dict() for task in self.tasks],
        }

    def task(self, identifier: str) -> Observation:
        """The task with id ``identifier``.

        :param identifier: the task id.
        :raises KeyError: if no task has that id.
        """
        for task in self.tasks:
            if task.id == identifier:
                return task
        raise KeyError(identifier)
