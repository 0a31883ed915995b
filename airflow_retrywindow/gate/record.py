"""Record: the decision record a gate publishes as its ``return_value`` XCom.

One JSON object per evaluation, pushed before anything is skipped, holding:

* ``decisions`` - per target: the model's decision, its numbers in real time
  (``attempts``, ``observedAt``, ``lastFinishedAt``, ``backoffSeconds``,
  ``earliestStart``, ``estimatedFinish``, ``slackSeconds``), how the state was
  found, the one-line ``reason``, the English ``status`` and the ``capacity``
  verdict of its pool;
* ``budget`` - the budget verdict, when the gate has a budget;
* ``fixtures`` - every fixture exactly as the model evaluated it, with its
  ``result``, clock ``origin`` and ``taskIds`` (model id -> task id): pipe
  ``fixture`` into ``airflow-retrywindow evaluate`` to replay it offline;
* ``guard`` and ``skipped`` - what may run and what was held back, and why;
* ``workUnit`` - the unit of work the decision is about;
* ``statusUpdate`` - a short English update for the people on the incident.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow_retrywindow.gate.decide import DecisionTable
from airflow_retrywindow.redaction import without_userinfo


def build(
    table: DecisionTable,
    *,
    requests: int,
    api: str,
    gate: str,
    dag_id: str,
    run_id: str,
    try_number: int,
    deadline_rule: str,
    work_unit: object,
    guard: Sequence[dict[str, Any]] = (),
    skipped: Sequence[str] = (),
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The record of one evaluation, JSON-ready.

    :param table: the decisions.
    :param requests: REST API requests the read made.
    :param api: the API's base URL.
    :param gate: the deciding task's id.
    :param dag_id: the run's DAG.
    :param run_id: the run.
    :param try_number: the deciding task's try.
    :param deadline_rule: how the deadline is defined, in words.
    :param work_unit: the rendered unit of work.
    :param guard: per guarded task: its targets, the action and the blockers.
    :param skipped: every task id skipped by this evaluation.
    :param extra: more keys, e.g. a sensor's waits.
    """
    record: dict[str, Any] = {
        "gate": gate,
        "dagId": dag_id,
        "runId": run_id,
        "tryNumber": try_number,
        "deadlineRule": deadline_rule,
        **table.as_dict(),
        "guard": list(guard),
        "skipped": list(skipped),
        "workUnit": work_unit,
        # the record is stored and shown: never with the URL's credentials
        "api": without_userinfo(api),
        "requests": requests,
        "claims": {"safeRepeat": "asserted by the DAG author, not proven by the gate"},
        "capacityNote": (
            "pool numbers are as read at asOf (this gate included when it runs in that pool); "
            "free workers are not pool slots"
        ),
        **(dict(extra) if extra else {}),
    }
    record["statusUpdate"] = status_text(table, gate=gate, guard=guard, work_unit=work_unit)
    return record


def status_text(
    table: DecisionTable,
    *,
    gate: str,
    guard: Sequence[Mapping[str, Any]] = (),
    work_unit: object = None,
) -> str:
    """A short English update: what runs, what is held back, then one line per target."""
    lines = [
        f"Retry window gate {gate} as of {table.as_of.format('YYYY-MM-DD HH:mm:ss[Z]')}, "
        f"deadline {table.deadline.format('YYYY-MM-DD HH:mm:ss[Z]')}"
        + (" (passed)" if table.as_of > table.deadline else "")
        + "."
    ]
    if isinstance(work_unit, Mapping) and work_unit:
        lines.append(
            "Unit of work: " + ", ".join(f"{key}={value}" for key, value in work_unit.items()) + "."
        )
    run = [item["taskId"] for item in guard if item["action"] == "run"]
    held = [item["taskId"] for item in guard if item["action"] == "skip"]
    if guard:
        lines.append(
            f"May run: {', '.join(run) or 'none'}. Held back: {', '.join(held) or 'none'}."
        )
    lines.extend(row.status for row in table.decisions)
    if table.budget is not None:
        lines.append(f"Budget: {table.budget.reason}.")
    lines.append(
        "No job was submitted, cancelled or observed by the gate; estimates are not approvals."
    )
    return "\n".join(lines)
