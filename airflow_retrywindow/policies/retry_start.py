"""The retry-start check: no try of a gated task runs unless the gate let it.

``RetryWindowPolicy`` runs inside the task process when an attempt fails. When
that process dies (SIGKILL, the OOM killer, a lost node or pod) or the scheduler
sees its heartbeat stop, Airflow schedules the retry on its own and the policy is
never asked. This check runs first in every try of a gated task, before the
task's own code: a try of the current window whose previous try left no decision
of ours handing it back to Airflow is decided by the model first, recorded as
evidence, and runs, waits (rescheduled, same try) or is failed without further
automatic retries. For a resumable job (Airflow's ``ResumableJobMixin``) the job's
status is read once through the operator before deciding, so a try that only
reconnects to a running job, or collects a succeeded one, runs; without a job to
read, the outcome is unknown (``reconcile-remote``).

The provider's cluster policy installs it on every task with a
``RetryWindowPolicy``, on the DAG processor and in the worker alike, so DAG
authors write nothing. The first try of a window (the first run, or a manual
clear, which is a person's decision) is not refused, unless the mixin would
reconnect to or collect a job stored for another run or work unit (another DAG
version): that job is not the try's. It costs one read of the task state store
per try start, and none on a window's first try, except for a resumable job,
whose every try keeps the job id it started with and where it belongs (one read
and one write), and whose stored job's status is read once when the try starts
on a decision, to record what the mixin will do with it. A model that ``classify=``
asks is loaded once the try may run (:func:`~.classify.ready`). Airflow keeps
that store per task instance, map index included, so each map index of a mapped
task is checked against its own decisions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, MutableMapping
from datetime import timedelta
from typing import Any

import pendulum

from airflow_retrywindow import airflow_internals, configuration, metrics
from airflow_retrywindow.labels import UTC_SHOWN
from airflow_retrywindow.policies import lost_try
from airflow_retrywindow.policies.reconcile import resumable
from airflow_retrywindow.policies.server_clock import server_clock
from airflow_retrywindow.policies.try_start import (
    REFUSE,
    RESCHEDULE,
    StartVerdict,
    mark_start,
)
from airflow_retrywindow.records import evidence
from airflow_retrywindow.records.breaker_state import LATE_START
from airflow_retrywindow.records.composition import window_of
from airflow_retrywindow.records.start_check import StartCheck
from airflow_retrywindow.redaction import describe_exception
from airflow_retrywindow.timing.time_limit import TimeLimit

log = logging.getLogger(__name__)

PreExecuteHook = Callable[[Any], None]
#: the context key the check leaves its try number under: the task runner hands the
#: same context to the ``pre_execute`` hooks and to the retry policy of one try
RAN_KEY = "retry_window.start_check_ran"


class RetryStartCheck:
    """An Airflow ``pre_execute`` hook that refuses a retry nobody decided.

    :param then: the task's own ``pre_execute`` hook, run after the check passes.
    """

    def __init__(self, then: PreExecuteHook | None = None) -> None:
        self.then = then

    def __call__(self, context: Mapping[str, Any]) -> None:
        _mark_ran(context)
        verdict = self.verdict(context)
        if verdict is not None and verdict.action == RESCHEDULE:
            from airflow_retrywindow.version_compat import AirflowRescheduleException

            # the same try starts again at the end of the model's backoff
            raise AirflowRescheduleException(verdict.start_at)  # type: ignore[no-untyped-call]
        if verdict is not None and verdict.action == REFUSE:
            metrics.retry_start_refused(context)
            from airflow_retrywindow.version_compat import AirflowFailException

            # fails the try at once, without the retry policy and without retries
            raise AirflowFailException(verdict.reason)
        # the try runs: a classifier's model is loaded now, so a failure waits for its answer
        window = window_of(context["task"])
        if window is not None:
            window.ready_classifier()
        if self.then is not None:
            self.then(context)

    def refusal(self, context: Mapping[str, Any]) -> str | None:
        """Why this try may not run now, or ``None`` when it may."""
        verdict = self.verdict(context)
        return (
            None
            if verdict is None or verdict.action not in (REFUSE, RESCHEDULE)
            else verdict.reason
        )

    def verdict(self, context: Mapping[str, Any]) -> StartVerdict | None:
        """What this try does: ``None`` runs it as decided before, else the new verdict.

        Every read it makes (the server's clock, the lost try's event log) shares one
        time limit, ``[retry_window] clock_read_limit``, below what the task's supervisor
        tolerates. In a breaker pool, any try that starts past its latest start is refused
        first: its pool may have held it there.
        """
        task, ti = context["task"], context["ti"]
        policy = window_of(task)
        try:
            limit = TimeLimit.starting_now(
                configuration.clock_read_limit(),
                what="the retry-start check",
                option="clock_read_limit",
            )
            late = held_past_latest_start(context, policy, limit)
            if late is not None:
                return late
            try_number = int(ti.try_number)
            previous = _previous_try_of_window(policy, task, ti)
            history = context["task_state_store"].get(evidence.EVIDENCE_KEY) if previous else None
            permission = (
                evidence.start_permission(history, try_number) if previous else evidence.DECIDED
            )
            if permission == evidence.STARTED:
                return None
            if permission == evidence.DECIDED:
                return self._start_decided(context, first_of_window=previous is None)
            lost = (
                _lost_try(policy, task, ti, history, previous, limit)
                if previous is not None and permission == evidence.UNDECIDED
                else None
            )
            verdict: StartVerdict = policy.decide_start(context, previous, lost, limit=limit)
            if verdict.action in (REFUSE, RESCHEDULE):
                return verdict
            self._mark(context, try_number, verdict)
            return verdict
        except Exception as error:
            metrics.gate_error(context, by=metrics.RETRY_START)
            refusal = self._cannot_check(policy, error)
            return None if refusal is None else StartVerdict(REFUSE, refusal)

    def _start_decided(
        self, context: Mapping[str, Any], *, first_of_window: bool
    ) -> StartVerdict | None:
        """A try Airflow starts on a decision (a decided retry, or a clear): runs as decided.

        For a resumable job it first records what the mixin will do with the stored
        job, and refuses when that would reconnect to or collect a job stored in
        another run or work unit (or, in a retry, another try window).
        """
        task = context["task"]
        if not resumable(task):
            return None
        verdict: StartVerdict = window_of(task).start_decided(
            context, first_of_window=first_of_window
        )
        if verdict.action in (REFUSE, RESCHEDULE):
            return verdict
        self._mark(context, int(context["ti"].try_number), verdict)
        return None

    @staticmethod
    def _mark(context: Mapping[str, Any], try_number: int, verdict: StartVerdict) -> None:
        task = context["task"]
        if resumable(task):
            mark_start(task, context["task_state_store"], try_number, verdict)

    @staticmethod
    def _cannot_check(policy: Any, error: Exception) -> str | None:
        cause = describe_exception(error)
        if getattr(policy, "on_error", "fail") == "default":
            log.error("Retry-start check could not evaluate (%s); the try runs", cause)
            return None
        return (
            "gate-error: the retry-start check could not tell whether this retry was "
            f"decided, so it is refused ({cause})"
        )


def held_past_latest_start(
    context: Mapping[str, Any], policy: Any, limit: TimeLimit
) -> StartVerdict | None:
    """The refusal of a try of a breaker pool that starts past its latest start, else ``None``.

    Its pool's breaker may have held it, first try or retry, any time: nothing runs that
    cannot finish, validation included, before its deadline. The API server's clock is
    read for it, at the later end of its measurement.
    """
    pool = str(context["task"].pool)
    resumed, _kwargs = airflow_internals.resumed_with(context["ti"])
    if resumed is not None or configuration.breaker_pools().of(pool) is None:
        return None  # a try resumed from its own deferral started in time
    due = pendulum.instance(policy.deadline.resolve(context))
    work = timedelta(seconds=policy.work.duration_seconds() + policy.work.validation_seconds())
    latest = due - work
    tolerance = timedelta(seconds=configuration.clock_skew_tolerance())
    clock = server_clock(tolerance, bound=limit.left()).check(tolerance)
    now = max(clock.possible_nows(pendulum.now("UTC")))
    if now <= latest:
        return None
    return StartVerdict(
        REFUSE,
        f"deadline-infeasible: try {int(context['ti'].try_number)} starts at "
        f"{now.format(UTC_SHOWN)}, {LATE_START} {latest.format(UTC_SHOWN)} (its "
        f"deadline {due.format(UTC_SHOWN)} less {work.total_seconds():g} s of work and "
        f"validation); pool {pool}'s breaker may have held it there, and it cannot finish "
        "before its deadline",
    )


def _previous_try_of_window(policy: Any, task: Any, ti: Any) -> int | None:
    """The try before this one when both belong to the current window, else ``None``."""
    try_number = int(ti.try_number)
    attempts = policy.settings_of(task).attempts_in_window(try_number, int(ti.max_tries))
    return try_number - 1 if attempts > 1 else None


def _lost_try(  # noqa: PLR0917
    policy: Any, task: Any, ti: Any, history: object, previous: int, limit: TimeLimit
) -> lost_try.LostTry | None:
    """The previous try, when Airflow's scheduler failed it by its race after it handed
    itself back (:mod:`~airflow_retrywindow.policies.lost_try`); the event log is read
    only when our decisions say it could have."""
    first = policy.settings_of(task).attempts_in_window(previous, int(ti.max_tries)) == 1
    if lost_try.may_be_lost(history, previous, first_of_window=first) is None:
        return None
    mismatches = lost_try.read_mismatches(ti, previous, limit)
    return lost_try.lost_try(history, previous, mismatches, first_of_window=first)


def install(task: Any) -> None:
    """Put the check in front of ``task``'s own ``pre_execute`` hook, once.

    A mapped task keeps its hook in its partial arguments, which every mapped
    instance is built from.
    """
    current = airflow_internals.pre_execute_hook(task)
    if not isinstance(current, RetryStartCheck):
        airflow_internals.set_pre_execute_hook(task, RetryStartCheck(then=current))


def _mark_ran(context: Mapping[str, Any]) -> None:
    """Leave in the try's context that its check ran, for the policy's evidence."""
    if isinstance(context, MutableMapping):
        context[RAN_KEY] = int(context["ti"].try_number)


def installed_on(task: Any) -> bool:
    """Whether ``task`` (the worker's copy, or a mapped task) carries the check."""
    return isinstance(airflow_internals.pre_execute_hook(task), RetryStartCheck)


def start_check_of(context: Mapping[str, Any], try_number: int) -> StartCheck:
    """Whether the failed try ``try_number`` of ``context`` passed its retry-start check.

    A try that did not is logged as a WARNING and counted
    (``retry_window.retry_start.not_run``): the components' ``[retry_window]
    policy_checks`` likely differ.
    """
    from airflow_retrywindow import configuration

    try:
        mode: str | None = configuration.policy_checks()
    except configuration.ConfigurationError:
        mode = None
    found = StartCheck(
        ran=context.get(RAN_KEY) == try_number,
        installed=installed_on(context.get("task")),
        policy_checks=mode,
    )
    warning = found.warning(try_number)
    if warning is not None:
        log.warning("Retry window: %s", warning)
        metrics.retry_start_not_run(context)
    return found
