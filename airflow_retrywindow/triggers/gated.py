"""``GatedTrigger``: a task's trigger, whose failure report goes through the retry policy.

A trigger may end its task itself. When it yields ``TaskFailedEvent``, Airflow's
triggerer puts the task up for retry from its retry count alone
(``airflow.models.trigger.handle_event_submit``): ``RetryWindowPolicy`` is never
asked. When a trigger *raises*, Airflow sends the try to a worker to fail
(``next_method="__fail__"``, ``TaskDeferralError``) and the retry policy decides.

A gated task defers to this wrapper instead of its own trigger. In the
triggerer it runs the task's trigger and passes every event through unchanged,
except ``TaskFailedEvent``: that one becomes :class:`TriggerEndedWithFailure`,
raised, so the try fails in a worker and the model decides its retry, with
evidence like any other failure.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import AsyncIterator
from typing import Any, TypeGuard

from airflow.sdk import TaskInstanceState
from airflow.triggers.base import BaseTaskEndEvent, BaseTrigger, TriggerEvent

from airflow_retrywindow import airflow_internals

log = logging.getLogger(__name__)

#: where the triggerer imports the wrapper from
CLASSPATH = f"{__name__}.GatedTrigger"


class TriggerEndedWithFailure(Exception):
    """The trigger ended the task with ``TaskFailedEvent``; a worker fails the try instead.

    Airflow hands its traceback to the worker that fails the try, where the
    provider's ``pre_execute`` hook raises it again for the retry policy
    (:func:`airflow_retrywindow.triggers.deferral.reported_failure`). A DAG author
    may classify it like any exception, e.g. ``unknown=[TriggerEndedWithFailure]``
    when the trigger also reports failures whose remote outcome it could not see.

    :param classpath: the trigger that reported the failure.
    """

    def __init__(self, classpath: str) -> None:
        super().__init__(
            f"the trigger {classpath} ended the task with a failure; "
            "the retry window gate decides its retry"
        )
        self.classpath = classpath

    def __reduce__(self) -> tuple[type[TriggerEndedWithFailure], tuple[str]]:
        return (TriggerEndedWithFailure, (self.classpath,))


class GatedTrigger(BaseTrigger):
    """Run the trigger at ``classpath``; raise its ``TaskFailedEvent`` instead of yielding it.

    Build it with :meth:`around` in the worker; the triggerer builds it from what
    :meth:`serialize` returned. What the triggerer sets on this trigger (task
    instance, trigger id, timeout) reaches the inner trigger before it runs, and
    ``cleanup`` and ``on_kill`` are passed on.

    :param classpath: the inner trigger's class, e.g.
        ``"airflow.providers.standard.triggers.temporal.DateTimeTrigger"``.
    :param kwargs: the inner trigger's keyword arguments, as its ``serialize()`` returned them.
    """

    def __init__(self, classpath: str, kwargs: dict[str, Any]) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        if not isinstance(classpath, str) or "." not in classpath:
            raise TypeError(
                f"classpath must be a dotted path to a trigger class, got {classpath!r}"
            )
        self.classpath = classpath
        self.kwargs = dict(kwargs)
        # built lazily: the triggerer builds triggers in its main loop, where an
        # import error would not fail this trigger alone
        self._inner: BaseTrigger | None = None

    @classmethod
    def around(cls, trigger: BaseTrigger) -> GatedTrigger:
        """``trigger`` wrapped, or itself when it is a ``GatedTrigger`` already.

        :param trigger: the trigger the task defers to.
        """
        if isinstance(trigger, GatedTrigger):
            return trigger
        classpath, kwargs = trigger.serialize()
        gated = cls(classpath=classpath, kwargs=kwargs)
        gated._inner = trigger
        # the worker reads it when it picks the triggerer queue: the inner trigger's answer
        gated.supports_triggerer_queue = bool(getattr(trigger, "supports_triggerer_queue", True))
        return gated

    @property
    def inner(self) -> BaseTrigger:
        """The task's own trigger, built from ``classpath`` and ``kwargs`` on first use."""
        if self._inner is None:
            self._inner = _trigger_class(self.classpath)(**self.kwargs)
        return self._inner

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """This wrapper's classpath and the inner trigger's (classpath, kwargs)."""
        if self._inner is not None:
            # the inner trigger's current arguments, exactly as it would hand them to Airflow
            classpath, kwargs = self._inner.serialize()
        else:
            classpath, kwargs = self.classpath, self.kwargs
        return CLASSPATH, {"classpath": classpath, "kwargs": dict(kwargs)}

    def render_template_fields(self, context: Any, jinja_env: Any = None) -> None:
        """Render the inner trigger's template fields (Airflow calls this on the outer one)."""
        self._prepared().render_template_fields(context=context, jinja_env=jinja_env)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """The inner trigger's events; its ``TaskFailedEvent`` raised, after its XComs are kept."""
        inner = self._prepared()
        async for event in inner.run():
            if _fails_the_task(event):
                await self._keep_xcoms(event)
                # a raise, not an event: Airflow then sends the try to a worker to
                # fail, where the retry policy decides. Nothing may be yielded
                # before it, or Airflow would not fail the trigger.
                raise TriggerEndedWithFailure(self.classpath)
            yield event

    async def cleanup(self) -> None:
        """Let the inner trigger release what it holds."""
        if self._inner is not None:
            await self._inner.cleanup()

    async def on_kill(self) -> None:
        """Let the inner trigger stop its external work when a person acts on the task."""
        if self._inner is not None:
            await self._inner.on_kill()

    def _prepared(self) -> BaseTrigger:
        """The inner trigger, given what the triggerer set on this one."""
        inner = self.inner
        if self.task_instance is not None:
            inner.task_instance = self.task_instance
        inner.trigger_id = self.trigger_id
        for name in ("triggerer_job_id", "timeout_after"):
            if hasattr(self, name):
                setattr(inner, name, getattr(self, name))
        return inner

    async def _keep_xcoms(self, event: BaseTaskEndEvent) -> None:
        """Push the failed event's XComs, as Airflow does when such a task ends failed.

        A retry clears them when its try starts, as it clears every XCom of the
        task instance; a refused retry keeps them.
        """
        if not event.xcoms:
            return
        ti = self.task_instance
        if ti is None:
            log.warning(
                "No task instance: the failed event's XComs %s are dropped", list(event.xcoms)
            )
            return
        xcom = airflow_internals.xcom_backend()
        for key, value in event.xcoms.items():
            try:
                await xcom.aset(
                    key,
                    value,
                    dag_id=ti.dag_id,
                    task_id=ti.task_id,
                    run_id=ti.run_id,
                    map_index=ti.map_index,
                )
            except Exception:
                # the failure must still reach the worker; the XCom is only lost
                log.exception("Could not push the failed event's XCom %r", key)


def _trigger_class(classpath: str) -> type[BaseTrigger]:
    """The trigger class at ``classpath``; raises naming it when it cannot be imported."""
    module_name, _, name = classpath.rpartition(".")
    try:
        found = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as error:
        raise ImportError(
            f"the trigger class {classpath!r} cannot be imported in the triggerer ({error}); "
            "install the package that defines it where the triggerer runs"
        ) from error
    if not (isinstance(found, type) and issubclass(found, BaseTrigger)):
        raise TypeError(f"{classpath!r} is not a trigger class (a BaseTrigger subclass)")
    return found


def _fails_the_task(event: TriggerEvent) -> TypeGuard[BaseTaskEndEvent]:
    return (
        isinstance(event, BaseTaskEndEvent)
        # the event's state is the core's enum, the SDK's another: both are their values
        and event.task_instance_state == TaskInstanceState.FAILED.value
    )
