"""Run summary: a run's many decisions, counted and paged, so its page stays small and fast.

A run of a task mapped over 1,000 map indexes, each with up to 20 stored
decisions, would otherwise be a page of 20,000 decisions, each replayed and
drawn. The run page shows in full only a task with at most
:data:`FULL_DETAIL` task instances, and a record with at most
:data:`FULL_DETAIL` targets. Beyond that it summarises:

* per task, how many task instances have each latest decision, as stored
  (counted without replaying anything);
* one page of task instances (:data:`PAGE_ROWS` by default), each with its
  latest decision replayed and a link to its own view, which has every decision
  with its timeline and fixture; the page says which rows it shows and links the
  others (``?page=``, ``&limit=``).

Nothing here imports Airflow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from airflow_retrywindow.plugins.decision_rows import (
    DecisionRow,
    decision_counts,
    policy_entries,
    policy_row,
    policy_rows,
    stored_policy_decision,
)

#: task instances of one task, or targets of one record, the run page shows in full
FULL_DETAIL = 20
#: rows of a summarised list on one page, unless the address asks for another number
PAGE_ROWS = 50
#: the most rows of a summarised list one page shows, whatever the address asks
MAX_PAGE_ROWS = 500


@dataclass(frozen=True)
class Paging:
    """Which rows of a summarised list a page shows.

    :param page: the page, from 1.
    :param limit: rows per page, from 1 to :data:`MAX_PAGE_ROWS`.
    """

    page: int = 1
    limit: int = PAGE_ROWS

    def __post_init__(self) -> None:
        if self.page < 1:
            raise ValueError(f"page must be a whole number from 1 up, got {self.page}")
        if not 1 <= self.limit <= MAX_PAGE_ROWS:
            raise ValueError(f"limit must be from 1 to {MAX_PAGE_ROWS}, got {self.limit}")

    def window(self, total: int) -> range:
        """The positions of the rows this page shows, out of ``total``."""
        start = min((self.page - 1) * self.limit, total)
        return range(start, min(start + self.limit, total))

    def pages(self, total: int) -> int:
        """How many pages ``total`` rows take (at least one)."""
        return max(1, -(-total // self.limit))


@dataclass(frozen=True)
class TaskSummary:
    """The policy's decisions about the task instances of one task, summarised.

    :param task_id: the task.
    :param instances: how many of its task instances stored decisions.
    :param decisions: how many decisions they stored in all.
    :param counts: per latest decision, as stored, how many task instances have it.
    :param rows: for the task instances on this page, each one's latest decision (replayed).
    :param stored: for the same task instances, how many decisions each stored.
    :param first: the position of the first of them among all, in map index order.
    """

    task_id: str
    instances: int
    decisions: int
    counts: tuple[tuple[str, int], ...]
    rows: tuple[DecisionRow, ...]
    stored: tuple[int, ...]
    first: int


#: one task instance's stored evidence: (map index, stored value)
Evidence = tuple[int, object]
#: the policy's decisions about one task instance, shown in full: (task id, map index, rows)
Detailed = tuple[str, int, list[DecisionRow]]


def policy_sections(
    evidence: Sequence[tuple[str, int, object]], paging: Paging
) -> tuple[list[Detailed], list[TaskSummary]]:
    """A run's policy evidence as the run page shows it: in full, or summarised per task.

    :param evidence: per task instance, its task id, map index and stored evidence,
        sorted by task id and map index.
    :param paging: which task instances a summarised task shows.
    :returns: the task instances shown in full, and the summaries of the tasks
        with more than :data:`FULL_DETAIL` task instances.
    """
    by_task: dict[str, list[Evidence]] = {}
    for task_id, map_index, value in evidence:
        by_task.setdefault(task_id, []).append((map_index, value))
    detailed: list[Detailed] = []
    summaries: list[TaskSummary] = []
    for task_id, instances in by_task.items():
        if len(instances) > FULL_DETAIL:
            summaries.append(summarise(task_id, instances, paging))
            continue
        detailed += [
            (task_id, map_index, policy_rows(task_id, map_index, value))
            for map_index, value in instances
        ]
    return detailed, summaries


def record_window(record: object, paging: Paging) -> range | None:
    """The targets of a decision record a page reads into rows; ``None``: all of them.

    A record with more than :data:`FULL_DETAIL` targets is read one page at a time.
    """
    decisions = record.get("decisions") if isinstance(record, Mapping) else None
    if not isinstance(decisions, list) or len(decisions) <= FULL_DETAIL:
        return None
    return paging.window(len(decisions))


def summarise(task_id: str, evidence: Sequence[Evidence], paging: Paging) -> TaskSummary:
    """One task's task instances: the latest decisions counted, one page of them read.

    :param task_id: the task.
    :param evidence: per task instance, its map index and stored evidence, in map index order.
    :param paging: which task instances to read into rows.
    """
    entries = [policy_entries(value) for _, value in evidence]
    counts = decision_counts(
        stored_policy_decision(found[-1]) if found else "unreadable" for found in entries
    )
    window = paging.window(len(evidence))
    rows = tuple(_latest_row(task_id, *evidence[index], entries[index]) for index in window)
    return TaskSummary(
        task_id=task_id,
        instances=len(evidence),
        decisions=sum(len(found) for found in entries),
        counts=counts,
        rows=rows,
        stored=tuple(len(entries[index]) for index in window),
        first=window.start,
    )


def _latest_row(task_id: str, map_index: int, value: object, found: list[object]) -> DecisionRow:
    if not found:  # says what was stored instead of a decisions list
        return policy_rows(task_id, map_index, value)[0]
    return policy_row(task_id, map_index, found[-1], len(found) - 1, detailed=False)
