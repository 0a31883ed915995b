"""The retry-start check: no try of a gated task runs unless the gate let it.

``RetryWindowPolicy`` runs inside the task process when an attempt fails. When
that process dies (SIGKILL, the OOM killer, a lost node or pod) or the scheduler
sees its heartbeat stop, Airflow schedules the retry on its own and the policy is
never asked. This check runs first in every try of a gated task, before the
task's own code: a try of the current window whose previous try left no decision
of ours handing it back to Airflow is refused (``reconcile-remote``), recorded as
evidence, and failed without further automatic retries.

The provider's cluster policy installs it on every task with a
``RetryWindowPolicy``, on the DAG processor and in the worker alike, so DAG
authors write nothing. The first try of a window (the first run, or a manual
clear, which is a person's decision) is never refused. It costs one read of the
task state store per try start, and none on a window's first try. Airflow keeps
that store per task instance, map index included, so each map index of a mapped
task is checked against its own decisions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from airflow_retrywindow import metrics
from airflow_retrywindow.policies import evidence
from airflow_retrywindow.redaction import describe_exception

log = logging.getLogger(__name__)

PreExecuteHook = Callable[[Any], None]


class RetryStartCheck:
    """An Airflow ``pre_execute`` hook that refuses a retry nobody decided.

    :param then: the task's own ``pre_execute`` hook, run after the check passes.
    """

    def __init__(self, then: PreExecuteHook | None = None) -> None:
        self.then = then

    def __call__(self, context: Mapping[str, Any]) -> None:
        refusal = self.refusal(context)
        if refusal is not None:
            metrics.retry_start_refused(context)
            from airflow.sdk.exceptions import AirflowFailException

            # fails the try at once, without the retry policy and without retries
            raise AirflowFailException(refusal)
        if self.then is not None:
            self.then(context)

    def refusal(self, context: Mapping[str, Any]) -> str | None:
        """Why this try may not run, or ``None`` when it may."""
        task, ti = context["task"], context["ti"]
        policy = task.retry_policy
        try:
            previous = _previous_try_of_window(policy, task, ti)
            if previous is None:
                return None
            history = context["task_state_store"].get(evidence.EVIDENCE_KEY)
            if evidence.allows_next_try(history, int(ti.try_number)):
                return None
            return policy.refuse_unrecorded_retry(context, previous)  # type: ignore[no-any-return]
        except Exception as error:
            metrics.gate_error(context, by=metrics.RETRY_START)
            return self._cannot_check(policy, error)

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


def _previous_try_of_window(policy: Any, task: Any, ti: Any) -> int | None:
    """The try before this one when both belong to the current window, else ``None``."""
    try_number = int(ti.try_number)
    attempts = policy.settings_of(task).attempts_in_window(try_number, int(ti.max_tries))
    return try_number - 1 if attempts > 1 else None


def install(task: Any) -> None:
    """Put the check in front of ``task``'s own ``pre_execute`` hook, once.

    A mapped task keeps its hook in its partial arguments, which every mapped
    instance is built from.
    """
    partial = getattr(task, "partial_kwargs", None)
    if isinstance(partial, dict):
        current = partial.get("pre_execute")
        if not isinstance(current, RetryStartCheck):
            partial["pre_execute"] = RetryStartCheck(then=current)
        return
    current = getattr(task, "_pre_execute_hook", None)
    if not isinstance(current, RetryStartCheck):
        task._pre_execute_hook = RetryStartCheck(then=current)
