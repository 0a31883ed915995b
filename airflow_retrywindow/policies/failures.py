"""What a failed attempt tells us: the outcome is unknown, terminal, or retryable.

A task raises :class:`OutcomeUnknown` when it cannot tell whether its remote job
ran (a lost response, a timeout after submission), and :class:`TerminalFailure`
when repeating cannot help until someone repairs the cause. Users may name more
exception classes of either kind; everything else counts as retryable.

Airflow's own ``execution_timeout`` raises ``AirflowTaskTimeout`` (a
``BaseException``, not a ``TimeoutError``). A timeout can strike after the remote
job was submitted, so it is an unknown outcome unless the DAG author lists it
explicitly as ``terminal`` or ``retryable``; so is a trigger that crashed or timed
out (``TaskDeferralError``, ``TaskDeferralTimeout``). An exception is classified with the
exceptions it was raised from (``__cause__``) or while handling
(``__context__``), and with every member of an exception group (``asyncio.TaskGroup``,
anyio and trio raise them), nested groups included: the most cautious class
found wins. What is too deep or too wide to read to the end is unknown: an
unread link could be a lost response.
"""

from __future__ import annotations

import builtins
import importlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from airflow_retrywindow.exceptions import OutcomeUnknown, TerminalFailure
from airflow_retrywindow.records.evidence import RETRYABLE, TERMINAL, UNKNOWN

ExceptionSpec = type[BaseException] | str


#: exceptions whose outcome is unknown unless the DAG author says otherwise: Airflow's
#: execution timeout, and a trigger that crashed or timed out while it watched a job
#: (the job may run on; a trigger that reports a failure raises the provider's own
#: ``TriggerEndedWithFailure``, a confirmed, retryable failure)
DEFAULT_UNKNOWN = (
    "airflow.sdk.exceptions.AirflowTaskTimeout",
    "airflow.sdk.exceptions.TaskDeferralError",
    "airflow.sdk.exceptions.TaskDeferralTimeout",
)
#: exceptions no retry can change, terminal unless the DAG author says otherwise: a template
#: that does not render (an undefined variable, such as ``ds`` in a run without a logical
#: date, or a syntax error) fails the same way on every try
DEFAULT_TERMINAL = (
    "jinja2.exceptions.UndefinedError",
    "jinja2.exceptions.TemplateSyntaxError",
)
#: how many distinct exceptions of a chain or group are read; more is an unknown outcome
MAX_LINKS = 256


def _resolve(spec: object, argument: str) -> type[BaseException]:
    if isinstance(spec, type) and issubclass(spec, BaseException):
        return spec
    if not isinstance(spec, str) or "." not in spec:
        raise ValueError(
            f"{argument} entries must be exception classes or dotted paths such as "
            f"'requests.exceptions.Timeout', got {spec!r}"
        )
    module_name, _, name = spec.rpartition(".")
    try:
        found = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError):
        raise ValueError(f"{argument}: cannot import the exception class {spec!r}") from None
    if not (isinstance(found, type) and issubclass(found, BaseException)):
        raise ValueError(f"{argument}: {spec!r} is not an exception class")
    return found


def _path(cls: type[BaseException]) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


@dataclass(frozen=True)
class Classifier:
    """Sorts an exception into unknown, terminal or retryable.

    Each exception of the chain gets the first class that lists it, in the order
    unknown, terminal, retryable, then the default unknowns (Airflow's task
    timeout, a trigger that crashed) and the default terminals (a template that
    does not render). The chain then takes the most cautious class any link has: unknown
    before terminal before retryable. An unknown outcome must be reconciled
    before anything else, whatever else went wrong.

    :param unknown: classes whose failures leave the remote outcome unknown.
    :param terminal: classes whose failures need a repair.
    :param retryable: classes the DAG author declares plainly retryable, e.g. to
        treat Airflow's task timeout as retryable on purpose.
    :param default_unknown: classes unknown unless listed in another class.
    :param default_terminal: classes terminal unless listed in another class.
    """

    unknown: tuple[type[BaseException], ...]
    terminal: tuple[type[BaseException], ...]
    retryable: tuple[type[BaseException], ...] = ()
    default_unknown: tuple[type[BaseException], ...] = ()
    default_terminal: tuple[type[BaseException], ...] = ()

    @classmethod
    def of(
        cls,
        *,
        unknown: Iterable[ExceptionSpec] = (),
        terminal: Iterable[ExceptionSpec] = (),
        retryable: Iterable[ExceptionSpec] = (),
    ) -> Classifier:
        """Resolve classes and dotted paths; our own two classes are always included."""
        return cls(
            unknown=_classes(unknown, "unknown", OutcomeUnknown),
            terminal=_classes(terminal, "terminal", TerminalFailure),
            retryable=_classes(retryable, "retryable", None),
            default_unknown=_importable(DEFAULT_UNKNOWN),
            default_terminal=_importable(DEFAULT_TERMINAL),
        )

    def classify(self, error: BaseException) -> str:
        """``"unknown"``, ``"terminal"`` or ``"retryable"`` for ``error`` and its chain."""
        return self.declared(error) or RETRYABLE

    def declared(self, error: BaseException) -> str | None:
        """The most cautious class the listed classes give ``error`` and its chain.

        ``None`` when no class lists any of it: a failure a classifier
        (``classify=``) may name; without one it is retryable.
        """
        links, complete = linked(error)
        if not complete:
            return UNKNOWN
        found = {self._class_of(link) for link in links}
        for failure in (UNKNOWN, TERMINAL, RETRYABLE):
            if failure in found:
                return failure
        return None

    def _class_of(self, error: BaseException) -> str | None:
        if isinstance(error, self.unknown):
            return UNKNOWN
        if isinstance(error, self.terminal):
            return TERMINAL
        if isinstance(error, self.retryable):
            return RETRYABLE
        if isinstance(error, self.default_unknown):
            return UNKNOWN
        if isinstance(error, self.default_terminal):
            return TERMINAL
        return None

    def describe(self) -> dict[str, list[str]]:
        """The classes as dotted paths, for the evidence."""
        return {
            "unknown": [_path(c) for c in self.unknown],
            "terminal": [_path(c) for c in self.terminal],
            "retryable": [_path(c) for c in self.retryable],
            "defaultUnknown": [_path(c) for c in self.default_unknown],
            "defaultTerminal": [_path(c) for c in self.default_terminal],
        }


def linked(error: BaseException) -> tuple[list[BaseException], bool]:
    """``error`` and every exception linked to it, each once, and whether that is all.

    Links are the exception it was raised from (``__cause__``), the one it was
    raised while handling (``__context__``) and, for an exception group, its
    members. At most :data:`MAX_LINKS` are read; ``False`` says some were left.
    """
    links: list[BaseException] = []
    seen: set[int] = set()
    pending: list[BaseException] = [error]
    while pending:
        link = pending.pop()
        if id(link) in seen:
            continue  # chains and groups can loop
        if len(links) == MAX_LINKS:
            return links, False
        seen.add(id(link))
        links.append(link)
        pending.extend(_linked_to(link))
    return links, True


def _linked_to(error: BaseException) -> list[BaseException]:
    found = [e for e in (error.__cause__, error.__context__) if e is not None]
    members = getattr(error, "exceptions", None) if _is_group(error) else None
    if isinstance(members, (tuple, list)):
        found.extend(m for m in members if isinstance(m, BaseException))
    return found


def _is_group(error: BaseException) -> bool:
    # BaseExceptionGroup is built in from 3.11; on 3.10 only its backport raises groups
    group = getattr(builtins, "BaseExceptionGroup", None)
    if group is not None:
        return isinstance(error, group)
    return type(error).__name__ in ("ExceptionGroup", "BaseExceptionGroup")


def _importable(paths: Sequence[str]) -> tuple[type[BaseException], ...]:
    # outside an Airflow worker the class may not exist; then nothing raises it either
    found = []
    for path in paths:
        try:
            found.append(_resolve(path, "default_unknown"))
        except ValueError:
            continue
    return tuple(found)


def _classes(
    specs: Iterable[ExceptionSpec], argument: str, always: type[BaseException] | None
) -> tuple[type[BaseException], ...]:
    if isinstance(specs, (str, type)) or not isinstance(specs, Iterable):
        raise ValueError(f"{argument} must be a list of exception classes, got {specs!r}")
    listed: Sequence[type[BaseException]] = [_resolve(spec, argument) for spec in specs]
    return tuple(dict.fromkeys([always, *listed] if always else listed))
