"""``RetryWindowPolicy``: the pre-retry gate on Airflow's automatic retries.

Airflow (3.3+, AIP-105) calls a task's ``retry_policy`` in the worker when an
attempt fails. This policy builds a one-task fixture from the failure and the
task's own retry settings, runs the decision model on it, and hands Airflow the
answer: retry after exactly the model's backoff, or fail with the reason.

Airflow also retries without calling the policy (a killed task process, a
heartbeat timeout). The retry-start check (:mod:`airflow_retrywindow.policies.retry_start`)
closes that path: a try that starts without our recorded decision is refused
before the task's body runs, through :meth:`RetryWindowPolicy.refuse_unrecorded_retry`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import RetryDecision, RetryPolicy

from airflow_retrywindow import metrics
from airflow_retrywindow.model import evaluate
from airflow_retrywindow.model.bounds import MAX_OBSERVATION_AGE
from airflow_retrywindow.policies import evidence
from airflow_retrywindow.policies.failures import RETRYABLE, UNKNOWN, Classifier, ExceptionSpec
from airflow_retrywindow.redaction import describe_exception
from airflow_retrywindow.timing.clock import as_timedelta, bounded_seconds, seconds_down
from airflow_retrywindow.timing.deadline import Deadline
from airflow_retrywindow.timing.fixtures import ClockedFixture, TaskFacts
from airflow_retrywindow.timing.jitter import Jitter, TryKey
from airflow_retrywindow.timing.reasons import MAX_REASON, reason
from airflow_retrywindow.timing.retry_settings import RetrySettings, airflow_delay_cap
from airflow_retrywindow.timing.work import Work

log = logging.getLogger(__name__)

#: decisions that let Airflow run the task again
_RETRY = frozenset({"wait-backoff", "retry-eligible"})
_ON_ERROR = ("fail", "default")
#: the reason when even describing an internal error failed
_GATE_ERROR = "gate-error: the retry window could not be evaluated, so the retry is refused"


@dataclass(frozen=True)
class Failure:
    """One failed attempt, as the policy decides about it.

    :param failure: its class: unknown, terminal or retryable.
    :param subject: what failed, safe to store, e.g. ``"TimeoutError: no answer"``.
    :param try_number: the Airflow try the decision is recorded for.
    :param attempts: attempts of the window the model counts, the failed one included.
    """

    failure: str
    subject: str
    try_number: int
    attempts: int


class RetryWindowPolicy(RetryPolicy):
    """Gate every automatic retry of a task on the delivery deadline and its evidence.

    At failure time the policy classifies the exception, counts the attempts of
    the current window, and asks the decision model whether the next attempt can
    still finish, validation included, before the deadline. ``wait-backoff`` and
    ``retry-eligible`` retry after exactly the model's delay; every other decision
    fails the task with a reason naming the decision and its times.

    :param deadline: when the delivery is due: a :class:`Deadline`, an aware
        datetime, an Airflow ``DeadlineAlert`` of the DAG, or a callable of the
        task context returning one.
    :param duration: estimated length of one attempt (timedelta or seconds).
    :param validation: time to validate the output; counts towards the deadline.
    :param safe_repeat: the DAG author's claim that repeating is harmless.
    :param unknown: exception classes or dotted paths that leave the remote
        outcome unknown; :class:`OutcomeUnknown` is always one.
    :param terminal: exception classes or dotted paths that need a repair;
        :class:`TerminalFailure` is always one.
    :param retryable: exception classes or dotted paths declared plainly
        retryable. Airflow's ``AirflowTaskTimeout`` (``execution_timeout``) is an
        unknown outcome unless listed here or in ``terminal``.
    :param max_observation_age: how old an observation may be (default 60 s).
    :param on_error: ``"fail"`` (default) refuses the retry when the gate cannot
        evaluate; ``"default"`` hands the failure back to Airflow's own retries.
    :param jitter: lengthen each wait by up to this fraction of it (``0.2``: 0 to
        20 %), the same for a given try every time, never past ``max_retry_delay``.
        The model checks the lengthened wait against the deadline. Default 0 (off).
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
        retryable: Iterable[ExceptionSpec] = (),
        max_observation_age: timedelta | float = timedelta(seconds=60),
        on_error: str = "fail",
        jitter: float = 0.0,
    ) -> None:
        self.deadline = Deadline.coerce(deadline)
        self.jitter = Jitter(jitter)
        self.work = Work(
            duration=as_timedelta(duration, "duration"),
            validation=as_timedelta(validation, "validation"),
            safe_repeat=safe_repeat,
        )
        self.classifier = Classifier.of(unknown=unknown, terminal=terminal, retryable=retryable)
        age = seconds_down(as_timedelta(max_observation_age, "max_observation_age"))
        self.max_observation_age = bounded_seconds(
            age, "max_observation_age", low=0, high=MAX_OBSERVATION_AGE
        )
        if on_error not in _ON_ERROR:
            raise ValueError(f"on_error must be 'fail' or 'default', got {on_error!r}")
        self.on_error = on_error

    def settings_of(self, task: Any) -> RetrySettings:
        """The task's retry settings as the model sees them; raises when it cannot."""
        return RetrySettings.of_task(task, delay_cap=airflow_delay_cap())

    def evaluate(
        self,
        exception: BaseException,
        try_number: int,
        max_tries: int,
        context: Any = None,
    ) -> RetryDecision:
        """Decide the retry of the attempt that raised ``exception``. Never raises."""
        try:
            task = _task_of(context)
            settings = self.settings_of(task)
            failed = Failure(
                failure=self.classifier.classify(exception),
                subject=describe_exception(exception),
                try_number=try_number,
                attempts=settings.attempts_in_window(try_number, max_tries),
            )
            return self._decide(failed, settings, context)
        except BaseException as error:
            # Airflow falls back to its own retries when a policy raises: never let it
            return self._cannot_evaluate(error, context, try_number)

    def refuse_unrecorded_retry(self, context: Mapping[str, Any], previous_try: int) -> str:
        """The reason to refuse a try that started without a decision of ours.

        The previous try ended without this policy deciding (its process was killed,
        or the scheduler saw its heartbeat stop), so whether its remote effect
        happened is unknown: the model answers ``reconcile-remote``. The decision is
        kept as evidence like any other. Raises when it cannot evaluate.

        :param context: the starting try's task context.
        :param previous_try: the try that ended without a decision.
        """
        task = _task_of(context)
        settings = self.settings_of(task)
        ti = context["ti"]
        failed = Failure(
            failure=UNKNOWN,
            subject=(
                f"try {previous_try} ended without a retry decision (its process was "
                "killed or lost its heartbeat); refused before the task's code ran"
            ),
            try_number=int(ti.try_number),
            attempts=settings.attempts_in_window(previous_try, int(ti.max_tries)),
        )
        decision = self._decide(failed, settings, context, check="retry-start")
        return decision.reason or _GATE_ERROR

    def _decide(
        self,
        failed: Failure,
        settings: RetrySettings,
        context: Mapping[str, Any],
        *,
        check: str = "retry-policy",
    ) -> RetryDecision:
        now = pendulum.now("UTC")
        due = self.deadline.resolve(context)
        settings, spread = self._spread(settings, failed, context)
        facts = TaskFacts(
            task_id=settings.task_id,
            state=failed.failure,
            attempts=failed.attempts,
            observed_at=now,
            finished_at=None if failed.failure == UNKNOWN else now,
            work=self.work,
        )
        fixture = ClockedFixture.build(
            as_of=now,
            deadline=due,
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
            subject=failed.subject,
        )
        decision = _airflow_decision(entry, text)
        self._keep_evidence(
            context,
            evidence.record(
                fixture=fixture.payload,
                origin=fixture.clock.iso(),
                result=result,
                task_ids=fixture.task_ids,
                try_number=failed.try_number,
                failure=failed.failure,
                reason=text,
                action=decision.action.value,
                extra={
                    "deadline": self.deadline.describe(),
                    "deadlineAt": due.isoformat(),
                    "check": check,
                    **spread,
                },
            ),
        )
        metrics.policy_decided(context, entry, fixture.payload, by=check, failure=failed.failure)
        return decision

    def _spread(
        self, settings: RetrySettings, failed: Failure, context: Mapping[str, Any]
    ) -> tuple[RetrySettings, dict[str, Any]]:
        """The settings the fixture carries, lengthened by this try's jitter when it is on.

        Only a retryable failure can be given a wait; the others keep the evidence
        free of a wait nobody keeps.
        """
        if not self.jitter.enabled or failed.failure != RETRYABLE:
            return settings, {}
        key = TryKey.of_task_instance(context.get("ti"), failed.try_number)
        jittered, drawn = self.jitter.apply(settings, failed.attempts, key)
        return jittered, {"jitter": drawn.as_dict()}

    def _keep_evidence(self, context: Mapping[str, Any] | None, entry: dict[str, Any]) -> None:
        try:
            log.info("Retry window evidence: %s", json.dumps(entry, sort_keys=True))
            store = context.get("task_state_store") if context else None
            ti = context.get("ti") if context else None
            if store is not None:
                history = store.get(evidence.EVIDENCE_KEY)
                store.set(evidence.EVIDENCE_KEY, evidence.appended(history, entry))
            if ti is not None:
                # the latest decision as XCom too: a gate reads every target's in one request
                ti.xcom_push(key=evidence.EVIDENCE_KEY, value=entry)
                # the class in the key: the API lists keys, not values, in one request
                if entry.get("failure") is not None:
                    key = evidence.failure_key(entry["failure"])
                    ti.xcom_push(key=key, value=entry["tryNumber"])
        except Exception:
            # the decision stands without its stored copy; the log keeps it. A retry
            # decided here but not stored is refused when it starts (fail closed).
            log.exception("Could not store the retry window evidence")

    def _cannot_evaluate(
        self, error: BaseException, context: Mapping[str, Any] | None, try_number: int
    ) -> RetryDecision:
        try:
            cause = describe_exception(error)
            default = self.on_error == "default"
            log.error(
                "Retry window gate could not evaluate (%s); %s",
                cause,
                "Airflow's retries apply" if default else "refusing the retry",
            )
            decision = (
                RetryDecision.default()
                if default
                else RetryDecision.fail(reason=f"{_GATE_ERROR} ({cause})"[:MAX_REASON])
            )
            # kept like any decision: with on_error="default" the retry-start check
            # must find that Airflow's retry was handed over on purpose
            self._keep_evidence(
                context,
                evidence.gate_error(
                    try_number=try_number, reason=cause, action=decision.action.value
                ),
            )
            metrics.gate_error(context, by=metrics.RETRY_POLICY)
            return decision
        except BaseException:
            return RetryDecision.fail(reason=_GATE_ERROR)

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
            "jitter": self.jitter.fraction,
            **self.classifier.describe(),
        }


def _airflow_decision(entry: Mapping[str, Any], text: str) -> RetryDecision:
    decision = entry["decision"]
    if decision not in _RETRY:
        return RetryDecision.fail(reason=text)
    # hand Airflow the model's own delay: its jittered backoff is not what we checked
    wait = entry["backoff"] if decision == "wait-backoff" else 0
    return RetryDecision.retry(delay=timedelta(seconds=wait), reason=text)


def _task_of(context: Mapping[str, Any] | None) -> Any:
    if context is None:
        raise ValueError("Airflow passed no task context, so the run's deadline is unknown")
    return context["task"]
