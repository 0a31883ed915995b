"""Evaluate a fixture given as plain JSON values, the way the command line does.

This path works on the decoded JSON directly, without building the typed
values, so that the command line starts as fast as a bare script.
"""

from __future__ import annotations

from operator import itemgetter

from airflow_retrywindow.exceptions import InvalidFixture
from airflow_retrywindow.model.decisions import Decision
from airflow_retrywindow.model.rules import decide_task
from airflow_retrywindow.model.validation import (
    FIXTURE_FIELDS,
    POLICY_FIELDS,
    TASK_FIELDS,
    check_clock,
    check_policy,
    check_task_object,
    check_unique,
    fields,
    task_list,
    task_location,
)

# typing itself is not imported at run time: it costs more than an evaluation
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_BY_ID = itemgetter("id")
# the wire value of each decision, without going through the enum's value property
_WIRE = {decision: decision.value for decision in Decision}


def evaluate(payload: object) -> dict[str, Any]:
    """Decide every task of a fixture and return the model's JSON result.

    The result has ``tasks`` (sorted by id, each with ``id``, ``decision``,
    ``backoff``, ``earliestStart`` and ``estimatedFinish``), ``deadlinePassed``,
    and four flags that are always false because the model only decides:
    ``jobsExecuted``, ``idempotencyProven``, ``completionGuaranteed`` and
    ``productionApproval``.

    :param payload: the decoded fixture.
    :raises InvalidFixture: if anything in the fixture is invalid; nothing is decided then.
    """
    fixture = fields(payload, "fixture", FIXTURE_FIELDS)
    as_of, deadline, max_age = check_clock(
        fixture["asOf"], fixture["deadline"], fixture["maxObservationAge"]
    )
    policy = fields(fixture["policy"], "policy", POLICY_FIELDS)
    max_attempts, initial_delay, max_delay, multiplier = check_policy(
        policy["maxAttempts"], policy["initialDelay"], policy["maxDelay"], policy["multiplier"]
    )
    seen: dict[str, int] = {}
    results: list[dict[str, object]] = []
    for index, raw in enumerate(task_list(fixture["tasks"])):
        try:
            task = fields(raw, "", TASK_FIELDS)
            identifier, state, safe_repeat, attempts, observed_at, finished, duration, checking = (
                check_task_object(task, as_of=as_of)
            )
            check_unique(identifier, seen)
        except InvalidFixture as error:
            raise error.at(task_location(index, raw)) from None
        seen[identifier] = index
        decision, backoff, start, finish = decide_task(
            as_of=as_of,
            deadline=deadline,
            max_observation_age=max_age,
            max_attempts=max_attempts,
            initial_delay=initial_delay,
            max_delay=max_delay,
            multiplier=multiplier,
            state=state,
            safe_repeat=safe_repeat,
            attempts=attempts,
            observed_at=observed_at,
            last_finished_at=finished,
            duration=duration,
            validation=checking,
        )
        results.append(
            {
                "id": identifier,
                "decision": _WIRE[decision],
                "backoff": backoff,
                "earliestStart": start,
                "estimatedFinish": finish,
            }
        )
    results.sort(key=_BY_ID)
    return {
        "tasks": results,
        "deadlinePassed": as_of > deadline,
        "jobsExecuted": False,
        "idempotencyProven": False,
        "completionGuaranteed": False,
        "productionApproval": False,
    }
