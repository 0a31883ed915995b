"""A held try's resumption: what Airflow runs when the triggerer wakes a held retry.

A held retry is deferred from its start check (a ``pre_execute`` hook), before the
task's code ran, so Airflow resumes it with a method of ours, not the operator's:
Airflow hands a trigger's event to the method named at deferral, which
``execute`` is not. The start check decides again first (the task runner runs the
``pre_execute`` hooks before it resumes the try); then :class:`HeldTryResume` runs the
task's ``execute`` as a first start would.

**A probe that cannot cost the last attempt.** A held retry with one attempt left
may probe when it waits in the triggerer: when its probe fails in a way the task's
``RetryWindowPolicy`` classes retryable (the dependency is still down), the try is
deferred again, held as before, instead of spent. Any other failure ends the try as
any failure does. So a fleet whose retries have no attempt to spare still finds out
that its dependency is back.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pendulum

from airflow_retrywindow.dependency.admission import HOLD
from airflow_retrywindow.dependency.check import PROTECTED_PROBE, Hold, keep_record
from airflow_retrywindow.policies.composition import window_of
from airflow_retrywindow.records import evidence
from airflow_retrywindow.records.dependency_state import KEY, TRIGGERER, DependencyRecord
from airflow_retrywindow.redaction import describe_exception
from airflow_retrywindow.verdicts import DEPENDENCY_HELD

log = logging.getLogger(__name__)

#: the method a held try is deferred with, set on the running task by the start check
RESUME_METHOD = "retry_window_resume"


class HeldTryResume:
    """The running task's resume method after a dependency hold.

    :param task: the operator that runs the try (the task runner's copy).
    """

    def __init__(self, task: Any) -> None:
        self.task = task

    def __call__(self, context: Mapping[str, Any], event: Any = None) -> Any:
        log.info("Retry window: the held try resumes (%s)", event)
        hold = context.get(PROTECTED_PROBE)
        if not isinstance(hold, Hold):
            return self.task.execute(context)
        try:
            return self.task.execute(context)
        except Exception as error:
            if window_of(self.task).classifier.classify(error) != evidence.RETRYABLE:
                raise
            defer_again(context, hold, describe_exception(error))


def defer_again(context: Mapping[str, Any], hold: Hold, cause: str) -> None:
    """Hold the try again after its probe failed: recorded, then deferred; always raises.

    :param context: the try's task context.
    :param hold: the hold the probe came from, its round marked probed.
    :param cause: the probe's failure, safe to store.
    """
    from airflow_retrywindow.version_compat import TaskDeferred

    reason = (
        f"{DEPENDENCY_HELD}: the probe of pool {hold.pool} failed ({cause}); the try is held "
        "again, its last attempt not spent"
    )
    log.warning("Retry window: %s", reason)
    kept = DependencyRecord.of(context["task_state_store"].get(KEY))
    if kept is not None:
        again = replace(
            kept,
            action=HOLD,
            decision=DEPENDENCY_HELD,
            reason=reason,
            hold_until=hold.watch_until,
            waits_in=TRIGGERER,
        )
        keep_record(context, again)
    now = pendulum.now("UTC")
    raise TaskDeferred(trigger=hold.trigger(), method_name=RESUME_METHOD, timeout=hold.timeout(now))


def install(task: Any) -> None:
    """Give the running task the resume method a held try is deferred with, once.

    :param task: the operator that runs the try (the task runner's copy).
    """
    if not isinstance(vars(task).get(RESUME_METHOD), HeldTryResume):
        setattr(task, RESUME_METHOD, HeldTryResume(task))
