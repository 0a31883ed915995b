"""One-line reasons for the model's decisions, in real time.

The reason is what an operator reads on the task instance at 3 a.m.: the
decision first (so it can be grepped), then its numbers as UTC wall-clock times.
Airflow keeps 500 characters of it; we stay under that.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pendulum

from airflow_retrywindow.model.decisions import Decision
from airflow_retrywindow.timing.clock import Clock

MAX_REASON = 499


def moment(clock: Clock, seconds: int, today: pendulum.DateTime) -> str:
    """A model time as ``HH:MM:SSZ``, with the date when it is not ``today``'s."""
    when = clock.at(seconds)
    if when.date() == today.date():
        return when.format("HH:mm:ss[Z]")
    return when.format("YYYY-MM-DD HH:mm:ss[Z]")


def reason(
    result: Mapping[str, Any],
    *,
    task: Mapping[str, Any],
    payload: Mapping[str, Any],
    clock: Clock,
    subject: str = "",
) -> str:
    """Explain one task's decision with its numbers as real times.

    :param result: the task's entry in the model's output.
    :param task: the task's entry in the model's input.
    :param payload: the whole fixture the model evaluated.
    :param clock: the clock that fixture is on.
    :param subject: what failed, e.g. ``"TimeoutError: no response"``, if known.
    """
    decision = str(result["decision"])
    today = clock.at(int(payload["asOf"]))

    def at(seconds: int) -> str:
        return moment(clock, seconds, today)

    attempts, limit = int(task["attempts"]), int(payload["policy"]["maxAttempts"])
    cause = f" ({subject})" if subject else ""
    deadline = at(int(payload["deadline"]))
    found = Decision.named(decision)
    if found is not None and found.scheduled:
        start, finish = at(result["earliestStart"]), at(result["estimatedFinish"])
        nth = f"attempt {attempts + 1} of {limit}"
        if decision == "deadline-infeasible":
            text = (
                f"next attempt would start {start} and finish with validation at {finish}, "
                f"after the {deadline} deadline ({nth}); report the impact instead of retrying"
            )
        else:
            slack = int(payload["deadline"]) - int(result["estimatedFinish"])
            when = (
                f"at {start} after a {result['backoff']} s backoff"
                if decision == "wait-backoff"
                else f"now ({start})"
            )
            text = (
                f"{nth} may start {when} and finish with validation by {finish}, "
                f"{slack} s before the {deadline} deadline"
            )
    else:
        text = _refusal(decision, task=task, payload=payload, at=at, attempts=attempts, limit=limit)
    return _fit(f"{decision}: {text}{cause}")


def _refusal(
    decision: str,
    *,
    task: Mapping[str, Any],
    payload: Mapping[str, Any],
    at: Any,
    attempts: int,
    limit: int,
) -> str:
    observed = at(int(task["observedAt"]))
    texts = {
        "refresh-observation": (
            f"the last observation ({observed}) is older than the allowed "
            f"{payload['maxObservationAge']} s at {at(int(payload['asOf']))}; observe again"
        ),
        "observe-running": f"attempt {attempts} is still running (seen {observed}); observe it",
        "reconcile-remote": (
            f"the outcome of attempt {attempts} of {limit} is unknown; look the remote job up "
            "by its client job id before any retry"
        ),
        "validate-output": (
            f"attempt {attempts} succeeded (seen {observed}); validate its output before "
            "calling the delivery done"
        ),
        "repair-cause": f"attempt {attempts} failed terminally; repair the cause, then clear",
        "attempts-exhausted": (
            f"attempt {attempts} of {limit} failed and no attempt is left in this window"
        ),
        "reconcile-effects": (
            f"attempt {attempts} of {limit} failed and the task is not claimed safe to "
            "repeat; reconcile what it wrote before repeating it"
        ),
    }
    return texts.get(decision, "no explanation for this decision")


def _fit(text: str) -> str:
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 3] + "..."
