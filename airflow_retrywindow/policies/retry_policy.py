"""``RetryWindowPolicy``: the pre-retry gate on Airflow's automatic retries.

Airflow (3.3+, AIP-105) calls a task's ``retry_policy`` in the worker when an
attempt fails. This policy builds a one-task fixture from the failure and the
task's own retry settings, runs the decision model on it, and hands Airflow the
answer: retry after exactly the model's backoff, or fail with the reason.

Airflow also retries without calling the policy (a killed task process, a
heartbeat timeout). The retry-start check (:mod:`airflow_retrywindow.policies.retry_start`)
closes that path: a try that starts without our recorded decision is decided
before the task's body runs, through :meth:`RetryWindowPolicy.decide_start`.

When the outcome is unknown and the operator is a resumable job (Airflow's
``ResumableJobMixin``), the policy first reads the job's status through the
operator (:mod:`airflow_retrywindow.policies.reconcile`) and decides on what it
found: reconnect to a running job, collect a succeeded one, or treat a failed one
as the confirmed failure it is.

The deadline is on the API server's clock (the data interval, an absolute time);
"now" is this worker's. Each decision first measures how far the two disagree
(:mod:`airflow_retrywindow.policies.server_clock`): beyond ``[retry_window]
clock_skew_tolerance`` the retry is refused (a ``gate-error`` naming the clock
that runs ahead and by how much); within it the model decides at the earliest and
the latest "now" either clock may mean and the stricter answer is kept
(:func:`~airflow_retrywindow.timing.skew.strictest`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import pendulum

from airflow_retrywindow import configuration, metrics, version_compat
from airflow_retrywindow.breaker import trip
from airflow_retrywindow.exceptions import UnsupportedAirflowVersion
from airflow_retrywindow.model import Decision, Fixture, TaskDecision, TaskState, decide
from airflow_retrywindow.model.bounds import MAX_OBSERVATION_AGE
from airflow_retrywindow.policies.classify import (
    DEFAULT_CLASSIFY_TIMEOUT,
    ask,
    bound_problem,
    classify_wait,
    ready,
    reason_part,
)
from airflow_retrywindow.policies.composition import earlier_answers
from airflow_retrywindow.policies.failures import Classifier, ExceptionSpec
from airflow_retrywindow.policies.job_status import JobRead
from airflow_retrywindow.policies.lost_try import LostTry
from airflow_retrywindow.policies.reconcile import (
    DEFAULT_STATUS_READ_TIMEOUT,
    StatusReader,
    resumable,
)
from airflow_retrywindow.policies.retry_start import start_check_of
from airflow_retrywindow.policies.server_clock import server_clock
from airflow_retrywindow.policies.try_start import RUN, StartVerdict
from airflow_retrywindow.read_retry import ReadCount, ReadTally
from airflow_retrywindow.records import evidence
from airflow_retrywindow.records.composition import (
    DECLARED,
    WINDOW,
    ChainPlace,
    Classification,
    placement_of,
)
from airflow_retrywindow.records.evidence import RETRYABLE, UNKNOWN
from airflow_retrywindow.records.work_scope import WorkScope
from airflow_retrywindow.redaction import describe_exception
from airflow_retrywindow.timing.clock import as_timedelta, bounded_seconds, seconds_down
from airflow_retrywindow.timing.deadline import Deadline
from airflow_retrywindow.timing.fixtures import ClockedFixture, TaskFacts
from airflow_retrywindow.timing.jitter import Jitter, TryKey
from airflow_retrywindow.timing.reasons import MAX_REASON, reason
from airflow_retrywindow.timing.retry_settings import RetrySettings, airflow_delay_cap
from airflow_retrywindow.timing.skew import decide_at_both_ends, strictest
from airflow_retrywindow.timing.time_limit import TimeLimit
from airflow_retrywindow.timing.work import Work
from airflow_retrywindow.version_compat import RetryDecision, RetryPolicy

log = logging.getLogger(__name__)

#: the ``check`` of a decision taken when a try starts
RETRY_START = "retry-start"
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
    :param job: what the status read of a resumable job found, when one was read.
    :param lost: the try Airflow's scheduler failed by its race, when that is the failure.
    :param classified: what the window's classifier answered, when it was asked.
    :param chain: where the window sits in a chain, and what the policies before it said.
    """

    failure: str
    subject: str
    try_number: int
    attempts: int
    job: JobRead | None = None
    lost: LostTry | None = None
    classified: Classification | None = None
    chain: ChainPlace | None = None

    @property
    def state(self) -> TaskState:
        """The state the model is given: the job's, once it was read."""
        return self.job.model_state if self.job else TaskState(self.failure)

    @property
    def recorded_failure(self) -> str:
        """The failure class kept: a job read to have failed is a confirmed, retryable one."""
        return RETRYABLE if self.job and self.job.outcome.confirms_failure else self.failure

    def finished_at(self, now: pendulum.DateTime) -> pendulum.DateTime | None:
        """When the attempt ended, if that is known."""
        if self.job is not None:
            return pendulum.instance(self.job.finished_at) if self.job.finished_at else None
        if self.lost is not None:
            return pendulum.instance(self.lost.ended_at)
        return None if self.failure == UNKNOWN else now


@dataclass(frozen=True)
class Evaluated:
    """The model's answer for one failure at one possible "now" of the server's clock.

    :param fixture: the fixture, on its clock.
    :param typed: the fixture as the model read it.
    :param result: the model's whole verdict, JSON-ready.
    :param decided: the one task's decision.
    """

    fixture: ClockedFixture
    typed: Fixture
    result: dict[str, Any]
    decided: TaskDecision

    @property
    def wait_until(self) -> pendulum.DateTime | None:
        """When the decided wait ends, if one is scheduled."""
        at = self.decided.earliest_start
        return self.fixture.clock.at(at) if at is not None else None


@dataclass(frozen=True)
class Decided:
    """What the model decided for one failure, with what Airflow is told.

    :param airflow: the retry decision handed to Airflow at failure time.
    :param start: what a starting try does, when the retry-start check decided.
    """

    airflow: RetryDecision
    start: StartVerdict | None = None


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
    :param status_read_timeout: how long the one status read of a resumable job may
        take before its outcome counts as unknown (default 30 s, at most 600 s).
    :param failed_statuses: statuses of the operator's jobs that confirm a failure. Only
        these, and the built-in words of a known operator class (BigQuery's ``error``),
        confirm one: any other status the operator does not call active or succeeded
        leaves the outcome unknown.
    :param never_submitted_statuses: statuses saying the service never received the job
        (a not-found that proves nothing ran). Without them a job the service does not
        know leaves the outcome unknown.
    :param classify: any retry policy (rules, a model, a chain of them) asked what a
        failure is that ``unknown``, ``terminal`` and ``retryable`` leave undeclared:
        its FAIL makes it terminal, its RETRY retryable with its delay as the shortest
        wait; anything else leaves it to the window (:mod:`~.policies.classify`).
    :param classify_timeout: the longest the classifier is waited for (default 4 s),
        never more than half of ``[retry_window] clock_read_limit``, the decision's bound.
        A model the classifier asks is made ready before each try's code runs, so the
        wait is for its answer; a classifier that does not answer in time leaves the
        failure to the window's own classes, and the reason, the evidence and a metric
        say so.
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
        status_read_timeout: timedelta | float = DEFAULT_STATUS_READ_TIMEOUT,
        failed_statuses: Iterable[str] = (),
        never_submitted_statuses: Iterable[str] = (),
        classify: RetryPolicy | None = None,
        classify_timeout: timedelta | float = DEFAULT_CLASSIFY_TIMEOUT,
    ) -> None:
        refuse_before_retry_policies()
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
        self.status_reader = StatusReader.of(
            as_timedelta(status_read_timeout, "status_read_timeout"),
            failed_statuses,
            never_submitted_statuses,
        )
        self.classify = _classifier(classify)
        self.classify_timeout = as_timedelta(classify_timeout, "classify_timeout")
        if self.classify_timeout <= timedelta(0):
            raise ValueError(
                f"classify_timeout must be a positive duration, got {classify_timeout!r}; "
                f"write classify_timeout=timedelta(seconds=4)"
            )

    def classify_bound_problem(self) -> str | None:
        """Why the classifier's timeout does not fit the decision's bound, or ``None``."""
        if self.classify is None:
            return None
        return bound_problem(self.classify_timeout)

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
            configuration.check()  # a bad [retry_window] value refuses before anything is read
            task = _task_of(context)
            settings = self.settings_of(task)
            classified = self._classified(exception, try_number, max_tries, context)
            place = self._place_in_chain(task, exception, try_number, max_tries, context)
            said = (reason_part(classified), place.words() if place else "")
            failed = Failure(
                failure=classified.failure,
                subject="; ".join(p for p in (describe_exception(exception), *said) if p),
                try_number=try_number,
                attempts=settings.attempts_in_window(try_number, max_tries),
                job=(
                    self._read_job(task, context, try_number)
                    if classified.failure == UNKNOWN
                    else None
                ),
                classified=classified if classified.policy is not None else None,
                chain=place,
            )
            # an open breaker gives the retry a floor under its wait (the model checks it)
            breaker = trip.read(context, failed.recorded_failure)
            decision = self._decide(failed, settings, context, breaker=breaker).airflow
            # before the try's slot is freed: a counted failure may open its pool's breaker
            ends = decision.action.value == "fail"  # Airflow's RetryAction.FAIL: no retry follows
            trip.failed_try(context, failed.recorded_failure, ends=ends, found=breaker)
            return decision
        except BaseException as error:
            # Airflow falls back to its own retries when a policy raises: never let it
            return self._cannot_evaluate(error, context, try_number)

    def _place_in_chain(
        self, task: Any, exception: BaseException, try_number: int, max_tries: int, context: Any
    ) -> ChainPlace | None:
        """Where this window sits in the task's chain, and what the policies before it said."""
        found = placement_of(task)
        if found is None or found.window is not self or not found.chained:
            return None
        return found.place(earlier_answers(found, exception, try_number, max_tries, context))

    def _classified(
        self, exception: BaseException, try_number: int, max_tries: int, context: Any
    ) -> Classification:
        """The failure's class: the window's own classes first, then its classifier."""
        declared = self.classifier.declared(exception)
        if declared is not None:
            return Classification(declared, DECLARED)
        if self.classify is None:
            return Classification(RETRYABLE, WINDOW)
        wait = classify_wait(self.classify_timeout, configuration.clock_read_limit())
        classified = ask(
            self.classify,
            exception,
            try_number=try_number,
            max_tries=max_tries,
            context=context,
            wait=wait,
            own=self.classifier.classify(exception),
        )
        metrics.classifier_answered(context, classified.answer, classifier=classified.policy)
        return classified

    def ready_classifier(self) -> None:
        """Load what the classifier's models need before they answer; never raises.

        The retry-start check calls it before the task's code runs, so that a failure
        waits only for the model's answer (:func:`~.policies.classify.ready`).
        """
        if self.classify is not None:
            ready(self.classify)

    def decide_start(
        self,
        context: Mapping[str, Any],
        previous_try: int,
        lost: LostTry | None = None,
        *,
        limit: TimeLimit | None = None,
    ) -> StartVerdict:
        """Decide whether a try that started without a handed-over decision may run.

        The previous try ended without this policy handing it back to Airflow (its
        process was killed, the scheduler saw its heartbeat stop), or was handed back
        only to reconnect to or collect a job. For a resumable job the job's status is
        read again first: the try runs when it only reconnects or collects, or when
        the model allows a repeat of a confirmed failure now; it is rescheduled to the
        end of the model's backoff; anything else is refused. Without a job to read,
        the outcome is unknown: ``reconcile-remote``. The decision is kept as evidence
        like any other. Raises when it cannot evaluate.

        :param context: the starting try's task context.
        :param previous_try: the try whose outcome is being decided.
        :param lost: that try, when Airflow's scheduler failed it by its race
            (:mod:`~airflow_retrywindow.policies.lost_try`): the model is given the
            failure it names instead of an unknown outcome.
        :param limit: the start check's time limit, which the clock's read shares.
        """
        configuration.check()  # a bad [retry_window] value refuses before anything is read
        task = _task_of(context)
        settings = self.settings_of(task)
        ti = context["ti"]
        scope = self.scope_of(task, ti)
        read_for = lost.job_try if lost is not None else previous_try
        job = self._read_job(task, context, read_for) if resumable(task) else None
        if lost is not None:
            subject = lost.subject()
        elif job is None:
            subject = (
                f"try {previous_try} ended without a retry decision (its process was "
                "killed or lost its heartbeat); decided before the task's code ran"
            )
        else:
            subject = f"try {previous_try} of a resumable job, decided before the task's code ran"
        failed = Failure(
            failure=lost.failure if lost is not None else UNKNOWN,
            subject=subject,
            try_number=int(ti.try_number),
            attempts=settings.attempts_in_window(previous_try, int(ti.max_tries)),
            job=job,
            lost=lost,
        )
        verdict = self._decide(failed, settings, context, check=RETRY_START, limit=limit).start
        if verdict is None:  # only a failure-time decision comes without one
            raise RuntimeError("the retry-start decision gave no verdict")
        job_scope = scope if job is not None and job.allows else None
        return replace(verdict, scope=scope, job_scope=job_scope)

    def start_decided(self, context: Mapping[str, Any], *, first_of_window: bool) -> StartVerdict:
        """What a resumable job's try that starts on a decision does with the stored job.

        A decided retry, or the first try of a window (a clear, a person's decision),
        runs; the mixin then reconnects to an active stored job, collects a succeeded
        one, and submits otherwise. The job's status is read once so the try's marker
        says which. A job stored in another run or work unit (another DAG version), or
        in a retry another try window, is not this try's to reconnect to or collect:
        that outcome is unknown, decided by the model (``reconcile-remote``) and
        kept as evidence. At a window's first try a job of the same run and work unit
        stored before the clear is taken over: the clear was a person's decision.

        :param context: the starting try's task context.
        :param first_of_window: whether the try is the first of its window.
        """
        task, ti = _task_of(context), context["ti"]
        scope = self.scope_of(task, ti)
        job = self.status_reader.read_at_start(
            task, context, scope, first_of_window=first_of_window
        )
        if job is not None:
            log.info("Retry window: try %s starts on %s", ti.try_number, job.describe())
        if job is None or (job.allows is None and job.would is None):
            return StartVerdict(RUN, "the try submits its job", scope=scope)
        if job.allows is not None:
            return StartVerdict(
                RUN, job.describe(), expects=job.allows, scope=scope, job_scope=scope
            )
        settings = self.settings_of(task)
        try_number = int(ti.try_number)
        failed = Failure(
            failure=UNKNOWN,
            subject=f"try {try_number} would {job.would} a job that is not its own; decided "
            "before the task's code ran",
            try_number=try_number,
            attempts=max(settings.attempts_in_window(try_number, int(ti.max_tries)) - 1, 1),
            job=job,
        )
        verdict = self._decide(failed, settings, context, check=RETRY_START).start
        if verdict is None:
            raise RuntimeError("the retry-start decision gave no verdict")
        return replace(verdict, scope=scope)

    def scope_of(self, task: Any, ti: Any) -> WorkScope:
        """The run, try window and work unit of the try ``ti`` runs."""
        window = int(ti.max_tries) - self.settings_of(task).retries + 1
        return WorkScope.of_try(ti, window)

    def _read_job(self, task: Any, context: Mapping[str, Any], failed_try: int) -> JobRead | None:
        """The status of a resumable task's job: one read, before the model decides."""
        if not resumable(task):
            return None
        scope = self.scope_of(task, context["ti"])
        job = self.status_reader.read(task, context, failed_try, scope)
        log.info("Retry window reconciliation of try %s: %s", failed_try, job.describe())
        return job

    def _decide(
        self,
        failed: Failure,
        settings: RetrySettings,
        context: Mapping[str, Any],
        *,
        check: str = "retry-policy",
        limit: TimeLimit | None = None,
        breaker: trip.BreakerRead | None = None,
    ) -> Decided:
        tolerance = timedelta(seconds=configuration.clock_skew_tolerance())
        read = ReadTally()
        asked = failed.classified.seconds if failed.classified else None
        # one bound for the decision: the start check's limit, or at failure time the
        # classifier's time counts towards it and the clock read has the rest
        if limit is not None:
            bound: float | None = limit.left()
        else:
            bound = configuration.clock_read_limit() - asked if asked is not None else None
        clock = server_clock(tolerance, tally=read, bound=bound).check(tolerance)
        due = self.deadline.resolve(context)
        settings, jitter = self._spread(settings, failed, context)
        floors = [failed.classified.floor if failed.classified else None]
        waits_for_breaker = breaker.wait() if breaker is not None else None
        floor = max((each for each in (*floors, waits_for_breaker) if each), default=None)
        if floor is not None and failed.failure == RETRYABLE:
            settings = settings.with_shortest_wait(failed.attempts, floor)
        chosen = decide_at_both_ends(
            clock,
            lambda now, shift: self._evaluate_at(
                failed, settings, now=now, shift=shift, due=due, context=context
            ),
            lambda answers: strictest(
                answers,
                decision=lambda evaluated: evaluated.decided.decision,
                wait_until=lambda evaluated: evaluated.wait_until,
            ),
        )
        fixture, typed, result, decided = (
            chosen.fixture,
            chosen.typed,
            chosen.result,
            chosen.decided,
        )
        entry = decided.to_dict()
        text = reason(
            decided,
            task=typed.tasks[0],
            fixture=typed,
            clock=fixture.clock,
            subject=f"{failed.job.describe()}; {failed.subject}" if failed.job else failed.subject,
        )
        decision = _airflow_decision(decided, text, failed.job)
        start = None
        if check == RETRY_START:
            at = decided.earliest_start
            start = StartVerdict.of(
                decided.decision.value,
                text,
                fixture.clock.at(at) if at is not None else None,
                failed.job,
            )
        self._keep_evidence(
            context,
            evidence.record(
                fixture=fixture.payload,
                origin=fixture.clock.iso(),
                result=result,
                task_ids=fixture.task_ids,
                try_number=failed.try_number,
                failure=failed.recorded_failure,
                reason=text,
                action=start.action if start else decision.action.value,
                deadline=self.deadline.describe(),
                deadline_at=due.isoformat(),
                check=check,
                clock=clock.as_dict(),
                start_check=(
                    start_check_of(context, failed.try_number).as_dict()
                    if check != RETRY_START
                    else None
                ),
                clock_read=read.last.as_dict() if read.last else None,
                jitter=jitter,
                reconciliation=failed.job.as_dict() if failed.job else None,
                lost_try=failed.lost.as_dict() if failed.lost else None,
                classified=failed.classified.as_dict() if failed.classified else None,
                chain=failed.chain.as_dict() if failed.chain else None,
                extra=_breaker_evidence(breaker, waits_for_breaker),
            ),
        )
        metrics.policy_decided(
            context, entry, fixture.payload, by=check, failure=failed.recorded_failure
        )
        return Decided(airflow=decision, start=start)

    def _evaluate_at(
        self,
        failed: Failure,
        settings: RetrySettings,
        *,
        now: pendulum.DateTime,
        shift: timedelta,
        due: pendulum.DateTime,
        context: Mapping[str, Any],
    ) -> Evaluated:
        """The model's answer with "now" at ``now`` on the server's clock.

        :param shift: the server's clock minus this worker's, within the measurement:
            it moves the times this worker noted (a job read) onto the server's clock.
        """
        facts = TaskFacts(
            task_id=settings.task_id,
            state=failed.state,
            attempts=failed.attempts,
            observed_at=pendulum.instance(failed.job.read_at) + shift if failed.job else now,
            finished_at=failed.finished_at(now),
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
        typed = Fixture.from_dict(fixture.payload)
        verdict = decide(typed)
        (decided,) = verdict.tasks
        return Evaluated(fixture, typed, verdict.to_dict(), decided)

    def _spread(
        self, settings: RetrySettings, failed: Failure, context: Mapping[str, Any]
    ) -> tuple[RetrySettings, dict[str, Any] | None]:
        """The settings the fixture carries, lengthened by this try's jitter when it is on.

        Only a retryable failure can be given a wait; the others keep the evidence
        free of a wait nobody keeps.
        """
        if not self.jitter.enabled or failed.failure != RETRYABLE:
            return settings, None
        key = TryKey.of_task_instance(context.get("ti"), failed.try_number)
        jittered, drawn = self.jitter.apply(settings, failed.attempts, key)
        return jittered, drawn.as_dict()

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
                # a try that runs because it only reconnects or collects has not failed
                if entry.get("failure") is not None and entry.get("action") != RUN:
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
                    try_number=try_number,
                    reason=cause,
                    action=decision.action.value,
                    clock_read=_read_of(error),
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
            "status_read_timeout": self.status_reader.timeout.total_seconds(),
            "failed_statuses": list(self.status_reader.failed_statuses),
            "never_submitted_statuses": list(self.status_reader.never_submitted_statuses),
            **self.classifier.describe(),
            **(
                {
                    "classify": type(self.classify).__name__,
                    "classify_timeout": self.classify_timeout.total_seconds(),
                }
                if self.classify is not None
                else {}
            ),
        }


def refuse_before_retry_policies() -> None:
    """Refuse a ``RetryWindowPolicy`` on an Airflow that has no retry policies (before 3.3).

    Airflow before 3.3 has no ``retry_policy`` argument, so the policy would gate
    nothing; the DAG processor records this error as the DAG file's import error.

    :raises UnsupportedAirflowVersion: naming the Airflow installed and what to use instead.
    """
    missing = version_compat.missing_retry_policies()
    if missing is None:
        return
    raise UnsupportedAirflowVersion(
        f"RetryWindowPolicy cannot gate retries here: {missing}. Gate the retry with a "
        "RetryWindowGateOperator or a RetryWindowSensor in front of the task instead, "
        "giving it the estimate as work=Work(duration=..., validation=..., safe_repeat=...), "
        "or upgrade Airflow to 3.3 or later"
    )


def _airflow_decision(decided: TaskDecision, text: str, job: JobRead | None) -> RetryDecision:
    decision = decided.decision
    if job is not None and job.allows and decision.repeats_nothing:
        # the next try submits nothing: it reconnects to the job or collects its result
        return RetryDecision.retry(delay=timedelta(0), reason=text)
    if not decision.allows_retry:
        return RetryDecision.fail(reason=text)
    # hand Airflow the model's own delay: its jittered backoff is not what we checked
    wait = decided.backoff if decision is Decision.WAIT_BACKOFF and decided.backoff else 0
    return RetryDecision.retry(delay=timedelta(seconds=wait), reason=text)


def _classifier(classify: object) -> RetryPolicy | None:
    """``classify=`` checked: one retry policy (a chain is one), or ``None``."""
    if classify is None or isinstance(classify, RetryPolicy):
        return classify
    if isinstance(classify, (list, tuple)):
        raise ValueError(
            f"classify takes one retry policy, got a {type(classify).__name__} of "
            f"{len(classify)}; chain them: classify=ChainRetryPolicy([...]) (from "
            "airflow.providers.common.compat.sdk)"
        )
    raise ValueError(
        f"classify must be a retry policy (an ExceptionRetryPolicy, a ClassifierRetryPolicy, "
        f"a ChainRetryPolicy, ...), got {classify!r}; write "
        "classify=ExceptionRetryPolicy(rules=[...])"
    )


def _read_of(error: BaseException) -> dict[str, Any] | None:
    """How many tries the clock read that failed made, over how long, for the evidence."""
    read = getattr(error, "read", None)
    return read.as_dict() if isinstance(read, ReadCount) else None


def _task_of(context: Mapping[str, Any] | None) -> Any:
    if context is None:
        raise ValueError("Airflow passed no task context, so the run's deadline is unknown")
    return context["task"]


def _breaker_evidence(breaker: trip.BreakerRead | None, wait: int | None) -> dict[str, Any] | None:
    """The open breaker that gave the retry a floor under its wait, for the evidence."""
    if breaker is None or breaker.state is None or wait is None:
        return None
    return {"breaker": {"pool": breaker.row.name, "state": breaker.state.words(), "wait": wait}}
