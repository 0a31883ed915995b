"""Where a task's ``RetryWindowPolicy`` sits among Airflow's other retry policies.

A task's ``retry_policy`` may be the window itself, a ``ChainRetryPolicy`` (the
SDK's from Airflow 3.4, or the backport of ``apache-airflow-providers-common-compat``
on 3.3), a list of policies (Airflow 3.4, which asks them as a chain), or chains
within chains. A chain asks its policies in order with the original exception: the
first RETRY or FAIL wins, a DEFAULT (or a policy that raises) asks the next.

:func:`window_of` finds the window wherever a chain puts it, so the retry-start
check, ``check_dag``, the gate, the sensor and the notifier treat it as a bare
window. :func:`composition_problem` says, when the DAG is parsed, why a chain
cannot be gated as written:

* a policy asked **before** the window that can answer RETRY lets that retry run
  with no deadline check; only a policy that can answer nothing but FAIL or DEFAULT
  (an ``ExceptionRetryPolicy`` whose rules and default never RETRY) may come first.
  The others belong in the window's ``classify=``, which feeds the window instead of
  bypassing it;
* a policy **after** the window is asked only when the window hands a failure back
  to Airflow, which it does only with ``on_error="default"`` when it cannot
  evaluate; with ``on_error="fail"`` it would never be asked;
* a window held where a chain does not show it (another policy's fallback, a
  classifier's inner policy, a wrapper of one's own) gets no retry-start check and
  no parse-time checks;
* more than one window, or a list on an Airflow that has no ``ChainRetryPolicy``
  (3.3 calls ``evaluate`` on a list and falls back to its own retries).

Importing this module imports no Airflow.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_retrywindow.records.composition import ChainPlace

#: where the SDK keeps ``ChainRetryPolicy`` (Airflow 3.4), and the common.compat provider's
#: public name for it: the SDK's where it has one, else the provider's backport
CHAIN_MODULES = (
    "airflow.sdk.definitions.retry_policy",
    "airflow.providers.common.compat.sdk",
)
#: the module of ``RetryWindowPolicy``: loaded wherever one exists, so it is looked up, not
#: imported (it imports the retry-start check, which finds windows with this module)
WINDOW_MODULE = "airflow_retrywindow.policies.retry_policy"
#: how deep a policy's attributes are searched for a window it holds out of sight
_HIDDEN_DEPTH = 4
#: how deep a task's retry_policy is searched for any window: chains within chains too
_HOLD_DEPTH = 12


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

    def earlier_answers(
        self, exception: BaseException, try_number: int, max_tries: int, context: Any
    ) -> list[str]:
        """What each policy before the window said of this failure, as the chain words it.

        The window is asked only when they all gave no decision. Only a policy that can
        answer nothing but FAIL or DEFAULT (the only kind allowed there) is asked again,
        being rules over the exception; of another, that it was asked.
        """
        from airflow_retrywindow.redaction import safe_text

        said = []
        for step in self.before:
            if retry_answer(step.policy) is not None:
                said.append(f"{step.name}: no decision (not asked again)")
                continue
            try:
                answer = step.policy.evaluate(
                    exception=exception, try_number=try_number, max_tries=max_tries, context=context
                )
                text = getattr(answer, "reason", None) or "no decision"
                said.append(f"{step.name}: {safe_text(str(text), limit=200)}")
            except Exception as error:  # the chain counts a policy that raises as no decision
                said.append(f"{step.name}: raised {type(error).__name__}")
        return said

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
    """Every ``ChainRetryPolicy`` class installed: the SDK's, the backport's, or both."""
    found: list[type] = []
    for module in CHAIN_MODULES:
        try:
            chain = importlib.import_module(module).ChainRetryPolicy
        except (ImportError, AttributeError):
            continue  # an Airflow before 3.4, or no common.compat provider
        if isinstance(chain, type) and chain not in found:
            found.append(chain)
    return tuple(found)


def steps_of(policy: object, where: str = "retry_policy") -> list[Step]:
    """The policies a chain asks, in order, chains and lists within it opened."""
    if isinstance(policy, (list, tuple)):
        return [
            step
            for index, inner in enumerate(policy)
            for step in steps_of(inner, f"{where}[{index}]")
        ]
    chains = chain_classes()
    if chains and isinstance(policy, chains):
        members = getattr(policy, "policies", ())
        return [
            step
            for index, inner in enumerate(members)
            for step in steps_of(inner, f"{where}.policies[{index}]")
        ]
    return [Step(where, policy)]


def placement_of(task: Any) -> Placement | None:
    """Where the task's ``RetryWindowPolicy`` sits, or ``None`` when a chain shows none.

    With more than one, the first the chain asks (the parse-time check refuses that).
    """
    policy = getattr(task, "retry_policy", None)
    if policy is None:
        return None  # most tasks: no need to load the policy class
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
    """The task's ``RetryWindowPolicy`` wherever a chain or a list puts it, or ``None``."""
    found = placement_of(task)
    return found.window if found is not None else None


def holds_window(task: Any) -> bool:
    """Whether a ``RetryWindowPolicy`` is anywhere in the task's ``retry_policy``, seen or not."""
    policy = getattr(task, "retry_policy", None)
    if policy is None:
        return False
    return is_window(policy) or any(
        True for _ in _windows_within(policy, "retry_policy", _HOLD_DEPTH, set())
    )


def composition_problem(task: Any) -> str | None:
    """Why the task's retry policies cannot be gated as composed, or ``None``."""
    policy = getattr(task, "retry_policy", None)
    if policy is None or not holds_window(task):
        return None
    named = f"task {getattr(task, 'task_id', '?')!r}"
    if isinstance(policy, (list, tuple)) and not _sdk_chains():
        return (
            f"{named}: retry_policy is a list, which Airflow 3.4 asks as a chain; this "
            "Airflow calls the list itself and falls back to its own retries, undecided. "
            "Write retry_policy=ChainRetryPolicy([...]) with "
            "`from airflow.providers.common.compat.sdk import ChainRetryPolicy`"
        )
    steps = steps_of(policy)
    hidden = _hidden_problem(steps)
    if hidden:
        return f"{named}: {hidden}"
    found = placement_of(task)
    if found is None:  # held only out of sight, and _hidden_problem said where
        return None
    for problem in (_second_window(found), _before_problem(found), _after_problem(found)):
        if problem:
            return f"{named}: {problem}"
    return None


def _sdk_chains() -> bool:
    """Whether this Airflow's SDK has ``ChainRetryPolicy``, and so asks a list as a chain."""
    try:
        module = importlib.import_module(CHAIN_MODULES[0])
    except ImportError:
        return False
    return hasattr(module, "ChainRetryPolicy")


def _second_window(found: Placement) -> str | None:
    others = [step.where for step in found.after if is_window(step.policy)]
    if not others:
        return None
    return (
        f"the chain holds more than one RetryWindowPolicy ({found.where} and "
        f"{', '.join(others)}); the first decides every failure and the others are never "
        "asked, so keep one"
    )


def _before_problem(found: Placement) -> str | None:
    """Why a policy asked before the window could bypass it, naming it and the way out."""
    bypass = [(step, why) for step in found.before if (why := retry_answer(step.policy))]
    if not bypass:
        return None
    step, why = bypass[0]
    classifier = (
        f"ChainRetryPolicy([{', '.join(f'{s.name}(...)' for s, _ in bypass)}])"
        if len(bypass) > 1
        else f"{step.name}(...)"
    )
    return (
        f"{step.where} ({step.name}) is asked before the RetryWindowPolicy at "
        f"{found.where} and can answer RETRY ({why}): that retry would run with no "
        "deadline check. Let it classify for the window instead: "
        f"RetryWindowPolicy(..., classify={classifier}); its FAIL then ends the task, its "
        "RETRY is decided by the window with its delay as the shortest wait. Before the "
        "window only a policy that can answer nothing but FAIL may stand (an "
        "ExceptionRetryPolicy whose rules and default never RETRY)"
    )


def _after_problem(found: Placement) -> str | None:
    """Why policies after the window would never be asked, or ``None``."""
    if not found.after or getattr(found.window, "on_error", "fail") == "default":
        # with on_error="default" they decide the failures the window hands back
        return None
    names = ", ".join(f"{step.where} ({step.name})" for step in found.after)
    return (
        f"{names} {'is' if len(found.after) == 1 else 'are'} asked after the "
        f"RetryWindowPolicy at {found.where}, which answers every failure itself (RETRY or "
        "FAIL), so it would never be asked. Remove it, let it classify for the window "
        "(RetryWindowPolicy(..., classify=...)), or give the window on_error='default' so "
        "it decides the failures the window cannot evaluate"
    )


def retry_answer(policy: object) -> str | None:
    """Why ``policy`` may answer RETRY, or ``None`` when it can only FAIL or DEFAULT.

    Only the SDK's own ``ExceptionRetryPolicy`` (not a subclass, which may answer
    otherwise) is read rule by rule; any other policy may answer anything.
    """
    from airflow.sdk.definitions.retry_policy import ExceptionRetryPolicy, RetryAction

    if type(policy) is not ExceptionRetryPolicy:
        return f"any answer of {type(policy).__name__} may be RETRY"
    retrying = [rule.exception_path for rule in policy.rules if rule.action is RetryAction.RETRY]
    if retrying:
        return f"its rule for {', '.join(retrying)} retries"
    if policy.default is RetryAction.RETRY:
        return "its default=RetryAction.RETRY retries every failure no rule matches"
    return None


def _hidden_problem(steps: list[Step]) -> str | None:
    """Why a window is held where the chain does not show it, or ``None``."""
    for step in steps:
        if is_window(step.policy):
            inner = getattr(step.policy, "classify", None)
            where = f"{step.where}.classify"
            found = next(_windows_within(inner, where, _HIDDEN_DEPTH, set()), None)
            if found:
                return (
                    f"the classifier of the RetryWindowPolicy at {step.where} holds another "
                    f"RetryWindowPolicy at {found}; a classifier only names the failure's "
                    "class, so give classify= a policy without a window"
                )
            continue
        found = next(_windows_within(step.policy, step.where, _HIDDEN_DEPTH, set()), None)
        if found:
            return (
                f"{step.where} ({step.name}) holds a RetryWindowPolicy at {found}, where "
                "the provider cannot see it: no retry-start check would decide a retry "
                "Airflow starts on its own (a killed worker), and no setting of it would be "
                "checked. Put the window in the chain itself, after what can only FAIL: "
                "ChainRetryPolicy([ExceptionRetryPolicy(...FAIL rules...), "
                f"RetryWindowPolicy(...)]), and feed {step.name} to it as "
                f"RetryWindowPolicy(..., classify={step.name}(...))"
            )
    return None


def _windows_within(value: object, where: str, depth: int, seen: set[int]) -> Iterator[str]:
    """Where a ``RetryWindowPolicy`` sits inside ``value``'s attributes, containers included.

    Only policies and containers are opened, to a bounded depth, so a policy holding a
    hook or a client is not walked through.
    """
    from airflow.sdk.definitions.retry_policy import RetryPolicy

    if depth < 0 or id(value) in seen or value is None:
        return
    seen.add(id(value))
    if is_window(value):
        yield where
        return
    if isinstance(value, (list, tuple, set, frozenset)):
        for index, inner in enumerate(value):
            yield from _windows_within(inner, f"{where}[{index}]", depth - 1, seen)
    elif isinstance(value, Mapping):
        for key, inner in value.items():
            yield from _windows_within(inner, f"{where}[{key!r}]", depth - 1, seen)
    elif isinstance(value, RetryPolicy):
        for name, inner in _attributes(value):
            yield from _windows_within(inner, f"{where}.{name}", depth - 1, seen)


def _attributes(value: object) -> list[tuple[str, object]]:
    """An object's attributes, from its ``__dict__`` and its slots."""
    found = list(getattr(value, "__dict__", {}).items())
    for cls in type(value).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if isinstance(name, str) and hasattr(value, name):
                found.append((name, getattr(value, name)))
    return found
