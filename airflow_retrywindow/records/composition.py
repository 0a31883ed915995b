"""Where a decision's window sat among Airflow's other retry policies, and who classified.

Kept with a policy decision, when there is something to say:

* under :data:`CHAIN_KEY`, for a window inside a ``ChainRetryPolicy`` or a list
  (:mod:`~airflow_retrywindow.policies.composition`): its place, the policies asked
  before and after it, and what the ones before said of this failure;
* under :data:`CLASSIFIED_KEY`, when the window asked its classifier (``classify=``,
  :mod:`~airflow_retrywindow.policies.classify`): what it answered, its reason, the
  shortest wait it asked for, how long it took, and whether its answer was used.

The view, the notifier and ``explain`` read both back here and say them in one
line each. Entries stored before these existed have neither. Nothing here imports
Airflow.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_retrywindow.exceptions import RecordError

#: the evidence entry's keys
CHAIN_KEY = "chain"
CLASSIFIED_KEY = "classified"
#: how the class was found (``classified.by``): the window's own classes, the
#: classifier's FAIL or RETRY, or the window's because the classifier gave no usable answer
DECLARED = "declared"
CLASSIFIER = "classifier"
WINDOW = "window"
#: the classifier's answer (``classified.answer``) when it did not answer in time
TIMEOUT = "timeout"


@dataclass(frozen=True)
class ChainPlace:
    """Where the window sat in a chain, and what the policies before it said.

    :param where: its place, e.g. ``retry_policy.policies[1]``.
    :param decided_by: the window's class name.
    :param before: the policies asked before it, ``place: class``.
    :param after: the policies after it.
    :param earlier: what each policy before it said of this failure.
    """

    where: str
    decided_by: str
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    earlier: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """As stored."""
        return {
            "where": self.where,
            "decidedBy": self.decided_by,
            "before": list(self.before),
            "after": list(self.after),
            "earlier": list(self.earlier),
        }

    @classmethod
    def of(cls, stored: object) -> ChainPlace:
        """Read back; raises :class:`RecordError` naming the field and the value."""
        if not isinstance(stored, Mapping):
            raise RecordError(CHAIN_KEY, stored, "must be an object")
        return cls(
            where=_text(stored, "where", CHAIN_KEY),
            decided_by=_text(stored, "decidedBy", CHAIN_KEY),
            before=_texts(stored, "before"),
            after=_texts(stored, "after"),
            earlier=_texts(stored, "earlier"),
        )

    def words(self) -> str:
        """One line: which policy of the chain decided, after what."""
        after = f", after {'; '.join(self.earlier)}" if self.earlier else ""
        return f"Decided by {self.decided_by} at {self.where}{after}."


@dataclass(frozen=True)
class Classification:
    """What the window's classifier made of the failure, and whether it counted.

    :param failure: the class the failure was given: unknown, terminal or retryable.
    :param by: :data:`DECLARED`, :data:`CLASSIFIER` or :data:`WINDOW`.
    :param policy: the classifier's class name, when one was asked.
    :param answer: ``fail``, ``retry``, ``default``, ``raised``, ``invalid`` or ``timeout``.
    :param reason: its reason, or why its answer was not used, safe to store.
    :param floor: the shortest wait it asked for, whole seconds.
    :param seconds: how long it was waited for.
    """

    failure: str
    by: str
    policy: str | None = None
    answer: str | None = None
    reason: str | None = None
    floor: int | None = None
    seconds: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """As stored: the fields that have a value."""
        found: dict[str, Any] = {"failure": self.failure, "by": self.by}
        for key, value in (
            ("policy", self.policy),
            ("answer", self.answer),
            ("reason", self.reason),
            ("floorSeconds", self.floor),
            ("seconds", None if self.seconds is None else round(self.seconds, 3)),
        ):
            if value is not None:
                found[key] = value
        return found

    @classmethod
    def of(cls, stored: object) -> Classification:
        """Read back; raises :class:`RecordError` naming the field and the value."""
        if not isinstance(stored, Mapping):
            raise RecordError(CLASSIFIED_KEY, stored, "must be an object")
        floor, seconds = stored.get("floorSeconds"), stored.get("seconds")
        if floor is not None and (isinstance(floor, bool) or not isinstance(floor, int)):
            raise RecordError(f"{CLASSIFIED_KEY}.floorSeconds", floor, "must be whole seconds")
        if seconds is not None and (
            isinstance(seconds, bool) or not isinstance(seconds, (int, float))
        ):
            raise RecordError(f"{CLASSIFIED_KEY}.seconds", seconds, "must be a number")
        return cls(
            failure=_text(stored, "failure", CLASSIFIED_KEY),
            by=_text(stored, "by", CLASSIFIED_KEY),
            policy=_optional(stored, "policy"),
            answer=_optional(stored, "answer"),
            reason=_optional(stored, "reason"),
            floor=floor,
            seconds=None if seconds is None else float(seconds),
        )

    def words(self) -> str:
        """One line: who classified the failure, and why the window's classes did if they did."""
        if self.by == CLASSIFIER:
            said = f": {self.reason}" if self.reason else ""
            floor = f"; shortest wait {self.floor} s" if self.floor else ""
            return f"Classified {self.failure} by {self.policy} ({self.answer}){said}{floor}."
        return (
            f"{self.policy} gave no usable answer ({self.answer}: {self.reason}); the "
            f"window's own classes decided: {self.failure}."
        )


def composition_words(entry: Mapping[str, Any], mask: Callable[[str], str]) -> str | None:
    """The entry's chain and classifier in words, each made safe by ``mask``, or ``None``.

    A part that cannot be read is said to be unreadable, naming the field and the value.
    """
    said = []
    for key, reader in ((CHAIN_KEY, ChainPlace.of), (CLASSIFIED_KEY, Classification.of)):
        if key not in entry:
            continue
        try:
            said.append(mask(reader(entry[key]).words()))
        except RecordError as error:
            said.append(mask(f"{key} could not be read: {error}"))
    return " ".join(said) or None


def _text(stored: Mapping[str, Any], name: str, key: str) -> str:
    value = stored.get(name)
    if not isinstance(value, str):
        raise RecordError(f"{key}.{name}", value, "must be a string")
    return value


def _optional(stored: Mapping[str, Any], name: str) -> str | None:
    value = stored.get(name)
    if value is not None and not isinstance(value, str):
        raise RecordError(f"{CLASSIFIED_KEY}.{name}", value, "must be a string")
    return value


def _texts(stored: Mapping[str, Any], name: str) -> tuple[str, ...]:
    value = stored.get(name, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise RecordError(f"{CHAIN_KEY}.{name}", value, "must be a list of strings")
    return tuple(value)
