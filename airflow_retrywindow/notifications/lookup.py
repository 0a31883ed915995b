"""Lookup: find the decision a callback is about, in the task's context.

A task callback runs in the worker, in the same task context the retry policy
saw, right after the try ended. The decision is where the provider stored it:

* for a task with :class:`~airflow_retrywindow.RetryWindowPolicy`, the latest
  entry of the task state store key ``retry_window.evidence`` (the XCom of the
  same key when the store cannot be read), if it was taken for this very try;
* for a gate or a sensor, its ``return_value`` decision record of this try;
* for a try refused at its start because its pool's breaker held it past its latest
  start, that refusal (the exception the callback is handed): the try never ran, so
  the latest evidence is the previous try's.

For a task in a breaker pool, the pool's breaker is read too (one request): while it
holds the pool, the failure belongs to the pool's outage (:mod:`.outage`).

Anything else (no context, no entry, an entry of an earlier try, a record that
cannot be read) is :class:`Missing`, with why and what it means: the notifier
then says that nothing was decided and that the retry is to be treated as refused.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pendulum

from airflow_retrywindow.labels import UTC_SHOWN
from airflow_retrywindow.model.decisions import Decision
from airflow_retrywindow.notifications.notice import (
    Lateness,
    Notice,
    from_evidence,
    from_gate_record,
    override_of,
)
from airflow_retrywindow.notifications.outage import Outage, outage_of
from airflow_retrywindow.records.breaker_state import LATE_START, BreakerState
from airflow_retrywindow.records.composition import window_of
from airflow_retrywindow.records.evidence import EVIDENCE_KEY
from airflow_retrywindow.records.override import OverrideEntry
from airflow_retrywindow.redaction import describe_exception

log = logging.getLogger(__name__)

_GATE_RECORD = "return_value"
DEADLINE_INFEASIBLE = Decision.DEADLINE_INFEASIBLE.value


@dataclass(frozen=True)
class Found:
    """Decisions found for the callback's try.

    :param notices: one per task decided.
    :param evidence: where the full evidence is kept, in words.
    :param work_unit: the unit of work the decision record names, if any.
    :param override: a gate's approved override, or why there is none, when it
        has an approval task.
    :param outage: the pool's outage, for a failure while its breaker holds the pool.
    """

    notices: tuple[Notice, ...]
    evidence: str
    work_unit: object = None
    override: OverrideEntry | None = None
    outage: Outage | None = None


@dataclass(frozen=True)
class Missing:
    """No decision can be shown for the callback's try.

    :param why: why not, in words.
    :param consequence: what that means for the task or the work it guards.
    """

    why: str
    consequence: str


def find(context: Mapping[str, Any]) -> Found | Missing:
    """The decision the callback's try ended with, or why there is none. Never raises.

    :param context: the task context Airflow hands the callback.
    """
    ti = context.get("ti")
    task = context.get("task")
    if ti is None or task is None:
        return Missing(
            why="the callback's context holds no task instance (a DAG-level callback?)",
            consequence="nothing here says a retry is safe; treat any retry as refused",
        )
    try:
        if _is_gate(task):
            return _gate_decision(ti)
        return _policy_decision(context, ti, task)
    except Exception as error:
        log.exception("Could not read the retry window decision")
        return Missing(
            why=f"a decision was stored but could not be read ({describe_exception(error)})",
            consequence=_consequence(ti, task),
        )


def _is_gate(task: Any) -> bool:
    """A gate or a sensor: both publish a decision record rather than policy evidence."""
    return callable(getattr(task, "gate_settings", None))


def _gate_decision(ti: Any) -> Found | Missing:
    record = _pull(ti, _GATE_RECORD)
    if not isinstance(record, Mapping) or "decisions" not in record:
        return Missing(
            why=f"gate {ti.task_id} published no decision record in try {ti.try_number}",
            consequence="the gate did not decide, so the work it guards does not run",
        )
    if record.get("tryNumber") != ti.try_number:
        return Missing(
            why=(
                f"the decision record of gate {ti.task_id} is from try {record.get('tryNumber')}, "
                f"not from this try {ti.try_number}"
            ),
            consequence="the gate did not decide in this try, so the work it guards does not run",
        )
    return Found(
        notices=from_gate_record(record),
        evidence=f"the return_value XCom of {ti.task_id} (with the fixtures to replay)",
        work_unit=record.get("workUnit"),
        override=override_of(record),
    )


def _policy_decision(context: Mapping[str, Any], ti: Any, task: Any) -> Found | Missing:
    error = context.get("exception")
    if error is not None and LATE_START in str(error):
        return _late_start(context, ti, task, str(error))
    latest = _latest_evidence(context, ti)
    if not isinstance(latest, Mapping):
        kept = "" if window_of(task) is not None else " (the task has no RetryWindowPolicy)"
        return Missing(
            why=f"no retry window decision is stored for try {ti.try_number}{kept}",
            consequence=_consequence(ti, task),
        )
    if latest.get("tryNumber") != ti.try_number:
        return Missing(
            why=(
                f"the latest stored decision is for try {latest.get('tryNumber')}, "
                f"not for this try {ti.try_number}"
            ),
            consequence=_consequence(ti, task),
        )
    notice = from_evidence(latest, str(ti.task_id))
    return Found(
        notices=(notice,),
        outage=_outage(task, refused=notice.decision == DEADLINE_INFEASIBLE),
        evidence=(
            f"task state store key {EVIDENCE_KEY} and the XCom of that key "
            "(replay the fixture with airflow-retrywindow evaluate)"
        ),
    )


def _late_start(context: Mapping[str, Any], ti: Any, task: Any, reason: str) -> Found:
    """This try, refused at its start: its pool's breaker held it past its latest start."""
    deadline, work_seconds = _deadline_and_work(context, task)
    lateness = None
    if deadline is not None and work_seconds is not None:
        finish = pendulum.now("UTC").add(seconds=work_seconds)
        late = max(int((finish - deadline).total_seconds()), 0)
        lateness = Lateness(finish.format(UTC_SHOWN), deadline.format(UTC_SHOWN), late)
    notice = Notice(
        task_id=str(ti.task_id),
        decision=DEADLINE_INFEASIBLE,
        reason=reason,
        outcome="try refused at its start: it can no longer finish before its deadline; the "
        "task has failed and no further try is scheduled",
        refused=True,
        status="confirmed: the try was held in its pool past its latest start; next: tell the "
        "delivery's consumers, then clear the task if the delivery still matters.",
        lateness=lateness,
        try_number=int(ti.try_number),
    )
    return Found(
        notices=(notice,),
        evidence="the refusal of the retry-start check, in the try's log",
        outage=_outage(task, refused=True),
    )


def _outage(task: Any, *, refused: bool) -> Outage | None:
    """The outage of the task's breaker pool, when its breaker holds it; never raises."""
    from airflow_retrywindow import configuration

    pool = str(getattr(task, "pool", ""))
    try:
        if configuration.breaker_pools().of(pool) is None:
            return None
        from airflow_retrywindow.hooks.airflow_api import AirflowApiHook

        api = AirflowApiHook(configuration.default_conn_id(), timeout=configuration.api_timeout())
        row = api.get_conn().pool(pool)
    except Exception as error:
        log.warning("Could not read pool %s's breaker (%s)", pool, describe_exception(error))
        return None
    state = BreakerState.in_description(row.description) if row is not None else None
    return outage_of(state, refused=refused)


def _deadline_and_work(
    context: Mapping[str, Any], task: Any
) -> tuple[pendulum.DateTime | None, int | None]:
    """The task's deadline and one attempt with its validation, when its policy tells them."""
    policy = window_of(task)
    if policy is None:
        return None, None
    try:
        deadline = pendulum.instance(policy.deadline.resolve(context)).in_timezone("UTC")
        work = policy.work.duration_seconds() + policy.work.validation_seconds()
    except Exception as error:
        # the message still names the outage and the refusal; only the lateness is left out
        log.warning("Could not resolve the deadline (%s)", describe_exception(error))
        return None, None
    return deadline, int(work)


def _latest_evidence(context: Mapping[str, Any], ti: Any) -> object:
    """The latest policy decision: the task state store first, this try's XCom if it fails."""
    store = context.get("task_state_store")
    if store is not None:
        try:
            history = store.get(EVIDENCE_KEY)
        except Exception:
            log.warning("Could not read %s from the task state store; trying XCom", EVIDENCE_KEY)
        else:
            if isinstance(history, Mapping):
                return history.get("latest")
    return _pull(ti, EVIDENCE_KEY)


def _pull(ti: Any, key: str) -> object:
    map_index = ti.map_index if isinstance(ti.map_index, int) else -1
    return ti.xcom_pull(task_ids=ti.task_id, key=key, map_indexes=map_index)


def _consequence(ti: Any, task: Any) -> str:
    """What a missing decision means, from the state the try ended in."""
    if _is_gate(task):
        return "the gate did not decide, so the work it guards does not run"
    state = getattr(ti.state, "value", ti.state)
    if state == "failed":
        return "the task has failed and no further try is scheduled; treat a retry as refused"
    if state == "up_for_retry" and window_of(task) is not None:
        return (
            "Airflow scheduled a retry without a recorded decision; the provider's retry-start "
            "check refuses that try before the task's code runs"
        )
    if state == "up_for_retry":
        return (
            "Airflow scheduled a retry on its own retry settings, unchecked by the retry "
            "window; treat it as refused until someone has checked it"
        )
    return "nothing here says a retry is safe; treat any retry as refused"
