"""Make a gated task defer to :class:`~airflow_retrywindow.triggers.gated.GatedTrigger`.

The provider's cluster policy puts :class:`GatedDeferral` among a gated task's
``pre_execute`` hooks (after the retry-start check, before the DAG author's own
hook). Each try, it replaces ``defer`` on the task object that runs the try with
one that wraps the trigger, then calls the operator's own ``defer``. Airflow runs
``pre_execute`` hooks before ``execute`` and before ``resume_execution``, so a
deferral from either is wrapped; mapped tasks get the hook through their partial
arguments, like the retry-start check.

When the try resumes only to fail because its ``GatedTrigger`` raised
(``next_method="__fail__"``), the hook raises that failure again,
:class:`~airflow_retrywindow.triggers.gated.TriggerEndedWithFailure`, instead of
letting Airflow raise its ``TaskDeferralError("Trigger failure")``, which it
raises for a trigger that crashed too: the retry policy then classifies and
records what happened. Any other ``__fail__`` keeps Airflow's own path.

Why a hook and not an attribute set when the DAG is parsed: the task runner runs
a copy of the parsed task (``prepare_for_execution``) and a mapped task is a new
object per map index, so only at try time is the running object at hand.

Importing this module imports no Airflow.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

from airflow_retrywindow import airflow_internals

log = logging.getLogger(__name__)

PreExecuteHook = Callable[[Any], None]
#: the last traceback line of a failure a ``GatedTrigger`` raised
_REPORTED = re.compile(
    r"airflow_retrywindow\.triggers\.gated\.TriggerEndedWithFailure: the trigger (\S+) "
    r"ended the task with a failure; the retry window gate decides its retry"
)


class GatedDefer:
    """A task's ``defer`` that hands Airflow a ``GatedTrigger`` around the trigger.

    :param defer: the operator's own ``defer``, bound to the running task.
    """

    def __init__(self, defer: Callable[..., Any]) -> None:
        self.defer = defer

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from airflow_retrywindow.triggers.gated import GatedTrigger

        # Airflow's defer takes the trigger by keyword; an operator's own may not
        if "trigger" in kwargs:
            kwargs["trigger"] = GatedTrigger.around(kwargs["trigger"])
        elif args:
            args = (GatedTrigger.around(args[0]), *args[1:])
        return self.defer(*args, **kwargs)


class GatedDeferral:
    """An Airflow ``pre_execute`` hook: the running task's deferrals go through the gate.

    :param then: the task's own ``pre_execute`` hook, run after this one.
    """

    def __init__(self, then: PreExecuteHook | None = None) -> None:
        self.then = then

    def __call__(self, context: Mapping[str, Any]) -> None:
        wrap_defer(context["task"])
        if self.then is not None:
            self.then(context)
        ti = context.get("ti")
        reported = reported_failure(ti)
        if reported is not None:
            from airflow_retrywindow.triggers.gated import TriggerEndedWithFailure

            # the triggerer's traceback, which Airflow's own __fail__ path would log
            log.error("Trigger failed in the triggerer:\n%s", "".join(_failure_lines(ti)))
            # Airflow would raise TaskDeferralError("Trigger failure") from
            # resume_execution, the same for a trigger that crashed; the policy is
            # handed what really happened instead, so it can be classified apart
            raise TriggerEndedWithFailure(reported)


def reported_failure(ti: Any) -> str | None:
    """The trigger classpath when this try resumes to fail because a ``GatedTrigger`` raised.

    Airflow resumes such a try with ``next_method="__fail__"`` and the trigger's
    traceback in ``next_kwargs``; the traceback's last line names the exception.
    Anything else (a trigger that crashed, timed out, or an Airflow that passes
    no such context) gives ``None``, and Airflow's own ``__fail__`` path runs.

    :param ti: the running task instance.
    """
    lines = [line for line in _failure_lines(ti) if line.strip()]
    if not lines:
        return None
    last = lines[-1].strip().splitlines()[-1]
    found = _REPORTED.fullmatch(last)
    return found.group(1) if found else None


def _failure_lines(ti: Any) -> list[str]:
    """The triggerer's traceback when the running try resumes only to fail, else ``[]``."""
    # without a next_method nothing is reported and Airflow's own __fail__ path runs unchanged
    next_method, next_kwargs = airflow_internals.resumed_with(ti)
    if next_method != "__fail__":  # Airflow's TRIGGER_FAIL_REPR
        return []
    return _traceback(next_kwargs)


def _traceback(value: Any, depth: int = 0) -> list[str]:
    """The strings under the ``traceback`` key of ``value``, however Airflow encoded it."""
    if depth > 8:
        return []
    if isinstance(value, Mapping):
        if "traceback" in value:
            return _strings(value["traceback"])
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        for item in value:
            found = _traceback(item, depth + 1)
            if found:
                return found
    return []


def _strings(value: Any, depth: int = 0) -> list[str]:
    """Every string in ``value``, in order, however Airflow encoded the kwargs."""
    if isinstance(value, str):
        return [value]
    if depth > 8:
        return []
    if isinstance(value, Mapping):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [text for item in value for text in _strings(item, depth + 1)]
    return []


def wrap_defer(task: Any) -> None:
    """Replace ``task.defer`` with a :class:`GatedDefer` around it, once.

    :param task: the operator that runs the try (the task runner's copy).
    """
    if isinstance(vars(task).get("defer"), GatedDefer):
        return
    task.defer = GatedDefer(task.defer)


def install(task: Any) -> None:
    """Put :class:`GatedDeferral` in front of ``task``'s own ``pre_execute`` hook, once.

    Call it before the retry-start check is installed, so the check runs first. A
    mapped task keeps its hook in its partial arguments, which every mapped
    instance is built from.

    :param task: a gated operator or mapped operator, as the cluster policy sees it.
    """
    current = airflow_internals.pre_execute_hook(task)
    if not _holds_deferral(current):
        airflow_internals.set_pre_execute_hook(task, GatedDeferral(then=current))


def _holds_deferral(hook: object) -> bool:
    """Whether ``hook``, or a hook it runs after itself (``then``), is a ``GatedDeferral``."""
    seen = 0
    while hook is not None and seen < 16:  # hooks chain through ``then``; never loop
        if isinstance(hook, GatedDeferral):
            return True
        hook = getattr(hook, "then", None)
        seen += 1
    return False
