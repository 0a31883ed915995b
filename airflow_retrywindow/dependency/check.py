"""The dependency check at a retry's start: the Airflow side of :mod:`.admission`.

The retry-start check (:mod:`airflow_retrywindow.policies.retry_start`) calls
:func:`dependency_verdict` before a decided retry of a gated task runs. It reads the
task's pool through Airflow's REST API with the provider's default connection
(``[retry_window] default_conn_id``), in at most three requests (the pool's waiting
and live task instances, its tries ended in the window, the failure classes the
policy pushed), and a fourth while the pool recovers (its open slots). A held retry
is rescheduled: same try, no attempt spent. What was decided is kept in the try's
task state store and as XCom under :data:`KEY`, with the pool's state as it was read.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pendulum

from airflow_retrywindow import configuration, metrics
from airflow_retrywindow.dependency.admission import (
    HOLD,
    REFUSE,
    Admission,
    Retry,
    admit,
    round_of,
    round_start,
)
from airflow_retrywindow.dependency.fleet import (
    ENDED,
    FORCED_STATES,
    RECOVERING,
    WAITING_OR_LIVE,
    DependencyState,
    Fleet,
    PoolTry,
    TaskKey,
)
from airflow_retrywindow.dependency.settings import DependencySettings
from airflow_retrywindow.policies.try_start import REFUSE as REFUSED
from airflow_retrywindow.policies.try_start import RESCHEDULE, StartVerdict
from airflow_retrywindow.records import evidence
from airflow_retrywindow.redaction import describe_exception

log = logging.getLogger(__name__)

#: where a try's dependency decision is kept (task state store and XCom)
KEY = "retry_window_dependency"
#: the Airflow Variable on-call sets to force a pool ``open`` or ``closed``
FORCE_VARIABLE = "retry_window_dependency_{pool}"
VERSION = 1
#: the failure classes that count (a terminal failure is the task's own)
_COUNTED = (evidence.RETRYABLE, evidence.UNKNOWN)


def dependency_verdict(context: Mapping[str, Any]) -> StartVerdict | None:
    """What a decided retry does with its pool: ``None`` runs it, else held or refused.

    A task in ``default_pool``, or in a pool switched off, is not checked. When the pool
    cannot be read, the retry is held for its own backoff (it is not spent, and never
    reaches a dependency nobody could check), and refused at its latest start.
    """
    task, ti = context["task"], context["ti"]
    settings = configuration.pool_settings().of(str(task.pool))
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
        admission = _unread(str(task.pool), retry, settings, cause)
    else:
        admission = admit(state, retry, settings, released)
    _keep(context, store, kept, admission, state, settings)
    log.info("Retry window dependency: %s", admission.reason)
    if admission.action == HOLD:
        from airflow_retrywindow.notifications.held_retry import tell_hold

        tell_hold(context)  # never raises: a held retry runs no callback of its own
        return StartVerdict(RESCHEDULE, admission.reason, start_at=admission.hold_until)
    if admission.action == REFUSE:
        return StartVerdict(REFUSED, admission.reason)
    return None


def _read(pool: str, settings: DependencySettings, ti: Any) -> tuple[DependencyState, int]:
    """The pool's state, and the retries let run in this round (read while it recovers)."""
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
    window = timedelta(seconds=settings.window_seconds)
    since = pendulum.now("UTC") - window
    tries = api.pool_tries(pool, states=WAITING_OR_LIVE)
    tries += api.pool_tries(pool, states=ENDED, ended_since=since)
    counted = _counted_failed(api.recent_xcom_keys(evidence.FAILURE_KEY_PREFIX), since)
    read_at = _server_now(api)
    fleet = Fleet(pool, read_at, tuple(tries), counted, forced=_forced(pool))
    state = fleet.state(settings)
    if state.state != RECOVERING:
        return state, 0
    found = api.pools([pool]).get(pool)
    fleet = Fleet(
        pool, read_at, tuple(tries), counted, found.open_slots() if found else None, fleet.forced
    )
    own = (str(ti.dag_id), str(ti.run_id), str(ti.task_id), int(getattr(ti, "map_index", -1)))
    return fleet.state(settings), _released(
        tries, own, round_start(round_of(read_at, settings), settings)
    )


def _counted_failed(keys: list[Any], since: pendulum.DateTime) -> frozenset[TaskKey]:
    counted = {evidence.failure_key(name) for name in _COUNTED}
    return frozenset(
        (str(key.dag_id), str(key.run_id), key.task_id, key.map_index)
        for key in keys
        if key.key in counted and key.timestamp >= since
    )


def _released(tries: list[PoolTry], own: TaskKey, since: pendulum.DateTime) -> int:
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


def _server_now(api: Any) -> pendulum.DateTime:
    """Now on the API server's clock, as its answers told it."""
    now = pendulum.now("UTC")
    offset = api.clock_offset
    if offset is None:
        return now
    middle: timedelta = (offset.low + offset.high) / 2
    return now + middle


def _forced(pool: str) -> str | None:
    """The state on-call forces with the pool's Variable, or ``None``."""
    from airflow.sdk import Variable

    name = FORCE_VARIABLE.format(pool=pool)
    try:
        value = Variable.get(name, default=None)
    except Exception as error:
        log.warning(
            "Retry window: Variable %s could not be read (%s)", name, describe_exception(error)
        )
        return None
    if value is None or not str(value).strip():
        return None
    forced = str(value).strip().lower()
    if forced not in FORCED_STATES:
        log.warning(
            "Retry window: Variable %s = %r is neither %s; it is ignored",
            name,
            value,
            " nor ".join(FORCED_STATES),
        )
        return None
    return forced


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


def _unread(pool: str, retry: Retry, settings: DependencySettings, cause: str) -> Admission:
    from airflow_retrywindow.dependency.admission import DEADLINE_INFEASIBLE, DEPENDENCY_HELD

    now = pendulum.now("UTC")
    number = round_of(now, settings)
    facts = f"pool {pool} could not be read ({cause})"
    if retry.latest_start is not None and now >= retry.latest_start:
        return Admission(
            REFUSE,
            DEADLINE_INFEASIBLE,
            f"{DEADLINE_INFEASIBLE}: {facts}; past its latest start",
            number,
            0,
        )
    until = now + timedelta(seconds=max(retry.backoff_seconds, 1))
    if retry.latest_start is not None:
        until = min(until, retry.latest_start)
    return Admission(
        HOLD,
        DEPENDENCY_HELD,
        f"{DEPENDENCY_HELD}: {facts}; held until {until.format('HH:mm:ss [UTC]')}",
        number,
        0,
        hold_until=until,
    )


def _kept(value: object, try_number: int) -> dict[str, Any]:
    """What this try kept of its earlier checks: its holds and the round it probed in."""
    if not isinstance(value, dict) or value.get("version") != VERSION:
        return {}
    if value.get("tryNumber") != try_number:
        return {"probedRound": value.get("probedRound")}
    return value


def _keep(  # noqa: PLR0917
    context: Mapping[str, Any],
    store: Any,
    kept: Mapping[str, Any],
    admission: Admission,
    state: DependencyState | None,
    settings: DependencySettings,
) -> None:
    ti = context["ti"]
    holds = int(kept.get("holds", 0)) + (1 if admission.action == HOLD else 0)
    probed = admission.round if admission.action == "probe" else kept.get("probedRound")
    record = {
        "version": VERSION,
        **(state.as_dict() if state is not None else {"pool": str(context["task"].pool)}),
        "budget": admission.budget,
        "round": admission.round,
        "roundStart": round_start(admission.round, settings).isoformat(),
        "roundSeconds": settings.round_seconds,
        "nextProbe": admission.next_probe.isoformat() if admission.next_probe else None,
        "settings": settings.as_dict(),
        "tryNumber": int(ti.try_number),
        "action": admission.action,
        "decision": admission.decision,
        "holdUntil": admission.hold_until.isoformat() if admission.hold_until else None,
        "reason": admission.reason,
        "holds": holds,
        "probedRound": probed,
    }
    try:
        store.set(KEY, record)
        ti.xcom_push(key=KEY, value=record)
    except Exception:
        # a hold not kept only forgets how long it has been held: the next one is shorter
        log.exception("Could not store the retry window dependency decision")
    metrics.dependency_decided(
        context, pool=record["pool"], action=admission.action, state=record.get("state", "")
    )
