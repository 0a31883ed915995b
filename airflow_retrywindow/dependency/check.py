"""The dependency check at a retry's start: the Airflow side of :mod:`.admission`.

The retry-start check (:mod:`airflow_retrywindow.policies.retry_start`) calls
:func:`dependency_verdict` before a decided retry of a gated task runs. It reads the
task's pool through Airflow's REST API with the provider's default connection
(``[retry_window] default_conn_id``), in at most three requests (the pool's waiting
and live task instances, its tries ended in the window, the failure classes the
policy pushed). A ``dependency_pools`` name that is no pool is reported by the view,
which reads the pools from the metadata DB, not here at every decision. A held retry
is rescheduled: same try, no attempt spent. What was decided is kept in the try's task
state store and as XCom under :data:`KEY`, with the pool's state as it was read.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
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
    Admission,
    Retry,
    admit,
    round_of,
    round_start,
    unread,
)
from airflow_retrywindow.dependency.fleet import DependencyState, PoolTry, TaskKey
from airflow_retrywindow.dependency.pool_read import forced_state, read_fleet
from airflow_retrywindow.dependency.settings import DependencySettings
from airflow_retrywindow.policies.try_start import REFUSE as REFUSED
from airflow_retrywindow.policies.try_start import RESCHEDULE, StartVerdict
from airflow_retrywindow.records.dependency_state import (
    KEY,
    OPEN,
    RECOVERING,
    UNREAD,
    DependencyRecord,
)
from airflow_retrywindow.redaction import describe_exception

log = logging.getLogger(__name__)


def dependency_verdict(context: Mapping[str, Any]) -> StartVerdict | None:
    """What a decided retry does with its pool: ``None`` runs it, else held or refused.

    A task in ``default_pool``, or in a pool switched off, is not checked. When the pool
    cannot be read, the retry is held for its own backoff (it is not spent, and never
    reaches a dependency nobody could check), and refused at its latest start.
    """
    task, ti = context["task"], context["ti"]
    pools = configuration.pool_settings()
    settings = pools.of(str(task.pool))
    if settings is None:
        return None
    store = context["task_state_store"]
    kept = _kept(store.get(KEY), int(ti.try_number))
    retry = _retry(context, kept)
    state: DependencyState | None = None
    try:
        state, released = _read(str(task.pool), settings, ti)
    except Exception as error:
        cause = describe_exception(error)
        log.warning("Retry window: pool %s could not be read (%s)", task.pool, cause)
        admission = unread(str(task.pool), retry, settings, cause, pendulum.now("UTC"))
    else:
        admission = admit(state, retry, settings, released)
    _keep(context, store, kept, admission, state, settings)
    log.info("Retry window dependency: %s", admission.reason)
    if admission.action == HOLD:
        from airflow_retrywindow.notifications.held_retry import tell_hold

        tell_hold(context)  # never raises: a held retry runs no callback of its own
        start_at = reschedule_at(admission.hold_until, pendulum.now("UTC"))
        return StartVerdict(RESCHEDULE, admission.reason, start_at=start_at)
    if admission.action == REFUSE:
        return StartVerdict(REFUSED, admission.reason)
    return None


def reschedule_at(
    hold_until: pendulum.DateTime | None, now: pendulum.DateTime
) -> pendulum.DateTime:
    """When a held try may start again, as handed to Airflow at ``now``.

    The hold was worked out when the pool was read; on a loaded worker the read, the
    record's keeping and the notice can outlast it. A reschedule date already past,
    or only seconds ahead, meets the scheduler's race and fails the held try
    (:data:`~airflow_retrywindow.dependency.admission.MIN_HOLD`), so it is never
    sooner than that after the hand-back.

    :param hold_until: the end of the hold the admission worked out.
    :param now: the moment the try hands itself back.
    """
    soonest = now + timedelta(seconds=MIN_HOLD)
    return soonest if hold_until is None or hold_until < soonest else hold_until


def _read(pool: str, settings: DependencySettings, ti: Any) -> tuple[DependencyState, int]:
    """The pool's state, and the retries let run in this round (counted while it recovers).

    A wave is not bounded by the pool's open slots here: a released retry runs only in
    a slot Airflow's scheduler gave it, so Airflow bounds it.
    """
    # the REST client is a large generated package: imported before the reads' time
    # limit starts, or a loaded worker spends the limit importing it
    import airflow_client.client  # noqa: F401

    from airflow_retrywindow.hooks.airflow_api import AirflowApiHook
    from airflow_retrywindow.timing.time_limit import TimeLimit

    api = AirflowApiHook(
        configuration.default_conn_id(), timeout=configuration.api_timeout()
    ).get_conn()
    # bounded from the first request (reading the connection is not): every try and
    # wait of the reads stays below what the task's supervisor tolerates of an outage
    api.time_limit = TimeLimit.starting_now(
        configuration.clock_read_limit(),
        what="the read of the pool's task instances",
        option="clock_read_limit",
    )
    fleet = read_fleet(api, pool, settings, forced=forced_state(pool))
    state = fleet.state(settings)
    if state.state != RECOVERING:
        return state, 0
    own = (str(ti.dag_id), str(ti.run_id), str(ti.task_id), int(getattr(ti, "map_index", -1)))
    return state, _released(
        fleet.tries, own, round_start(round_of(fleet.read_at, settings), settings)
    )


def _released(tries: Sequence[PoolTry], own: TaskKey, since: pendulum.DateTime) -> int:
    """Retries of the pool, this one aside, that started since the round began."""
    return sum(
        1
        for item in tries
        if item.key != own
        and item.try_number >= 2
        and item.start_date is not None
        and item.start_date >= since
        and item.state not in ("up_for_reschedule", "scheduled")
    )


def _retry(context: Mapping[str, Any], kept: Mapping[str, Any]) -> Retry:
    task, ti = context["task"], context["ti"]
    policy = task.retry_policy
    try_number = int(ti.try_number)
    retry_settings = policy.settings_of(task)
    attempts = retry_settings.attempts_in_window(try_number, int(ti.max_tries))
    work = timedelta(seconds=policy.work.duration_seconds() + policy.work.validation_seconds())
    return Retry(
        key=(str(ti.dag_id), str(ti.run_id), str(ti.task_id), int(getattr(ti, "map_index", -1))),
        try_number=try_number,
        attempts_left=int(ti.max_tries) - try_number + 2,
        backoff_seconds=retry_settings.backoff(max(attempts - 1, 1)),
        latest_start=pendulum.instance(policy.deadline.resolve(context)) - work,
        holds=int(kept.get("holds", 0)),
        probed_round=kept.get("probedRound"),
    )


def _kept(value: object, try_number: int) -> dict[str, Any]:
    """What this try kept of its earlier checks: its holds and the round it probed in."""
    found = DependencyRecord.of(value)
    if found is None:
        return {}
    if found.try_number != try_number:
        return {"probedRound": found.probed_round}
    return {"holds": found.holds, "probedRound": found.probed_round}


def _keep(  # noqa: PLR0917
    context: Mapping[str, Any],
    store: Any,
    kept: Mapping[str, Any],
    admission: Admission,
    state: DependencyState | None,
    settings: DependencySettings,
) -> None:
    ti, pool = context["ti"], str(context["task"].pool)
    read = state if state is not None else DependencyState.unread(pool, pendulum.now("UTC"))
    record = read.record(
        settings,
        try_number=int(ti.try_number),
        action=admission.action,
        decision=admission.decision,
        reason=admission.reason,
        budget=admission.budget,
        round_start=round_start(admission.round, settings),
        hold_until=admission.hold_until,
        next_probe=admission.next_probe,
        # a hold because the pool could not be read waits the own backoff: not a longer one
        holds=int(kept.get("holds", 0)) + (1 if admission.action == HOLD and state else 0),
        probed_round=admission.round if admission.action == PROBE else kept.get("probedRound"),
    )
    try:
        store.set(KEY, record.as_dict())
        ti.xcom_push(key=KEY, value=record.as_dict())
    except Exception:
        # a hold not kept only forgets how long it has been held: the next one is shorter
        log.exception("Could not store the retry window dependency decision")
    _count(context, pool, admission.action, record.state)


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
