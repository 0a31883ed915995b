"""A held retry runs no callback: the retry-start check hands it to the task's notifier here.

The check (:func:`airflow_retrywindow.dependency.check.dependency_verdict`) calls
:func:`tell_hold` after it holds a retry. When the task carries a
:class:`~airflow_retrywindow.RetryWindowNotifier` among its failure or retry
callbacks, that notifier tells the pool's outage, once per outage
(:mod:`.outage`). Nothing here imports the notifier: it is found by the method
it offers, so the check's module does not depend on the notifications' own.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

log = logging.getLogger(__name__)

#: the callbacks searched for a notifier, in this order: refusals go to the first
CALLBACKS = ("on_failure_callback", "on_retry_callback")
#: the method a notifier offers to tell a held retry's outage
TELL_HOLD = "tell_hold"


def tell_hold(context: Mapping[str, Any]) -> None:
    """Hand the held try's decision to the first notifier of its task that tells holds.

    Never raises: a notice that cannot be sent never changes the hold.

    :param context: the held try's task context.
    """
    try:
        for callback in _callbacks(context["task"]):
            tell = getattr(callback, TELL_HOLD, None)
            if callable(tell):
                tell(context)
                return
    except Exception:
        log.exception("Could not hand the held retry to the task's notifier")


def _callbacks(task: Any) -> Iterator[object]:
    for name in CALLBACKS:
        value = getattr(task, name, None)
        if isinstance(value, list | tuple):
            yield from value
        elif value is not None:
            yield value
