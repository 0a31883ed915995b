"""``RetryWindowPolicy``: the pre-retry gate on Airflow's automatic retries.

Airflow (3.3+, AIP-105) calls a task's ``retry_policy`` in the worker when an
attempt fails. This policy builds a one-task fixture from the failure and the
task's own retry settings, runs the decision model on it, and hands Airflow the
answer: retry after exactly the model's backoff, or fail with the reason.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import RetryDecision, RetryPolicy

from airflow_retrywindow import evidence
from airflow_retrywindow.clock import as_timedelta, bounded_seconds, seconds_down
from airflow_retrywindow.deadline import Deadline
from airflow_retrywindow.failures import UNKNOWN, Classifier, ExceptionSpec
from airflow_retrywindow.fixtures import ClockedFixture, TaskFacts
from airflow_retrywindow.model import evaluate
from airflow_retrywindow.reasons import MAX_REASON, reason
from airflow_retrywindow.retry_settings import AIRFLOW_DELAY_CAP, RetrySettings
from airflow_retrywindow.work import Work

log = logging.getLogger(__name__)

#: decisions that let Airflow run the task again
_RETRY = frozenset({"wait-backoff", "retry-eligible"})
_ON_ERROR = ("fail", "default")


class RetryWindowPolicy(RetryPolicy):
    """Gate every automatic retry of a task on the delivery deadline and its evidence.

    At failure time the policy classifies the exception, counts the attempts of
    the current window, and asks the decision model whether the next attempt can
    still finish, validation included, before the deadline. ``wait-backoff`` and
    ``retry-eligible`` retry after exactly the model's delay; every other decision
    fails the task with a reason naming the decision and its times.

    :param deadline: when the delivery is due: a :class:`Deadline`, an aware
        datetime, or a callable of the task context returning one.
    :param duration: estimated length of one attempt (timedelta or seconds).
    :param validation: time to validate the output; counts towards the deadline.
    :param safe_repeat: the DAG author's claim that repeating is harmless.
    :param unknown: exception classes or dotted paths that leave the remote
        outcome unknown; :class:`OutcomeUnknown` is always one.
    :param terminal: exception classes or dotted paths that need a repair;
        :class:`TerminalFailure` is always one.
    :param max_observation_age: how old an observation may be (default 60 s).
    :param on_error: ``"fail"`` (default) refuses the retry when the gate cannot
        evaluate; ``"default"`` hands the failure back to Airflow's own retries.
    """

    def __init__(
        self,
        *,
        deadline: Deadline | Any,
        duration: timedelta | float,
        validation: timedelta | float,
        safe_repeat: bool,
        unknown: Iterable[ExceptionSpec] = (),
        terminal: Iterable[ExceptionSpec] = (),
        max_observation_age: timedelta | float = timedelta(seconds=60),
        on_error: str = "fail",
    ) -> None:
        self.deadline = Deadline.coerce(deadline)
        self.work = Work(
            duration=as_timedelta(duration, "duration"),
            validation=as_timedelta(validation, "validation"),
            safe_repeat=safe_repeat,
        )
        self.classifier = Classifier.of(unknown=unknown, terminal=terminal)
        age = seconds_down(as_timedelta(max_observation_age, "max_observation_age"))
        self.max_observation_age = bounded_seconds(
            age, "max_observation_age", low=0, high=1_000_000_000
        )
        if on_error not in _ON_ERROR:
            raise ValueError(f"on_error must be 'fail' or 'default', got {on_error!r}")
        self.on_error = on_error

    def settings_of(self, task: Any) -> RetrySettings:
        """The task's retry settings as the model sees them; raises when it cannot."""
        return RetrySettings.of_task(task, delay_cap=_airflow_delay_cap())

    def evaluate(
        self,
        exception: BaseException,
        try_number: int,
        max_tries: int,
        context: Any = None,
    ) -> RetryDecision:
        """Decide the retry of the attempt that raised ``exception``. Never raises."""
        now = pendulum.now("UTC")
        try:
            return self._decide(exception, try_number, max_tries, context, now)
        except Exception as error:
            return self._cannot_evaluate(error)

    def _decide(
        self,
        exception: BaseException,
        try_number: int,
        max_tries: int,
        context: Mapping[str, Any] | None,
        now: pendulum.DateTime,
    ) -> RetryDecision:
        if context is None:
            raise ValueError("Airflow passed no task context, so the run's deadline is unknown")
        task = context["task"]
        settings = self.settings_of(task)
        failure = self.classifier.classify(exception)
        facts = TaskFacts(
            task_id=str(task.task_id),
            state=failure,
            attempts=settings.attempts_in_window(try_number, max_tries),
            observed_at=now,
            finished_at=None if failure == UNKNOWN else now,
            work=self.work,
        )
        fixture = ClockedFixture.build(
            as_of=now,
            deadline=self.deadline.resolve(context),
            max_observation_age=self.max_observation_age,
            settings=settings,
            tasks=[facts],
            origin=context.get("data_interval_start"),
        )
        result = evaluate(fixture.payload)
        entry = result["tasks"][0]
        text = reason(
            entry,
            task=fixture.payload["tasks"][0],
            payload=fixture.payload,
            clock=fixture.clock,
            subject=f"{type(exception).__name__}: {exception}",
        )
        decision = _airflow_decision(entry, text)
        self._keep_evidence(
            context,
            evidence.record(
                fixture=fixture.payload,
                origin=fixture.clock.iso(),
                result=result,
                task_ids=fixture.task_ids,
                try_number=try_number,
                failure=failure,
                reason=text,
                action=decision.action.value,
                extra={"deadline": self.deadline.describe()},
            ),
        )
        return decision

    def _keep_evidence(self, context: Mapping[str, Any], entry: dict[str, Any]) -> None:
        log.info("Retry window evidence: %s", json.dumps(entry, sort_keys=True))
        store, ti = context.get("task_state_store"), context.get("ti")
        try:
            if store is not None:
                history = store.get(evidence.EVIDENCE_KEY)
                store.set(evidence.EVIDENCE_KEY, evidence.appended(history, entry))
            if ti is not None:
                # the latest decision as XCom too: a gate reads every target's in one request
                ti.xcom_push(key=evidence.EVIDENCE_KEY, value=entry)
                # the class in the key: the API lists keys, not values, in one request
                ti.xcom_push(key=evidence.failure_key(entry["failure"]), value=entry["tryNumber"])
        except Exception:
            # the decision stands without its stored copy; the log above keeps it
            log.exception("Could not store the retry window evidence")

    def _cannot_evaluate(self, error: Exception) -> RetryDecision:
        cause = f"{type(error).__name__}: {error}"
        if self.on_error == "default":
            log.exception("Retry window gate could not evaluate; Airflow's retries apply")
            return RetryDecision.default()
        log.exception("Retry window gate could not evaluate; refusing the retry")
        text = (
            "gate-error: the retry window could not be evaluated, so the retry is refused "
            f"({cause})"
        )
        return RetryDecision.fail(reason=text[:MAX_REASON])

    def serialize(self) -> dict[str, Any]:
        """A JSON description of the policy (the worker always runs the parsed object)."""
        return {
            "__type": "RetryWindowPolicy",
            "deadline": self.deadline.describe(),
            "duration": self.work.duration_seconds(),
            "validation": self.work.validation_seconds(),
            "safe_repeat": self.work.safe_repeat,
            "max_observation_age": self.max_observation_age,
            "on_error": self.on_error,
            **self.classifier.describe(),
        }


def _airflow_decision(entry: Mapping[str, Any], text: str) -> RetryDecision:
    decision = entry["decision"]
    if decision not in _RETRY:
        return RetryDecision.fail(reason=text)
    # hand Airflow the model's own delay: its jittered backoff is not what we checked
    wait = entry["backoff"] if decision == "wait-backoff" else 0
    return RetryDecision.retry(delay=timedelta(seconds=wait), reason=text)


def _airflow_delay_cap() -> int:
    try:
        from airflow.sdk.definitions._internal.abstractoperator import MAX_RETRY_DELAY
    except ImportError:
        return AIRFLOW_DELAY_CAP
    return int(MAX_RETRY_DELAY)
