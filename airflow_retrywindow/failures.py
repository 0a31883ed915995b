"""What a failed attempt tells us: the outcome is unknown, terminal, or retryable.

A task raises :class:`OutcomeUnknown` when it cannot tell whether its remote job
ran (a lost response, a timeout after submission), and :class:`TerminalFailure`
when repeating cannot help until someone repairs the cause. Users may name more
exception classes of either kind; everything else counts as retryable.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

ExceptionSpec = type[BaseException] | str


class OutcomeUnknown(Exception):
    """The attempt may or may not have taken effect remotely: reconcile before retrying.

    :param message: what was lost, e.g. ``"load job response lost after submission"``.
    :param remote_job_id: the client-chosen id to look the remote job up by, if any.
    """

    def __init__(self, message: str, *, remote_job_id: str | None = None) -> None:
        super().__init__(message)
        self.remote_job_id = remote_job_id


class TerminalFailure(Exception):
    """Repeating the attempt cannot succeed until someone repairs the cause."""


#: failure classes, as the model's task states
UNKNOWN = "unknown"
TERMINAL = "terminal"
RETRYABLE = "retryable"


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

    Unknown is checked first: when an exception is both, the remote outcome is
    still unknown, and that must be reconciled before anything else.

    :param unknown: classes whose failures leave the remote outcome unknown.
    :param terminal: classes whose failures need a repair.
    """

    unknown: tuple[type[BaseException], ...]
    terminal: tuple[type[BaseException], ...]

    @classmethod
    def of(
        cls, *, unknown: Iterable[ExceptionSpec] = (), terminal: Iterable[ExceptionSpec] = ()
    ) -> Classifier:
        """Resolve classes and dotted paths; our own two classes are always included."""
        return cls(
            unknown=_classes(unknown, "unknown", OutcomeUnknown),
            terminal=_classes(terminal, "terminal", TerminalFailure),
        )

    def classify(self, error: BaseException) -> str:
        """``"unknown"``, ``"terminal"`` or ``"retryable"``."""
        if isinstance(error, self.unknown):
            return UNKNOWN
        if isinstance(error, self.terminal):
            return TERMINAL
        return RETRYABLE

    def describe(self) -> dict[str, list[str]]:
        """The classes as dotted paths, for the evidence."""
        return {
            "unknown": [_path(c) for c in self.unknown],
            "terminal": [_path(c) for c in self.terminal],
        }


def _classes(
    specs: Iterable[ExceptionSpec], argument: str, always: type[BaseException]
) -> tuple[type[BaseException], ...]:
    if isinstance(specs, (str, type)) or not isinstance(specs, Iterable):
        raise ValueError(f"{argument} must be a list of exception classes, got {specs!r}")
    listed: Sequence[type[BaseException]] = [_resolve(spec, argument) for spec in specs]
    return tuple(dict.fromkeys([always, *listed]))
