"""When the DAG is parsed: why a task's retry policies cannot be gated as composed.

The window is found wherever a chain puts it by
:mod:`~airflow_retrywindow.records.composition`; :func:`composition_problem` says why
a composition cannot be gated as written:

* a window held by anything but the exact ``ChainRetryPolicy``, within the search's
  bound (a classifier's fallback, a bound method, a closure, a chain subclass): Airflow
  may ask it, but no chain shows whether or in which order;
* a policy asked **before** the window that can answer RETRY lets that retry run
  with no deadline check; only a policy that can answer nothing but FAIL or DEFAULT
  (an ``ExceptionRetryPolicy`` whose rules and default never RETRY) may come first.
  The others belong in the window's ``classify=``, which feeds the window instead of
  bypassing it;
* a policy **after** the window is asked only when the window hands a failure back
  to Airflow, which it does only with ``on_error="default"`` when it cannot
  evaluate; with ``on_error="fail"`` it would never be asked;
* more than one window, or a list on an Airflow that has no ``ChainRetryPolicy``
  (3.3 calls ``evaluate`` on a list and falls back to its own retries).

Each names what to write instead. Importing this module imports no Airflow.
"""

from __future__ import annotations

from typing import Any

from airflow_retrywindow import version_compat
from airflow_retrywindow.records.composition import (
    Placement,
    Step,
    chain_classes,
    is_window,
    placement_of,
    steps_of,
    window_of,
    windows_within,
)


def earlier_answers(
    found: Placement, exception: BaseException, try_number: int, max_tries: int, context: Any
) -> list[str]:
    """What each policy before the window said of this failure, as the chain words it.

    The window is asked only when they all gave no decision. Only a policy that can
    answer nothing but FAIL or DEFAULT (the only kind allowed there) is asked again,
    being rules over the exception; of another, that it was asked.
    """
    from airflow_retrywindow.redaction import safe_text

    said = []
    for step in found.before:
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


def composition_problem(task: Any) -> str | None:
    """Why the task's retry policies cannot be gated as composed, or ``None``."""
    policy = getattr(task, "retry_policy", None)
    if policy is None or window_of(task) is None:
        return None
    named = f"task {getattr(task, 'task_id', '?')!r}"
    if isinstance(policy, (list, tuple)) and not version_compat.sdk_asks_lists_as_chains():
        return (
            f"{named}: retry_policy is a list, which Airflow 3.4 asks as a chain; this "
            "Airflow calls the list itself and falls back to its own retries, undecided. "
            "Write retry_policy=ChainRetryPolicy([...]) with "
            "`from airflow.providers.common.compat.sdk import ChainRetryPolicy`"
        )
    hidden = _hidden_problem(steps_of(policy))
    if hidden:
        return f"{named}: {hidden}"
    found = placement_of(task)
    if found is None:  # a window found and none held out of sight: the chain shows it
        return None
    for problem in (_second_window(found), _before_problem(found), _after_problem(found)):
        if problem:
            return f"{named}: {problem}"
    return None


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
    from airflow.sdk import ExceptionRetryPolicy, RetryAction

    if type(policy) is not ExceptionRetryPolicy:
        return f"any answer of {type(policy).__name__} may be RETRY"
    retrying = [rule.exception_path for rule in policy.rules if rule.action is RetryAction.RETRY]
    if retrying:
        return f"its rule for {', '.join(retrying)} retries"
    if policy.default is RetryAction.RETRY:
        return "its default=RetryAction.RETRY retries every failure no rule matches"
    return None


def _hidden_problem(steps: list[Step]) -> str | None:
    """Why a window is held where the provider cannot see it, or ``None``."""
    for step in steps:
        found = next(windows_within(step.policy, step.where), None)
        if found is None:
            continue
        if is_window(step.policy):
            return (
                f"the RetryWindowPolicy at {step.where} holds another RetryWindowPolicy at "
                f"{found[0]}; a classifier only names the failure's class, so give classify= "
                "a policy without a window"
            )
        return _out_of_sight(step, found[0])
    return None


def _out_of_sight(step: Step, found: str) -> str:
    """The refusal of a window ``step`` holds at ``found``, with what to write instead."""
    from airflow.sdk import RetryPolicy

    chain = isinstance(step.policy, chain_classes())
    why = (
        f"{step.name} is a subclass of ChainRetryPolicy, which may ask its policies in "
        "another order than listed; write ChainRetryPolicy([...]) itself. "
        if chain
        else ""
    )
    feed = (
        f", and let {step.name} classify for it: RetryWindowPolicy(..., classify={step.name}(...))"
        if isinstance(step.policy, RetryPolicy) and not chain
        else ""
    )
    return (
        f"{step.where} ({step.name}) holds a RetryWindowPolicy at {found}, where the "
        "provider cannot see it: only ChainRetryPolicy itself (and on Airflow 3.4 a task's "
        f"list) is known to ask its policies in order, so nothing tells whether {step.name} "
        "asks the window at all, or answers RETRY before it, a retry with no deadline "
        f"check. {why}Put the window in retry_policy itself or in a chain, after what "
        "can only FAIL: retry_policy=ChainRetryPolicy([ExceptionRetryPolicy(...FAIL "
        f"rules...), RetryWindowPolicy(...)]){feed}"
    )
