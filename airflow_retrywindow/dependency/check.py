"""The dependency check at a retry's start: the Airflow side of :mod:`.admission`.

The retry-start check (:mod:`airflow_retrywindow.policies.retry_start`) calls
:func:`dependency_verdict` before any retry of a gated task runs. It reads the task's
pool through Airflow's REST API with the provider's default connection
(``[retry_window] default_conn_id``) in at most three requests (:mod:`.pool_read`),
within the start check's one time limit. A held retry is deferred to the triggerer
(:class:`~airflow_retrywindow.triggers.dependency_hold.DependencyHoldTrigger`): same
try, no attempt spent, no worker while it waits; the trigger wakes it to run or to be
refused, and this check decides again when it resumes. Where no triggerer answered
in time, a held retry is rescheduled instead, and the record says so. What was decided
is kept in the try's task state store and as XCom under :data:`KEY`, with the pool's
state as it was read.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import pendulum

from airflow_retrywindow import configuration, metrics
from airflow_retrywindow.dependency.admission import (
    HOLD,
    MIN_HOLD,
    PROBE,
    REFUSE,
    RELEASE,
    RUN,
    Admission,
    Retry,
    admit,
    round_start,
    unread,
)
from airflow_retrywindow.dependency.fleet import DependencyState
from airflow_retrywindow.dependency.pool_read import forced_state, read_pool
from airflow_retrywindow.dependency.settings import MAX_HOLD, DependencySettings
from airflow_retrywindow.policies.composition import window_of
from airflow_retrywindow.policies.try_start import DEFER, RESCHEDULE, StartVerdict
from airflow_retrywindow.policies.try_start import REFUSE as REFUSED
from airflow_retrywindow.records.dependency_state import (
    KEY,
    OPEN,
    TRIGGERER,
    UNREAD,
    WORKER,
    DependencyRecord,
)
from airflow_retrywindow.redaction import describe_exception
from airflow_retrywindow.timing.time_limit import TimeLimit

log = logging.getLogger(__name__)

#: the context key a probe that may not cost its attempt leaves for the held try's resume
PROTECTED_PROBE = "retry_window.protected_probe"


@dataclass(frozen=True)
class Hold:
    """A held try as it is handed to the triggerer.

    :param retry: the held retry.
    :param pool: its pool.
    :param settings: the pool's dependency settings.
    :param watch_until: when the trigger wakes it at the latest.
    """

    retry: Retry
    pool: str
    settings: DependencySettings
    watch_until: pendulum.DateTime

    def trigger(self) -> Any:
        """The trigger that holds the try, woken no sooner than :data:`MIN_HOLD`."""
        from airflow_retrywindow.triggers.dependency_hold import DependencyHoldTrigger

        return DependencyHoldTrigger.holding(
            self.retry,
            pool=self.pool,
            conn_id=configuration.default_conn_id(),
            settings=self.settings,
            watch_until=self.watch_until,
            not_before=pendulum.now("UTC") + timedelta(seconds=MIN_HOLD),
        )

    def timeout(self, now: pendulum.DateTime) -> timedelta:
        """How long Airflow waits for the trigger before it resumes the try without it:
        past the trigger's own end by :func:`grace`, so only a triggerer that never ran
        the trigger lets it lapse."""
        # a plain timedelta: Airflow's message to its supervisor encodes no pendulum type
        return timedelta(seconds=(self.watch_until - now + grace(self.settings)).total_seconds())


def grace(settings: DependencySettings) -> timedelta:
    """How late past a hold's end a resumed try shows that no triggerer woke it."""
    return timedelta(seconds=max(60, 2 * settings.round_seconds))


def dependency_verdict(
    context: Mapping[str, Any], limit: TimeLimit | None = None
) -> StartVerdict | None:
    """What a retry does with its pool: ``None`` runs it, else held or refused.

    A task in ``default_pool``, or in a pool switched off, is not checked. When the pool
    cannot be read, the retry is held for its own backoff (it is not spent, and never
    reaches a dependency nobody could check), and refused at its latest start.

    :param context: the starting try's task context.
    :param limit: the start check's time limit, which the pool's read shares.
    """
    task, ti = context["task"], context["ti"]
    settings = configuration.pool_settings().of(str(task.pool))
    if settings is None:
        return None
    pool = str(task.pool)
    kept = _kept(context)
    waits_in = _waits_in(kept, int(ti.try_number))
    retry = _retry(context, kept, waits_in)
    state: DependencyState | None = None
    api: Any = None
    try:
        api = _reader(pool, limit)
        state = read_pool(api, pool, settings, forced=forced_state(pool)).state(settings)
    except Exception as error:
        cause = describe_exception(error)
        log.warning("Retry window: pool %s could not be read (%s)", pool, cause)
        admission = unread(pool, retry, settings, cause, pendulum.now("UTC"))
    else:
        admission = admit(state, retry, settings)
    late = waits_in == TRIGGERER and _woken_late(kept, settings)
    waits = None
    if admission.action == HOLD:
        waits = WORKER if late or waits_in == WORKER or not _triggerer(api, state) else TRIGGERER
    hold = _hold(admission, retry, pool, settings) if waits == TRIGGERER else None
    _keep(context, kept, admission, state, settings, waits, hold)
    log.info("Retry window dependency: %s", admission.reason)
    if admission.action == PROBE and waits_in == TRIGGERER and retry.attempts_left < 2:
        context[PROTECTED_PROBE] = _hold(admission, retry, pool, settings)  # type: ignore[index]
    return _start_verdict(context, admission, hold, late=late, now=_server_now(state))


def _start_verdict(
    context: Mapping[str, Any],
    admission: Admission,
    hold: Hold | None,
    *,
    late: bool,
    now: pendulum.DateTime,
) -> StartVerdict | None:
    """What the try does with the admission: deferred, rescheduled, refused, or run."""
    if admission.action == HOLD:
        from airflow_retrywindow.notifications.held_retry import tell_hold

        tell_hold(context)  # never raises: a held retry runs no callback of its own
        if hold is not None:
            return StartVerdict(DEFER, admission.reason, start_at=hold.watch_until, hold=hold)
        start_at = reschedule_at(admission.hold_until, now)
        return StartVerdict(RESCHEDULE, admission.reason, start_at=start_at)
    if admission.action == REFUSE:
        return StartVerdict(REFUSED, admission.reason)
    if late:
        # Airflow resumes a lapsed deferral only to fail it: the try starts anew instead
        return StartVerdict(
            RESCHEDULE,
            f"{admission.reason}; no triggerer woke the held try, so it starts again",
            start_at=reschedule_at(None, now),
        )
    return None


def held(context: Mapping[str, Any]) -> bool:
    """Whether the starting try was held by its pool: it resumes from that hold."""
    return _waits_in(_kept(context), int(context["ti"].try_number)) is not None


def passed(context: Mapping[str, Any]) -> bool:
    """Whether the starting try already passed its pool (it resumes from the task's own
    deferral): it is not checked again in the middle of its work."""
    kept = _kept(context)
    return (
        kept is not None
        and kept.try_number == int(context["ti"].try_number)
        and kept.action in (RUN, PROBE, RELEASE)
    )


def _kept(context: Mapping[str, Any]) -> DependencyRecord | None:
    return DependencyRecord.of(context["task_state_store"].get(KEY))


def reschedule_at(
    hold_until: pendulum.DateTime | None, now: pendulum.DateTime
) -> pendulum.DateTime:
    """When a held try may start again, as handed to Airflow at ``now``.

    Both are on the API server's clock, as Airflow's scheduler compares them. The hold
    was worked out when the pool was read; on a loaded worker the read, the record's
    keeping and the notice can outlast it. A reschedule date already past, or only
    seconds ahead, meets the scheduler's race and fails the held try
    (:data:`~airflow_retrywindow.dependency.admission.MIN_HOLD`), so it is never
    sooner than that after the hand-back.

    :param hold_until: the end of the hold the admission worked out.
    :param now: the moment the try hands itself back, on the API server's clock.
    """
    soonest = now + timedelta(seconds=MIN_HOLD)
    return soonest if hold_until is None or hold_until < soonest else hold_until


def _server_now(state: DependencyState | None) -> pendulum.DateTime:
    """Now on the API server's clock, as the pool's read measured it."""
    local = pendulum.now("UTC")
    if state is None:
        return local
    return local + state.clock_offset


def _reader(pool: str, limit: TimeLimit | None) -> Any:
    """The REST API reader of the check, bounded by its time limit from the start."""
    from airflow_retrywindow.hooks.airflow_api import AirflowApiHook

    # the connection (and, next, the Variable) are read through the task's supervisor,
    # inside the limit's time; the requests then wait at most what it has left
    limit = limit or TimeLimit.starting_now(
        configuration.clock_read_limit(),
        what=f"the read of pool {pool}",
        option="clock_read_limit",
    )
    return AirflowApiHook(
        configuration.default_conn_id(), timeout=configuration.api_timeout(), time_limit=limit
    ).get_conn()


def _triggerer(api: Any, state: DependencyState | None) -> bool:
    """Whether a held try can wait in the triggerer: one is alive, and the pool was read
    (a pool that could not be read holds a try only for its own backoff)."""
    if api is None or state is None:
        return False
    try:
        return bool(api.triggerer_runs())
    except Exception as error:
        log.warning(
            "Retry window: whether a triggerer runs could not be read (%s); the held try is "
            "rescheduled",
            describe_exception(error),
        )
        return False


def _retry(
    context: Mapping[str, Any], kept: DependencyRecord | None, waits_in: str | None
) -> Retry:
    task, ti = context["task"], context["ti"]
    policy = window_of(task)
    try_number = int(ti.try_number)
    retry_settings = policy.settings_of(task)
    attempts = retry_settings.attempts_in_window(try_number, int(ti.max_tries))
    work = timedelta(seconds=policy.work.duration_seconds() + policy.work.validation_seconds())
    same_try = kept is not None and kept.try_number == try_number
    return Retry(
        key=(str(ti.dag_id), str(ti.run_id), str(ti.task_id), int(getattr(ti, "map_index", -1))),
        try_number=try_number,
        attempts_left=int(ti.max_tries) - try_number + 2,
        backoff_seconds=retry_settings.backoff(max(attempts - 1, 1)),
        latest_start=pendulum.instance(policy.deadline.resolve(context)) - work,
        holds=kept.holds if same_try and kept is not None else 0,
        probed_round=kept.probed_round if kept is not None else None,
        protected=waits_in == TRIGGERER,
        # before its hold's end: the triggerer woke it (after it, its watch ended)
        woken=waits_in == TRIGGERER
        and kept is not None
        and kept.hold_until is not None
        and pendulum.now("UTC") < kept.hold_until,
    )


def _waits_in(kept: DependencyRecord | None, try_number: int) -> str | None:
    """Where this try was held, when this start ends its hold: ``triggerer`` when it
    resumes from a deferral, ``worker`` when it was rescheduled; ``None`` otherwise."""
    if kept is None or kept.try_number != try_number or kept.action != HOLD:
        return None
    return kept.waits_in or WORKER


def _woken_late(kept: DependencyRecord | None, settings: DependencySettings) -> bool:
    """Whether a deferred try resumes well past its hold's end: no trigger woke it, so
    Airflow's timeout did (it resumes such a try only to fail it)."""
    end = kept.hold_until if kept is not None else None
    return end is not None and pendulum.now("UTC") >= end + grace(settings)


def _hold(admission: Admission, retry: Retry, pool: str, settings: DependencySettings) -> Hold:
    """The hold handed to the triggerer: woken at the latest start, or after an hour."""
    now = pendulum.now("UTC")
    until = now + timedelta(seconds=MAX_HOLD)
    if retry.latest_start is not None:
        until = min(until, retry.latest_start)
    probed = admission.round if admission.action == PROBE else retry.probed_round
    # in the triggerer: a probe it is woken for is held again if it fails
    held = replace(retry, probed_round=probed, holds=retry.holds + 1, protected=True, woken=False)
    return Hold(held, pool, settings, max(until, now + timedelta(seconds=MIN_HOLD)))


def _keep(  # noqa: PLR0917
    context: Mapping[str, Any],
    kept: DependencyRecord | None,
    admission: Admission,
    state: DependencyState | None,
    settings: DependencySettings,
    waits: str | None,
    hold: Hold | None,
) -> None:
    ti, pool = context["ti"], str(context["task"].pool)
    try_number = int(ti.try_number)
    read = state if state is not None else DependencyState.unread(pool, pendulum.now("UTC"))
    holds = kept.holds if kept is not None and kept.try_number == try_number else 0
    record = read.record(
        settings,
        try_number=try_number,
        action=admission.action,
        decision=admission.decision,
        reason=admission.reason,
        round_start=round_start(admission.round, settings),
        hold_until=hold.watch_until if hold is not None else admission.hold_until,
        next_probe=admission.next_probe,
        holds=holds + (1 if admission.action == HOLD else 0),
        probed_round=admission.round
        if admission.action == PROBE
        else (kept.probed_round if kept is not None else None),
        waits_in=waits,
    )
    keep_record(context, record)
    _count(context, pool, admission.action, record.state)


def keep_record(context: Mapping[str, Any], record: DependencyRecord) -> None:
    """Keep ``record`` in the try's task state store and as XCom; never raises."""
    try:
        context["task_state_store"].set(KEY, record.as_dict())
        context["ti"].xcom_push(key=KEY, value=record.as_dict())
    except Exception:
        # a hold not kept only forgets how long it has been held: the next one is shorter
        log.exception("Could not store the retry window dependency decision")


def _count(context: Mapping[str, Any], pool: str, action: str, state: str) -> None:
    """The metrics of one decision: the action's counter, and the pool's gauge."""
    counters = {
        HOLD: metrics.dependency_held,
        PROBE: metrics.dependency_probe,
        RELEASE: metrics.dependency_released,
    }
    if action in counters:
        counters[action](context, pool)
    if state != UNREAD:
        metrics.dependency_state(pool, state == OPEN)
