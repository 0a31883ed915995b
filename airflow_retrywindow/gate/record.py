"""Record: the decision record a gate publishes as its ``return_value`` XCom.

One JSON object per evaluation, pushed before anything is skipped, holding:

* ``decisions`` - per task instance (one per target, or for a mapped target one
  per map index: ``taskId`` and ``mapIndex``, ``-1`` when not mapped): the
  model's decision, its model id (``modelId``), its numbers in real time
  (``attempts``, ``observedAt``, ``lastFinishedAt``, ``backoffSeconds``,
  ``earliestStart``, ``estimatedFinish``, ``slackSeconds``), how the state was
  found, the one-line ``reason``, the English ``status``, the ``capacity``
  verdict of its pool, and ``estimateSource``: where each value it was decided
  on came from, per field (``duration``, ``validation``, ``safeRepeat``,
  ``deadline``): ``policy`` (the target's ``RetryWindowPolicy``), ``gate`` (the
  gate's or sensor's own argument; the target has no policy), ``gate and policy``
  (both, the same), ``gate override: <reason>`` (``Work.override``, with the DAG
  author's reason), or, for the deadline of a target without a policy, ``other
  targets' policies`` (see :mod:`~airflow_retrywindow.gate.targets`);
* ``budget`` - the budget verdict, when the gate has a budget;
* ``fixtures`` - every fixture exactly as the model evaluated it, with its
  ``result``, clock ``origin``, ``taskIds`` (model id -> task id) and
  ``mapIndexes`` (model id -> map index): pipe ``fixture`` into
  ``airflow-retrywindow evaluate`` to replay it offline;
* ``guard`` and ``skipped`` - what may run and what was held back, and why;
* ``workUnit`` - the unit of work the decision is about;
* ``override`` - with an approval task (``approval=``): what its answer let
  through, who approved, when, the stated reason and the targets, or why nothing
  (:meth:`~airflow_retrywindow.gate.approve.Override.as_dict`); the decisions
  above stay the model's, and a guarded task it lets through carries the words
  ``refused by the model, overridden by <user>`` in ``guard``;
* ``statusUpdate`` - a short English update for the people on the incident: one
  line per target that is not mapped; for a mapped one, its decisions counted,
  then the held-back map indexes (the first :data:`MAX_MAPPED_LINES`).

Every text of the record but the names it is matched on and the fixtures passes
:func:`~airflow_retrywindow.redaction.safe_json`: values registered with
``mask_secret`` and credentials (URL userinfo, ...) show as ``***``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow_retrywindow.gate.approve import Override
from airflow_retrywindow.gate.decide import DecisionTable, TargetDecision
from airflow_retrywindow.labels import UTC_SHOWN
from airflow_retrywindow.records import decision_record

#: held-back map indexes of one target the status update shows a line for
MAX_MAPPED_LINES = 10


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
    estimate_sources: Mapping[str, Mapping[str, str]] | None = None,
    override: Override | None = None,
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
    :param estimate_sources: task id -> field -> where its value came from.
    :param override: what the gate's approval task let through, with an approval task.
    """
    return decision_record.written(
        gate=gate,
        dag_id=dag_id,
        run_id=run_id,
        try_number=try_number,
        deadline_rule=deadline_rule,
        table=table.as_dict(),
        guard=guard,
        skipped=skipped,
        work_unit=work_unit,
        api=api,
        requests=requests,
        extra=extra,
        estimate_sources=estimate_sources,
        override=None if override is None else override.as_dict(),
        status_update=status_text(
            table, gate=gate, guard=guard, work_unit=work_unit, override=override
        ),
    )


def status_text(
    table: DecisionTable,
    *,
    gate: str,
    guard: Sequence[Mapping[str, Any]] = (),
    work_unit: object = None,
    override: Override | None = None,
) -> str:
    """A short English update: what runs, what is held back, then one line per target.

    A guarded task let through by an approval is named with the words
    ``refused by the model, overridden by <user>``, and the override (or why there
    is none) gets a line of its own after the targets'.
    """
    lines = [
        f"Retry window gate {gate} as of {table.as_of.format(UTC_SHOWN)}, "
        f"deadline {table.deadline.format(UTC_SHOWN)}"
        + (" (passed)" if table.as_of > table.deadline else "")
        + "."
    ]
    if isinstance(work_unit, Mapping) and work_unit:
        lines.append(
            "Unit of work: " + ", ".join(f"{key}={value}" for key, value in work_unit.items()) + "."
        )
    run = [
        f"{item['taskId']} ({item['override']})" if item.get("override") else item["taskId"]
        for item in guard
        if item["action"] == "run"
    ]
    held = [item["taskId"] for item in guard if item["action"] == "skip"]
    if guard:
        lines.append(
            f"May run: {', '.join(run) or 'none'}. Held back: {', '.join(held) or 'none'}."
        )
    lines.extend(_target_lines(table.decisions))
    if override is not None:
        lines.append(override.status_line())
    if table.budget is not None:
        lines.append(f"Budget: {table.budget.reason}.")
    lines.append(
        "No job was submitted, cancelled or observed by the gate; estimates are not approvals."
    )
    return "\n".join(lines)


def _target_lines(decisions: Sequence[TargetDecision]) -> list[str]:
    """One status line per target; a mapped target's map indexes summed up, then the held."""
    by_target: dict[str, list[TargetDecision]] = {}
    for row in decisions:
        by_target.setdefault(row.task_id, []).append(row)
    lines: list[str] = []
    for task_id, rows in by_target.items():
        if all(row.map_index < 0 for row in rows):
            lines.extend(row.status for row in rows)
            continue
        counts: dict[str, int] = {}
        for row in rows:
            counts[row.decision] = counts.get(row.decision, 0) + 1
        summary = ", ".join(f"{count} {decision}" for decision, count in counts.items())
        lines.append(f"{task_id}: {len(rows)} map indexes: {summary}.")
        held = [row for row in rows if row.blockers()]
        lines.extend(row.status for row in held[:MAX_MAPPED_LINES])
        if len(held) > MAX_MAPPED_LINES:
            lines.append(
                f"{task_id}: and {len(held) - MAX_MAPPED_LINES} more map indexes held back."
            )
    return lines
