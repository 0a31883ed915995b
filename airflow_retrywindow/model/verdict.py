"""The model's answer for a fixture, and the function that gives it."""

from __future__ import annotations

from airflow_retrywindow.model.decisions import Decision
from airflow_retrywindow.model.fixture import Fixture
from airflow_retrywindow.model.rules import decide_task
from airflow_retrywindow.model.value import Value


class TaskDecision(Value):
    """The decision for one task.

    :param id: the task id.
    :param decision: what to do about the task.
    :param backoff: the wait before the next attempt, when one is scheduled.
    :param earliest_start: when the next attempt may start, when one is scheduled.
    :param estimated_finish: when it would end, validation included.
    """

    __slots__ = ("backoff", "decision", "earliest_start", "estimated_finish", "id")
    id: str
    decision: Decision
    backoff: int | None
    earliest_start: int | None
    estimated_finish: int | None

    def __init__(
        self,
        id: str,
        decision: Decision,
        backoff: int | None = None,
        earliest_start: int | None = None,
        estimated_finish: int | None = None,
    ) -> None:
        self._set(
            id=id,
            decision=decision,
            backoff=backoff,
            earliest_start=earliest_start,
            estimated_finish=estimated_finish,
        )

    def slack(self, deadline: int) -> int | None:
        """Seconds between the estimated finish and ``deadline``; negative when late.

        :param deadline: when the delivery is due.
        """
        return None if self.estimated_finish is None else deadline - self.estimated_finish

    def to_dict(self) -> dict[str, object]:
        """The decision as the model's JSON object."""
        return {
            "id": self.id,
            "decision": self.decision.value,
            "backoff": self.backoff,
            "earliestStart": self.earliest_start,
            "estimatedFinish": self.estimated_finish,
        }


class Verdict(Value):
    """The decisions for every task of a fixture.

    The four flags that say what the model did *not* do are always false: it
    never runs a job, proves idempotency, guarantees completion or approves
    production use.

    :param tasks: one decision per task, sorted by task id.
    :param deadline_passed: whether ``asOf`` is already after the deadline.
    """

    __slots__ = ("deadline_passed", "tasks")
    tasks: tuple[TaskDecision, ...]
    deadline_passed: bool

    def __init__(self, tasks: tuple[TaskDecision, ...], deadline_passed: bool) -> None:
        self._set(tasks=tasks, deadline_passed=deadline_passed)

    @classmethod
    def of(cls, fixture: Fixture) -> Verdict:
        """Decide every task of ``fixture``.

        :param fixture: a valid fixture.
        """
        return decide(fixture)

    @property
    def jobs_executed(self) -> bool:
        """Always false: the model only decides; it never submits or observes a job."""
        return False

    @property
    def idempotency_proven(self) -> bool:
        """Always false: ``safeRepeat`` is the caller's claim, taken as given."""
        return False

    @property
    def completion_guaranteed(self) -> bool:
        """Always false: estimates leave out queues, capacity and future failures."""
        return False

    @property
    def production_approval(self) -> bool:
        """Always false: a favourable estimate is not an approval."""
        return False

    def task(self, identifier: str) -> TaskDecision:
        """The decision for the task with id ``identifier``.

        :param identifier: the task id.
        :raises KeyError: if no task has that id.
        """
        for decision in self.tasks:
            if decision.id == identifier:
                return decision
        raise KeyError(identifier)

    def to_dict(self) -> dict[str, object]:
        """The verdict as the model's JSON result."""
        return {
            "tasks": [decision.to_dict() for decision in self.tasks],
            "deadlinePassed": self.deadline_passed,
            "jobsExecuted": self.jobs_executed,
            "idempotencyProven": self.idempotency_proven,
            "completionGuaranteed": self.completion_guaranteed,
            "productionApproval": self.production_approval,
        }


def decide(fixture: Fixture) -> Verdict:
    """Decide every task of a fixture; each task is decided on its own.

    :param fixture: a valid fixture.
    """
    policy = fixture.policy
    decisions = []
    for task in fixture.tasks:
        decision, backoff, start, finish = decide_task(
            as_of=fixture.as_of,
            deadline=fixture.deadline,
            max_observation_age=fixture.max_observation_age,
            max_attempts=policy.max_attempts,
            initial_delay=policy.initial_delay,
            max_delay=policy.max_delay,
            multiplier=policy.multiplier,
            state=task.state,
            safe_repeat=task.safe_repeat,
            attempts=task.attempts,
            observed_at=task.observed_at,
            last_finished_at=task.last_finished_at,
            duration=task.duration,
            validation=task.validation,
        )
        decisions.append(TaskDecision(task.id, decision, backoff, start, finish))
    decisions.sort(key=lambda decision: decision.id)
    return Verdict(tuple(decisions), fixture.as_of > fixture.deadline)
