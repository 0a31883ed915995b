"""The evidence a decision leaves behind, so it can be explained and replayed.

Each decision of :class:`~airflow_retrywindow.RetryWindowPolicy` is logged at INFO
and stored in the task state store under :data:`EVIDENCE_KEY`. The store and XCom
are per task instance in Airflow 3.3, map index included: each map index of a
mapped task keeps its own decisions and failure class. The ``fixture``
is the exact JSON the model saw; ``airflow-retrywindow evaluate`` on it prints
``result`` byte for byte, and ``origin`` turns its seconds back into real times.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_retrywindow.model.states import TaskState
from airflow_retrywindow.records.reconciliation import KEY as RECONCILIATION
from airflow_retrywindow.records.schema import stamped, version_problem
from airflow_retrywindow.records.start_check import KEY as START_CHECK

#: the task state store key holding the decision history of a task instance
EVIDENCE_KEY = "retry_window.evidence"
#: the key of the tries of a clock read that needed more than one
CLOCK_READ = "clockRead"
#: decisions kept per task instance (a window has at most 10 attempts)
HISTORY = 20
#: prefix of the XCom key that names the failure class of the latest decision.
#: The REST API lists XCom keys without their values, so a key such as
#: ``retry_window.failure.unknown`` lets a gate read the classification of every
#: target of a run in one paged request.
FAILURE_KEY_PREFIX = "retry_window.failure."
#: failure classes, as stored: the model's task states for an outcome that is unknown,
#: a failure that needs a repair, or one a repeat may help (plain text, as stored)
UNKNOWN = TaskState.UNKNOWN.value
TERMINAL = TaskState.TERMINAL.value
RETRYABLE = TaskState.RETRYABLE.value
_FAILURES = (UNKNOWN, TERMINAL, RETRYABLE)
#: what the policy told Airflow when it let the task run again: retry after the
#: model's delay, or (``on_error="default"``) Airflow's own retries on purpose
HANDED_OVER = frozenset({"retry", "default"})


def failure_key(failure: str) -> str:
    """The XCom key that names ``failure`` (unknown, terminal or retryable)."""
    if failure not in _FAILURES:
        raise ValueError(f"failure must be one of {', '.join(_FAILURES)}, got {failure!r}")
    return FAILURE_KEY_PREFIX + failure


def failure_of_key(key: str) -> str | None:
    """The failure class an XCom key names, or ``None`` for any other key."""
    if not key.startswith(FAILURE_KEY_PREFIX):
        return None
    failure = key[len(FAILURE_KEY_PREFIX) :]
    return failure if failure in _FAILURES else None


def record(
    *,
    fixture: Mapping[str, Any],
    origin: str,
    result: Mapping[str, Any],
    task_ids: Mapping[str, str],
    try_number: int,
    failure: str,
    reason: str,
    action: str,
    deadline: str | None = None,
    deadline_at: str | None = None,
    check: str | None = None,
    clock: Mapping[str, Any] | None = None,
    start_check: Mapping[str, Any] | None = None,
    clock_read: Mapping[str, Any] | None = None,
    jitter: Mapping[str, Any] | None = None,
    reconciliation: Mapping[str, Any] | None = None,
    lost_try: Mapping[str, Any] | None = None,
    classified: Mapping[str, Any] | None = None,
    chain: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One decision of the model as a JSON-ready mapping: the one writer of its keys.

    A field left ``None`` is not stored, as earlier releases did without it.

    :param failure: how the failing attempt was classified: unknown, terminal, retryable.
    :param action: what Airflow was told: retry, fail or default (run or reschedule, by
        the retry-start check).
    :param deadline: the deadline rule, in words.
    :param deadline_at: the deadline the model was given, ISO 8601.
    :param check: which check decided: ``retry-policy`` or ``retry-start``.
    :param clock: how the server's clock was read.
    :param start_check: whether the failed try passed its retry-start check
        (:mod:`~airflow_retrywindow.records.start_check`).
    :param clock_read: the tries of a clock read that needed more than one.
    :param jitter: the wait drawn for this try, when jitter is on.
    :param reconciliation: the status read of a resumable job
        (:class:`~airflow_retrywindow.records.reconciliation.Reconciliation`).
    :param lost_try: the previous try, when the scheduler failed it by its race.
    :param classified: what the window's classifier (``classify=``) answered, when asked
        (:class:`~airflow_retrywindow.records.composition.Classification`); ``answer``
        ``timeout`` says it did not answer within its wait, and the window's own classes
        gave the failure its class.
    :param chain: where the window sits in a ``ChainRetryPolicy`` or list, and what the
        policies asked before it said.
    :param extra: more evidence, stored after the fields above.
    """
    return stamped(
        {
            "tryNumber": try_number,
            "failure": failure,
            "action": action,
            "reason": reason,
            "origin": origin,
            "fixture": dict(fixture),
            "result": dict(result),
            "taskIds": dict(task_ids),
            "claims": {"safeRepeat": "asserted by the DAG author, not proven by the gate"},
            **_given(
                {
                    "deadline": deadline,
                    "deadlineAt": deadline_at,
                    "check": check,
                    "clock": clock,
                    START_CHECK: start_check,
                    CLOCK_READ: clock_read,
                    "jitter": jitter,
                    RECONCILIATION: reconciliation,
                    "lostTry": lost_try,
                    "classified": classified,
                    "chain": chain,
                }
            ),
            **(dict(extra) if extra else {}),
        }
    )


def gate_error(
    *,
    try_number: int,
    reason: str,
    action: str,
    clock_read: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A decision taken without the model, because the gate could not evaluate.

    :param reason: why it could not evaluate, already safe to store.
    :param action: what Airflow was told: fail or default.
    :param clock_read: the tries of a failed clock read, when that was why.
    :param extra: more evidence, stored after the fields above.
    """
    return stamped(
        {
            "tryNumber": try_number,
            "failure": None,
            "action": action,
            "reason": f"gate-error: {reason}",
            "check": "retry-policy",
            **_given({CLOCK_READ: clock_read}),
            **(dict(extra) if extra else {}),
        }
    )


def _given(fields: Mapping[str, object]) -> dict[str, Any]:
    """The fields that have a value, as stored (mappings copied), in the order given."""
    return {
        key: dict(value) if isinstance(value, Mapping) else value
        for key, value in fields.items()
        if value is not None
    }


def allows_next_try(history: object, try_number: int) -> bool:
    """Whether the stored decisions let try ``try_number`` start.

    Only a decision recorded for the try just before, handing the task back to
    Airflow to run again, lets it start; anything else means Airflow retried
    without asking.
    """
    latest = history.get("latest") if isinstance(history, dict) else None
    if not isinstance(latest, dict) or version_problem(latest):
        return False
    return latest.get("tryNumber") == try_number - 1 and latest.get("action") in HANDED_OVER


#: what the stored decisions say of a starting try (:func:`start_permission`)
DECIDED = "decided"
REREAD = "reread"
STARTED = "started"
UNDECIDED = "undecided"


def start_permission(history: object, try_number: int) -> str:
    """What the stored decisions say of try ``try_number``, which is not its window's first.

    * ``"started"``: the retry-start check already let this very try run (it is
      resumed after deferral);
    * ``"decided"``: the policy handed the try before back to Airflow to run again;
    * ``"reread"``: it was handed back only to reconnect to or collect a resumable
      job, which may have ended since: the job is read again before the try runs;
    * ``"undecided"``: nothing of ours let it start (a killed process, a lost
      heartbeat, a refusal, a rescheduled start).
    """
    latest = history.get("latest") if isinstance(history, dict) else None
    if not isinstance(latest, dict) or version_problem(latest):
        return UNDECIDED  # a shape this release cannot read is no permission
    if (
        latest.get("tryNumber") == try_number
        and latest.get("check") == "retry-start"
        and latest.get("action") == "run"
    ):
        return STARTED
    if not allows_next_try(history, try_number):
        return UNDECIDED
    job = latest.get(RECONCILIATION)
    return REREAD if isinstance(job, dict) and job.get("allows") else DECIDED


def appended(history: object, entry: Mapping[str, Any]) -> dict[str, Any]:
    """The stored value with ``entry`` added as the latest decision."""
    previous = history.get("decisions") if isinstance(history, dict) else None
    decisions = list(previous) if isinstance(previous, list) else []
    decisions.append(dict(entry))
    return {"latest": dict(entry), "decisions": decisions[-HISTORY:]}
