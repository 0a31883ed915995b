"""``RetryWindowNotifier``: a notification that carries the retry window's decision.

Usable wherever Airflow takes a notifier or a callback (``on_failure_callback``,
``on_retry_callback``, ``on_success_callback`` of a gate, ...). It finds the
decision the try ended with (:mod:`~airflow_retrywindow.notifications.lookup`),
composes the message (:mod:`~airflow_retrywindow.notifications.message`) and hands
it to the channel the team already uses: any Airflow notifier (the SMTP
provider's ``SmtpNotifier``, Slack's, ...) or a plain callable.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

import pendulum
from airflow.sdk import BaseNotifier
from markupsafe import Markup

from airflow_retrywindow.exceptions import InvalidNotifier
from airflow_retrywindow.labels import UTC_SHOWN
from airflow_retrywindow.notifications.lookup import Found, Missing, find
from airflow_retrywindow.notifications.message import (
    Impact,
    Message,
    TaskTry,
    compose,
    compose_missing,
)
from airflow_retrywindow.notifications.notice_variable import NoticeStore, NoticeVariable
from airflow_retrywindow.notifications.outage import Outage, settle
from airflow_retrywindow.redaction import describe_exception, safe_text

if TYPE_CHECKING:
    from airflow.sdk import Context

#: a plain callable channel: ``(message, context) -> None``
MessageCallable = Callable[[Message, Any], object]
#: the message's parts a wrapped notifier's attribute can be filled with
PARTS = ("subject", "text", "html")
#: filled by default when the wrapped notifier has them and leaves them unset (SmtpNotifier)
DEFAULT_FILL = {"subject": "subject", "html_content": "html"}
#: the context key holding the message while the wrapped notifier renders its templates
CONTEXT_KEY = "retry_window"


class RetryWindowNotifier(BaseNotifier):
    """Send the retry window's decision through any Airflow notifier or callable.

    The message names the DAG, the task and the decision, and holds the reason,
    the status update (confirmed state, what is still unknown, the next action,
    when the next evidence is due), the unit of work and, for
    ``deadline-infeasible``, the impact to report instead of retrying. When no
    decision can be found it still sends, saying so and that the retry is to be
    treated as refused. Every part has passed Airflow's secrets masker.

    With an Airflow notifier, a copy of it is used for each message: the parts
    named by ``fill`` are set to the message, and its own templates can use
    ``{{ retry_window.subject }}``, ``{{ retry_window.text }}``,
    ``{{ retry_window.html }}``, ``{{ retry_window.decision }}`` and
    ``{{ retry_window.reason }}``. The message is set after the notifier's
    templates are rendered, so text from a failure is never read as a template.

    .. code-block:: python

        on_failure_callback = RetryWindowNotifier(
            SmtpNotifier(to="oncall@example.com", from_email="airflow@example.com"),
            work_unit={"business_date": "{{ ds }}"},
            affected="the 40 funds of the positions file",
            alternative="deliver yesterday's file flagged as stale",
        )

    :param notifier: an Airflow notifier instance, or a callable taking
        ``(message, context)``.
    :param work_unit: the unit of work (business date, partition, remote job id,
        ...), a mapping or text; templated. A gate's record names its own.
    :param affected: who receives the delivery late, for a ``deadline-infeasible``
        report; templated.
    :param alternative: the operational alternative, for a ``deadline-infeasible``
        report; templated.
    :param fill: the wrapped notifier's attributes to set, each to a part of the
        message (``subject``, ``text`` or ``html``), e.g. ``{"text": "text"}`` for
        Slack. Default: ``subject`` and ``html_content`` when the notifier has them
        and leaves them ``None``, as ``SmtpNotifier`` does.
    :param notices: where the outage of a pool last told is kept, so that a pool's
        outage is told once, not once per task (see ``docs/notifications.md``).
        Default: the Airflow Variable ``retry_window_notice_<pool>``.
    """

    template_fields = ("work_unit", "affected", "alternative")

    def __init__(
        self,
        notifier: BaseNotifier | MessageCallable,
        *,
        work_unit: Mapping[str, Any] | str | None = None,
        affected: str | None = None,
        alternative: str | None = None,
        fill: Mapping[str, str] | None = None,
        notices: NoticeStore | None = None,
    ) -> None:
        super().__init__()
        self.notifier = _notifier_argument(notifier)
        self.fill = _fill_argument(fill, self.notifier)
        self.work_unit = _work_unit_argument(work_unit)
        self.affected = _text_argument(affected, "affected")
        self.alternative = _text_argument(alternative, "alternative")
        self.notices: NoticeStore = notices if notices is not None else NoticeVariable()

    def __call__(self, *args: Any) -> None:
        # Airflow renders a notifier's templates in place, for good; rendering a copy
        # keeps this one correct for the next try that runs in the same process
        BaseNotifier.__call__(copy.copy(self), *args)

    def notify(self, context: Context) -> None:
        """Compose the message for the try that just ended and send it.

        A failure while its breaker pool is held is sent only when the pool's outage was
        not told yet, or as the outage's first refusal for a deadline.
        """
        found = find(context)
        outage = found.outage if isinstance(found, Found) else None
        if outage is not None and not self._tells(outage, context):
            return
        message = self.compose(context, found)
        self.log.info("Retry window notification: %s", message.subject)
        self.deliver(message, context)

    def _tells(self, outage: Outage, context: Mapping[str, Any]) -> bool:
        """Whether this task instance tells ``outage``; writes the notice entry when due."""
        by = _task_try(context)
        label = f"{by.name} ({by.run_id}) try {by.try_number}"
        try:
            kept = self.notices.read(outage.pool)
        except Exception as error:
            # a duplicate is better than a silenced outage
            self.log.warning(
                "Retry window: %s could not be read (%s); the notice is sent",
                outage.variable,
                describe_exception(error),
            )
            kept = None
        try:
            settled = settle(kept, outage, by=label)
        except Exception:
            self.log.exception("Could not settle whether %s was told; it is sent", outage.name)
            return True
        if settled.entry is not None:
            try:
                self.notices.write(outage.pool, settled.entry)
            except Exception as error:
                self.log.warning(
                    "Retry window: %s could not be written (%s); the next decision of this "
                    "outage may tell it again",
                    outage.variable,
                    describe_exception(error),
                )
        self.log.info(
            "Retry window outage notice %s: %s",
            "sent" if settled.send else "not sent",
            settled.why,
        )
        return settled.send

    def compose(self, context: Mapping[str, Any], found: Found | Missing | None = None) -> Message:
        """The message for the callback's try. Never raises: at worst it says nothing was found.

        :param context: the task context Airflow hands the callback.
        :param found: the decision already found for it, if any.
        """
        task = _task_try(context)
        failure = _failure(context.get("exception"))
        try:
            found = found if found is not None else find(context)
            if isinstance(found, Found):
                return compose(
                    task,
                    found.notices,
                    work_unit=self.work_unit or found.work_unit or _data_interval(context),
                    impact=Impact(affected=self.affected, alternative=self.alternative),
                    evidence=found.evidence,
                    override=found.override,
                    outage=found.outage,
                )
            return _missing(task, found, failure, self.work_unit or _data_interval(context))
        except Exception as error:
            self.log.exception("Could not compose the retry window message")
            why = Missing(
                why=f"the message could not be composed ({describe_exception(error)})",
                consequence="nothing here says a retry is safe; treat any retry as refused",
            )
            return _missing(task, why, failure, self.work_unit)

    def deliver(self, message: Message, context: Mapping[str, Any]) -> None:
        """Hand ``message`` to the wrapped notifier or callable.

        :param message: the composed message.
        :param context: the task context, with the message under ``retry_window``.
        """
        if not isinstance(self.notifier, BaseNotifier):
            self.notifier(message, context)
            return
        parts = {
            "subject": message.subject,
            "text": message.text,
            # Markup: an autoescaping template environment keeps it as HTML
            "html": Markup(message.html),
            "decision": message.decision,
            "reason": message.reason,
        }
        # Airflow's Context is a TypedDict; the extra key is what the templates read
        sending = cast("Context", {**context, CONTEXT_KEY: parts})
        sender = copy.copy(self.notifier)
        sender.render_template_fields(sending)
        for attribute, part in _filled(self.fill, sender).items():
            setattr(sender, attribute, parts[part])
        sender.notify(sending)


def _missing(task: TaskTry, missing: Missing, failure: str | None, work_unit: object) -> Message:
    return compose_missing(
        task,
        why=missing.why,
        consequence=missing.consequence,
        failure=failure,
        work_unit=work_unit,
    )


def _task_try(context: Mapping[str, Any]) -> TaskTry:
    """The try the callback is about; placeholders where the context has nothing."""
    ti = context.get("ti")
    run = context.get("dag_run")
    dag = context.get("dag")
    run_id = getattr(run, "run_id", None) or context.get("run_id") or "unknown"
    dag_id = getattr(ti, "dag_id", None) or getattr(dag, "dag_id", None) or "unknown"
    try_number = getattr(ti, "try_number", None)
    map_index = getattr(ti, "map_index", None)
    return TaskTry(
        dag_id=str(dag_id),
        run_id=str(run_id),
        task_id=str(getattr(ti, "task_id", None) or "unknown"),
        try_number=try_number if isinstance(try_number, int) else None,
        map_index=map_index if isinstance(map_index, int) else -1,
    )


def _failure(error: object) -> str | None:
    if isinstance(error, BaseException):
        return describe_exception(error)
    if isinstance(error, str) and error:
        return safe_text(error)
    return None


def _data_interval(context: Mapping[str, Any]) -> str | None:
    """The run's data interval: the unit of work as far as Airflow knows it."""
    run = context.get("dag_run")
    start = getattr(run, "data_interval_start", None)
    end = getattr(run, "data_interval_end", None)
    if start is None or end is None:
        return None
    return f"data interval {_utc(start)} to {_utc(end)}"


def _utc(when: Any) -> str:
    return str(pendulum.instance(when).in_timezone("UTC").format(UTC_SHOWN))


def _filled(fill: Mapping[str, str] | None, sender: BaseNotifier) -> dict[str, str]:
    """The attributes to set on this copy of the wrapped notifier."""
    if fill is not None:
        return dict(fill)
    return {
        attribute: part
        for attribute, part in DEFAULT_FILL.items()
        if hasattr(sender, attribute) and getattr(sender, attribute) is None
    }


# -- arguments --------------------------------------------------------------------------


def _notifier_argument(value: object) -> BaseNotifier | MessageCallable:
    if isinstance(value, BaseNotifier):
        return value
    if isinstance(value, type):
        raise InvalidNotifier(
            f"notifier must be a notifier instance or a callable of (message, context), "
            f"got the class {value.__name__}; call it, e.g. {value.__name__}(...)"
        )
    if not callable(value):
        raise InvalidNotifier(
            "notifier must be an Airflow notifier (e.g. SmtpNotifier(...)) or a callable of "
            f"(message, context), got {value!r}"
        )
    return value


def _fill_argument(value: object, notifier: object) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidNotifier(
            f"fill must be a mapping of the notifier's attribute to a part, got {value!r}"
        )
    if not isinstance(notifier, BaseNotifier):
        raise InvalidNotifier(
            "fill applies to an Airflow notifier; a callable receives the whole message"
        )
    for attribute, part in value.items():
        if part not in PARTS:
            raise InvalidNotifier(
                f"fill[{attribute!r}] must be one of {', '.join(PARTS)}, got {part!r}"
            )
        if not isinstance(attribute, str) or not hasattr(notifier, attribute):
            raise InvalidNotifier(
                f"fill names {attribute!r}, which {type(notifier).__name__} does not have"
            )
    return dict(value)


def _work_unit_argument(value: object) -> Mapping[str, Any] | str | None:
    if value is None or isinstance(value, (str, Mapping)):
        return value
    raise InvalidNotifier(f"work_unit must be a mapping, a text or None, got {value!r}")


def _text_argument(value: object, name: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise InvalidNotifier(f"{name} must be a text or None, got {value!r}")
