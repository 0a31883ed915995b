"""What a failed attempt tells us: the outcome is unknown, terminal, or retryable.

A task raises :class:`OutcomeUnknown` when it cannot tell whether its remote job
ran (a lost response, a timeout after submission), and :class:`TerminalFailure`
when repeating cannot help until someone repairs the cause. Users may name more
exception classes of either kind; everything else counts as retryable.

Airflow's own ``execution_timeout`` raises ``AirflowTaskTimeout`` (a
``BaseException``, not a ``TimeoutError``). A timeout can strike after the remote
job was submitted, so it is an unknown outcome unless the DAG author lists it
explicitly as ``terminal`` or ``retryable``. An exception is classified with the
exceptions it was raised from (``__cause__``) or while handling
(``__context__``): the most cautious class in the chain wins.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from airflow_retrywindow.exceptions import OutcomeUnknown, TerminalFailure

ExceptionSpec = type[BaseException] | str


#: failure classes, as the model's task states
UNKNOWN = "unknown"
TERMINAL = "terminal"
RETRYABLE = "retryable"
#: exceptions whose outcome is unknown unless the DAG author says otherwise
DEFAULT_UNKNOWN = ("airflow.sdk.exceptions.AirflowTaskTimeout",)
#: how many links of a ``__cause__``/``__context__`` chain are read
MAX_CHAIN = 32


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
    timeout). The chain then takes the most cautious class any link has: unknown
    before terminal before retryable. An unknown outcome must be reconciled
    before anything else, whatever else went wrong.

    :param unknown: classes whose failures leave the remote outcome unknown.
    :param terminal: classes whose failures need a repair.
    :param retryable: classes the DAG author declares plainly retryable, e.g. to
        treat Airflow's task timeout as retryable on purpose.
    :param default_unknown: classes unknown unless listed in another class.
    """

    unknown: tuple[type[BaseException], ...]
    terminal: tuple[type[BaseException], ...]
    retryable: tuple[type[BaseException], ...] = ()
    default_unknown: tuple[type[BaseException], ...] = ()

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
        )

    def classify(self, error: BaseException) -> str:
        """``"unknown"``, ``"terminal"`` or ``"retryable"`` for ``error`` and its chain."""
        found = {self._class_of(link) for link in chain(error)}
        for failure in (UNKNOWN, TERMINAL):
            if failure in found:
                return failure
        return RETRYABLE

    def _class_of(self, error: BaseException) -> str | None:
        if isinstance(error, self.unknown):
            return UNKNOWN
        if isinstance(error, self.terminal):
            return TERMINAL
        if isinstance(error, self.retryable):
            return RETRYABLE
        if isinstance(error, self.default_unknown):
            return UNKNOWN
        return None

    def describe(self) -> dict[str, list[str]]:
        """The classes as dotted paths, for the evidence."""
        return {
            "unknown": [_path(c) for c in self.unknown],
            "terminal": [_path(c) for c in self.terminal],
            "retryable": [_path(c) for c in self.retryable],
            "defaultUnknown": [_path(c) for c in self.default_unknown],
        }


def chain(error: BaseException) -> list[BaseException]:
    """``error`` and the exceptions it was raised from or while handling, each once."""
    links: list[BaseException] = []
    pending: list[BaseException] = [error]
    while pending and len(links) < MAX_CHAIN:
        link = pending.pop(0)
        if any(link is seen for seen in links):
            continue  # chains can loop
        links.append(link)
        pending.extend(e for e in (link.__cause__, link.__context__) if e is not None)
    return links


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
