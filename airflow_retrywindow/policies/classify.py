"""``classify=``: any retry policy names a failure's class, and the window decides.

``RetryWindowPolicy(..., classify=<a RetryPolicy>)`` asks that policy (rules, a model,
a chain of them) what it makes of a failure the window's own classes leave
undeclared, and reads its answer as a class, never as the decision:

* FAIL: the failure is terminal (``repair-cause``), with the classifier's reason;
* RETRY: the failure is retryable; the delay it suggests is the shortest wait, a
  floor under the model's backoff, and the model checks the deadline with it;
* DEFAULT, an exception it raises, an answer that is no ``RetryDecision``, or no
  answer in time: the window's own classes decide (an undeclared failure is
  retryable), and the evidence says why.

The classes the window declares itself (``unknown=``, ``terminal=``, ``retryable=``,
the built-in unknowns) win: the classifier is not asked about them, so an outcome
declared unknown is reconciled first whatever a model would say.

**The bound.** A classifier may wait for a model (``ClassifierRetryPolicy`` and
``LLMRetryPolicy`` wait up to 30 s by default). The decision it feeds also reads the
API server's clock, and while that server is unreachable the task's supervisor kills
the try after ``heartbeat_tolerance`` (10 s by default), before any decision is kept.
So the classifier and the clock read share one bound, ``[retry_window]
clock_read_limit`` (1 s below that tolerance by default): the classifier is given at
most ``classify_timeout`` (4 s by default) and never more than half the bound, and
the clock read what is left. A classifier still thinking then is left to finish on
its own thread; its answer is not used, the failure takes the window's own class,
and the log, the evidence (``timeout``), the view and ``retry_window.classifier.timeout``
say that it did not answer.

**Ready before the task's code.** A model's first answer in a task process would
also import the provider's hook, the model's client library and its price data,
read the model's connection and resolve the model: seconds of a busy core, inside
that bound. The retry-start check, which runs before the task's code on every try,
does that first (:func:`ready`), so a failure waits only for the model's answer.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from datetime import timedelta
from typing import Any

from airflow_retrywindow.records.composition import (
    CLASSIFIER,
    TIMEOUT,
    WINDOW,
    Classification,
)
from airflow_retrywindow.records.evidence import RETRYABLE, TERMINAL
from airflow_retrywindow.redaction import describe_exception, safe_text

log = logging.getLogger(__name__)

#: the longest the classifier is waited for unless the DAG author says otherwise
DEFAULT_CLASSIFY_TIMEOUT = timedelta(seconds=4)
#: the share of ``clock_read_limit`` the classifier may take; the clock read has the rest
CLASSIFY_SHARE = 0.5
#: how much of the classifier's reason is kept
MAX_CLASSIFIER_REASON = 200
#: the attribute naming the Airflow connection of a policy that asks a model through one
#: (common.ai's ``ClassifierRetryPolicy`` and ``LLMRetryPolicy``)
MODEL_CONNECTION = "llm_conn_id"


def reason_part(classified: Classification) -> str:
    """What the decision's reason says of the class: a classifier's FAIL or RETRY, or its silence.

    When the window's own classes decided on another answer, the evidence says why.
    """
    if classified.answer == TIMEOUT:
        said = f"{classified.reason}, so {classified.failure} by the window's classes"
        return f"{classified.policy}: {said}"
    if classified.by != CLASSIFIER:
        return ""
    said = f": {classified.reason}" if classified.reason else ""
    return f"classified {classified.failure} by {classified.policy}{said}"


def bound_problem(timeout: timedelta) -> str | None:
    """Why a classifier waited for ``timeout`` would not fit the decision's bound, or ``None``.

    An unreadable ``[retry_window]`` setting is reported on its own; not here.
    """
    from airflow_retrywindow import configuration

    try:
        bound = configuration.clock_read_limit()
        tolerance = configuration.heartbeat_tolerance()
    except Exception:
        return None
    share = bound * CLASSIFY_SHARE
    if timeout.total_seconds() <= share:
        return None
    return (
        f"classify_timeout={timeout.total_seconds():g} s: the classifier and the read of the "
        "API server's clock share the decision's bound, [retry_window] clock_read_limit "
        f"({bound:g} s, below the {tolerance:g} s the task's supervisor tolerates of an "
        "unreachable API server before it kills the try undecided); the classifier may "
        f"take at most half of it. Write classify_timeout=timedelta(seconds={share:g}) or "
        "less (a model not done by then leaves the failure to the window's classes), or "
        "raise [workers] max_failed_heartbeats or min_heartbeat_interval and "
        "[retry_window] clock_read_limit"
    )


def classify_wait(timeout: timedelta, bound: float) -> float:
    """Seconds the classifier is waited for: its timeout, never past its share of ``bound``."""
    return min(timeout.total_seconds(), bound * CLASSIFY_SHARE)


def ask(
    classifier: Any,
    exception: BaseException,
    *,
    try_number: int,
    max_tries: int,
    context: Any,
    wait: float,
    own: str,
) -> Classification:
    """The class ``classifier`` gives an undeclared failure, waited for at most ``wait`` s.

    :param own: the class the window's own classes give the failure, kept when the
        classifier gives no usable answer.
    """
    from airflow.sdk import RetryAction, RetryDecision

    name = type(classifier).__name__
    answer: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            answer["decision"] = classifier.evaluate(
                exception=exception, try_number=try_number, max_tries=max_tries, context=context
            )
        except BaseException as error:  # its failure is an answer: the window's classes decide
            answer["error"] = error
        finally:
            done.set()

    started = time.monotonic()
    # a thread of its own: a model that does not answer in time is not waited for
    threading.Thread(target=run, name=f"retry-window-classify-{name}", daemon=True).start()
    answered = done.wait(wait)
    took = time.monotonic() - started

    def fallback(kind: str, why: str) -> Classification:
        return Classification(own, WINDOW, name, kind, why, seconds=took)

    if not answered:
        log.warning(
            "Retry window: %s did not answer within %g s, its share of the decision's bound; "
            "the failure is %s by the window's own classes. List its exception in terminal=, "
            "unknown= or retryable= where a missed answer must not decide it",
            name,
            wait,
            own,
        )
        return fallback(TIMEOUT, f"no answer within {wait:g} s")
    if "error" in answer:
        return fallback("raised", f"it raised {describe_exception(answer['error'])}")
    decision = answer.get("decision")
    if not isinstance(decision, RetryDecision):
        return fallback("invalid", f"it returned {type(decision).__name__}, not a RetryDecision")
    said = safe_text(str(decision.reason), limit=MAX_CLASSIFIER_REASON) if decision.reason else None
    if decision.action is RetryAction.FAIL:
        return Classification(TERMINAL, CLASSIFIER, name, "fail", said, seconds=took)
    if decision.action is RetryAction.RETRY:
        delay = decision.retry_delay
        floor = max(0, math.ceil(delay.total_seconds())) if isinstance(delay, timedelta) else 0
        return Classification(RETRYABLE, CLASSIFIER, name, "retry", said, floor or None, took)
    return fallback("default", f"it answered DEFAULT{f': {said}' if said else ''}")


def models_in(classifier: object) -> list[Any]:
    """The policies of ``classifier`` that ask a model through an Airflow connection.

    The classifier itself, each member of a chain (``policies``) and each policy one falls
    back to (``fallback_policy``), at any depth, each once.
    """
    found: list[Any] = []
    seen: set[int] = set()
    pending: list[object] = [classifier]
    while pending:
        policy = pending.pop()
        if policy is None or id(policy) in seen:
            continue  # a fallback may be shared, or lead back
        seen.add(id(policy))
        if isinstance(getattr(policy, MODEL_CONNECTION, None), str):
            found.append(policy)
        members = getattr(policy, "policies", None)
        pending.extend(members if isinstance(members, (list, tuple)) else ())
        pending.append(getattr(policy, "fallback_policy", None))
    return found


def ready(classifier: object) -> None:
    """Load what each model of ``classifier`` needs before it can answer; never raises.

    The hook the model's policy builds for each answer is built once here and resolves
    its model: that imports the provider's hook, the model's client library and its
    price data, and reads the connection. Each policy still reads its connection again
    when asked (a read of Airflow, which the decision's bound is for); the imports stay.
    A model that cannot be made ready is logged, and still asked when a try fails.
    """
    for policy in models_in(classifier):
        conn_id, started = getattr(policy, MODEL_CONNECTION), time.monotonic()
        try:
            from airflow.providers.common.ai.hooks.pydantic_ai import PydanticAIHook

            hook = PydanticAIHook(llm_conn_id=conn_id, model_id=getattr(policy, "model_id", None))
            hook.get_conn()
        except Exception as error:
            log.warning(
                "Retry window: the model of %s (connection %r) could not be made ready: %s. "
                "It is still asked when a try fails; check the connection",
                type(policy).__name__,
                conn_id,
                describe_exception(error),
            )
            continue
        took = time.monotonic() - started
        log.info("Retry window: the model of %s is ready, in %.2f s", type(policy).__name__, took)
