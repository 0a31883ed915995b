"""The floor for the command line's cold start: the same contract in one bare script.

Reads a fixture on standard input and prints the decisions as one JSON line,
with nothing but json, re and sys. It does all the checks and all the work of
``python -m airflow_retrywindow``, with none of its structure or messages.
"""

from __future__ import annotations

import json
import re
import sys

LIMIT = 1_000_000
ID = re.compile(r"[A-Za-z0-9_-]{1,48}")
TOP = {"asOf", "deadline", "maxObservationAge", "policy", "tasks"}
POLICY = {"maxAttempts", "initialDelay", "maxDelay", "multiplier"}
TASK = {
    "id",
    "state",
    "safeRepeat",
    "attempts",
    "observedAt",
    "lastFinishedAt",
    "duration",
    "validation",
}
STATES = ("running", "unknown", "succeeded", "retryable", "terminal")
SETTLED = {
    "running": "observe-running",
    "unknown": "reconcile-remote",
    "succeeded": "validate-output",
    "terminal": "repair-cause",
}


def number(value: object, low: int, high: int) -> int:
    if type(value) is not int or not low <= value <= high:
        raise ValueError(value)
    return value


def record(value: object, names: set[str]) -> dict[str, object]:
    if type(value) is not dict or value.keys() != names:
        raise ValueError(value)
    return value


# one flat function on purpose: the baseline has no structure to pay for
def evaluate(payload: object) -> dict[str, object]:  # noqa: PLR0912, PLR0915
    fixture = record(payload, TOP)
    now = number(fixture["asOf"], 0, 10**9)
    due = number(fixture["deadline"], 0, 10**9)
    fresh = number(fixture["maxObservationAge"], 0, 10**9)
    policy = record(fixture["policy"], POLICY)
    budget = number(policy["maxAttempts"], 1, 10)
    first = number(policy["initialDelay"], 1, LIMIT)
    cap = number(policy["maxDelay"], first, LIMIT)
    growth = number(policy["multiplier"], 1, 5)
    tasks = fixture["tasks"]
    if type(tasks) is not list or not 1 <= len(tasks) <= 20:
        raise ValueError("tasks")
    rows: list[dict[str, object]] = []
    names: set[str] = set()
    for raw in tasks:
        task = record(raw, TASK)
        name, state, safe = task["id"], task["state"], task["safeRepeat"]
        if type(name) is not str or ID.fullmatch(name) is None or name in names:
            raise ValueError(name)
        names.add(name)
        if state not in STATES or type(safe) is not bool:
            raise ValueError(state)
        tries = number(task["attempts"], 1, 10)
        seen = number(task["observedAt"], 0, now)
        run = number(task["duration"], 1, LIMIT)
        check = number(task["validation"], 0, LIMIT)
        ended = task["lastFinishedAt"]
        finished = 0  # never used for running or unknown: they are settled first
        if state in ("running", "unknown"):
            if ended is not None:
                raise ValueError(ended)
        else:
            finished = number(ended, 0, seen)
        wait: int | None = None
        start: int | None = None
        finish: int | None = None
        if now - seen > fresh:
            verdict = "refresh-observation"
        elif state in SETTLED:
            verdict = SETTLED[str(state)]
        elif tries >= budget:
            verdict = "attempts-exhausted"
        elif not safe:
            verdict = "reconcile-effects"
        else:
            grown: int = growth ** (tries - 1)
            wait = min(cap, first * grown)
            start = max(now, finished + wait)
            finish = start + run + check
            if finish > due:
                verdict = "deadline-infeasible"
            else:
                verdict = "wait-backoff" if start > now else "retry-eligible"
        rows.append(
            {
                "id": name,
                "decision": verdict,
                "backoff": wait,
                "earliestStart": start,
                "estimatedFinish": finish,
            }
        )
    rows.sort(key=lambda row: str(row["id"]))
    return {
        "tasks": rows,
        "deadlinePassed": now > due,
        "jobsExecuted": False,
        "idempotencyProven": False,
        "completionGuaranteed": False,
        "productionApproval": False,
    }


def main() -> int:
    text = sys.stdin.read(LIMIT + 1)
    try:
        if len(text) > LIMIT:
            raise ValueError("too large")
        result = evaluate(json.loads(text))
    except (ValueError, RecursionError):
        sys.stderr.write("Invalid retry fixture\n")
        return 2
    sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
