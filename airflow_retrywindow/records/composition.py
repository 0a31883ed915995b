"""Where a task's window sits among Airflow's other retry policies, and where a decision's sat.

**Found** from a task's settings, for the policy, the gate and the notifier alike: only
the exact ``ChainRetryPolicy`` (the SDK's from Airflow 3.4, common.compat's on 3.3) and
the task's own list (3.4 asks it as a chain) are opened as chains, asked in order.
:func:`placement_of` finds the window a chain shows; :func:`windows_within` one anything
else holds, which :mod:`airflow_retrywindow.policies.composition` refuses.

**Kept** with a policy decision, when there is something to say:

* under :data:`CHAIN_KEY`, for a window inside a ``ChainRetryPolicy`` or a list: its
  place, the policies asked before and after it, and what the ones before said of
  this failure;
* under :data:`CLASSIFIED_KEY`, when the window asked its classifier (``classify=``,
  :mod:`~airflow_retrywindow.policies.classify`): what it answered, its reason, the
  shortest wait it asked for, how long it took, and whether its answer was used.

The view, the notifier and ``explain`` read both back here and say them in one
line each. Entries stored before these existed have neither. Nothing here imports
Airflow: the window's and the chain's classes are looked up on loaded modules.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from types import BuiltinMethodType, FunctionType, MethodType, ModuleType
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

#: the public modules naming ``ChainRetryPolicy``: the SDK's (Airflow 3.4) and common.compat's,
#: which hands out the SDK's class where it has one, else its backport
CHAIN_MODULES = ("airflow.sdk", "airflow.providers.common.compat.sdk")
#: the module of ``RetryWindowPolicy``, loaded wherever one exists
WINDOW_MODULE = "airflow_retrywindow.policies.retry_policy"
#: how many steps (an attribute, an item, a callable's part) below a policy a window is
#: searched for: the search's one bound; each object is opened once
SEARCH_DEPTH = 16
#: what is never opened: it holds no policy of a task's own
_LEAVES = (str, bytes, int, float, complex, type, ModuleType, type(None))
#: the parts of a callable that may hold a window, besides its attributes
_PARTS: tuple[tuple[type | tuple[type, ...], tuple[str, ...]], ...] = (
    (partial, ("func", "args", "keywords")),
    ((MethodType, BuiltinMethodType), ("__self__", "__func__")),
    (FunctionType, ("__defaults__", "__kwdefaults__")),
)


@dataclass(frozen=True)
class Step:
    """One policy a chain asks, where it sits, in the order the chain asks it.

    :param where: its place, as the DAG author wrote it, e.g. ``retry_policy.policies[1]``.
    :param policy: the policy.
    """

    where: str
    policy: Any

    @property
    def name(self) -> str:
        """The policy's class, as the chain names it in its reasons."""
        return type(self.policy).__name__


@dataclass(frozen=True)
class Placement:
    """The window of a task and the policies a chain asks around it.

    :param window: the ``RetryWindowPolicy``.
    :param where: its place in the task's ``retry_policy``.
    :param before: the policies asked before it, in order.
    :param after: the policies asked after it, in order.
    """

    window: Any
    where: str
    before: tuple[Step, ...] = ()
    after: tuple[Step, ...] = ()

    @property
    def chained(self) -> bool:
        """Whether the window is one policy of a chain rather than the task's own."""
        return bool(self.before or self.after) or self.where != "retry_policy"

    def place(self, earlier: list[str]) -> ChainPlace:
        """Where the window sits and what the earlier policies said, as kept in the evidence."""
        return ChainPlace(
            where=self.where,
            decided_by=type(self.window).__name__,
            before=tuple(f"{step.where}: {step.name}" for step in self.before),
            after=tuple(f"{step.where}: {step.name}" for step in self.after),
            earlier=tuple(earlier),
        )


def is_window(policy: object) -> bool:
    """Whether ``policy`` is a ``RetryWindowPolicy`` (or a subclass)."""
    window = getattr(sys.modules.get(WINDOW_MODULE), "RetryWindowPolicy", None)
    return window is not None and isinstance(policy, window)


def chain_classes() -> tuple[type, ...]:
    """Every ``ChainRetryPolicy`` class loaded: the SDK's, the backport's, or both."""
    found: list[type] = []
    for name in CHAIN_MODULES:
        chain = getattr(sys.modules.get(name), "ChainRetryPolicy", None)
        if isinstance(chain, type) and chain not in found:
            found.append(chain)
    return tuple(found)


def steps_of(policy: object, where: str = "retry_policy") -> list[Step]:
    """The policies a task's ``retry_policy`` asks, in order, exact chains within it opened.

    A list only as the task's own: Airflow 3.4 asks that as a chain, and no chain takes one.
    """
    if not isinstance(policy, (list, tuple)):
        return _chain_steps(policy, where)
    members = enumerate(policy)
    return [s for index, inner in members for s in _chain_steps(inner, f"{where}[{index}]")]


def _chain_steps(policy: object, where: str) -> list[Step]:
    if type(policy) not in chain_classes():  # a subclass may ask its policies in any order
        return [Step(where, policy)]
    members = enumerate(getattr(policy, "policies", ()))
    return [
        s for index, inner in members for s in _chain_steps(inner, f"{where}.policies[{index}]")
    ]


def placement_of(task: Any) -> Placement | None:
    """Where the task's ``RetryWindowPolicy`` sits, or ``None`` when a chain shows none.

    With more than one, the first the chain asks (the parse-time check refuses that).
    """
    policy = getattr(task, "retry_policy", None)
    if policy is None:
        return None  # most tasks: no need to look further
    if is_window(policy):
        return Placement(policy, "retry_policy")
    steps = steps_of(policy)
    for index, step in enumerate(steps):
        if is_window(step.policy):
            return Placement(
                step.policy, step.where, tuple(steps[:index]), tuple(steps[index + 1 :])
            )
    return None


def window_of(task: Any) -> Any:
    """The task's ``RetryWindowPolicy``, or ``None``: the one its chain shows, else the first
    anything in its ``retry_policy`` holds (which the parse-time check refuses)."""
    found = placement_of(task)
    if found is not None:
        return found.window
    policy = getattr(task, "retry_policy", None)
    return next((window for _, window in windows_within(policy, "retry_policy")), None)


def windows_within(value: object, where: str) -> Iterator[tuple[str, Any]]:
    """Each ``RetryWindowPolicy`` inside ``value``, nearest first, with its place.

    Opened: attributes, the items of lists, tuples, sets and dicts, a partial's function
    and arguments, a bound method's object and a function's closure and defaults; never
    a module or a class. Every object is opened once, at most :data:`SEARCH_DEPTH` steps
    below ``value``; a window found is not opened.
    """
    queue = deque([(where, value, 0)])
    seen = {id(value): value}  # kept, so that no id is reused by another object meanwhile
    while queue:
        place, current, depth = queue.popleft()
        if depth == SEARCH_DEPTH:
            continue
        try:
            held = _inside(current)
        except Exception:  # an object that will not be read: nothing to follow through it
            continue
        for step, inner in held:
            if isinstance(inner, _LEAVES) or id(inner) in seen:
                continue
            seen[id(inner)] = inner
            if is_window(inner):
                yield place + step, inner
            else:
                queue.append((place + step, inner, depth + 1))


def _inside(value: object) -> list[tuple[str, object]]:
    """What ``value`` holds, each with the step to it: ``.name``, ``[key]``."""
    if isinstance(value, dict):
        return [(f"[{key!r}]", inner) for key, inner in list(value.items())]
    if isinstance(value, (list, tuple, set, frozenset)):
        return [(f"[{index}]", inner) for index, inner in enumerate(list(value))]
    found = _attributes(value)
    for kind, names in _PARTS:
        if isinstance(value, kind):
            found += [(f".{name}", getattr(value, name, None)) for name in names]
    if isinstance(value, FunctionType):  # an unbound name raises: the search skips it
        cells = zip(value.__code__.co_freevars, value.__closure__ or (), strict=False)
        found += [(f".<closure {name}>", cell.cell_contents) for name, cell in cells]
    return found


def _attributes(value: object) -> list[tuple[str, object]]:
    """An object's attributes, from its ``__dict__`` and its slots."""
    found: list[tuple[str, object]] = []
    own = getattr(value, "__dict__", None)
    if isinstance(own, dict):
        found += [(f".{name}", inner) for name, inner in list(own.items())]
    for cls in type(value).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if isinstance(name, str) and name not in ("__dict__", "__weakref__"):
                try:
                    found.append((f".{name}", getattr(value, name)))
                except AttributeError:  # a slot not set
                    continue
    return found


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
