"""Page: the Retry window view as one self-contained HTML document.

Rendered on the server from :mod:`~airflow_retrywindow.plugins.decision_rows`
with the Jinja2 templates shipped in ``plugins/templates``: the timeline is
inline SVG, the style sheet shipped in this package is inlined, and the page
has no script and loads nothing, so it works without a network. Autoescape
escapes every value; this module only prepares the data the templates show.
Nothing here imports Airflow.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Any

import pendulum
from jinja2 import Environment, PackageLoader, StrictUndefined, Template

from airflow_retrywindow.labels import UTC_CLOCK, label
from airflow_retrywindow.links.addresses import ViewLinks
from airflow_retrywindow.model.decisions import lets_run_now
from airflow_retrywindow.plugins.breaker_rows import Breakers
from airflow_retrywindow.plugins.decision_rows import (
    DecisionRow,
    GateRecord,
    Replay,
    formatted,
    override_sentence,
)
from airflow_retrywindow.plugins.run_summary import MAX_PAGE_ROWS, Paging, TaskSummary
from airflow_retrywindow.plugins.timeline import LABEL_PAD, WIDTH, Stretch, Timeline
from airflow_retrywindow.verdicts import Role, verdict

#: a breaker's phase as a badge's tone: holding everything, holding some, holding nothing
_STATE_TONES = {"open": "refuse", "recovering": "wait", "limited": "wait", "closed": "allow"}
#: what the view shows instead of a decision when none was taken or none can be read
UNDECIDED = frozenset({"gate-error", "unreadable"})
#: a badge's tone for each role a verdict has in the view (the verdicts table gives the role)
TONES = {Role.RUNS: "allow", Role.WAITING: "wait", Role.REFUSED: "refuse"}
#: the height of one label row of the timeline
ROW = 14.0
BAR = 20.0
_NOT_DECIDING = (
    "Times are UTC. The gate decides and explains; it never submits, cancels or polls a job "
    "(of a resumable job it reads the status once, before deciding), proves idempotency or "
    "approves a retry."
)


@cache
def style_sheet() -> str:
    """The view's style sheet, shipped in the package."""
    return (files("airflow_retrywindow.plugins") / "static" / "retry_window.css").read_text("utf-8")


def task_page(
    links: ViewLinks,
    *,
    task_id: str,
    map_index: int,
    policy: Sequence[DecisionRow],
    records: Sequence[GateRecord],
    paging: Paging | None = None,
    notes: Sequence[str] = (),
    breakers: Breakers | None = None,
) -> str:
    """The view of one task instance: the policy's decisions and the task's own record.

    :param links: the view's addresses for the run.
    :param task_id: the task instance's task id.
    :param map_index: its map index.
    :param policy: the policy's decisions about it, oldest first.
    :param records: its decision record, when it is a gate or a sensor (read with
        ``paging``'s window when it has many targets).
    :param paging: which targets of a long record the page shows.
    :param notes: what the page leaves out and why (a look-alike of a record).
    :param breakers: the run's breaker pools, each as its description holds it.
    """
    return _template("task.html").render(
        title=f"Retry window · {task_id}",
        links=links,
        task_id=task_id,
        map_index=map_index,
        policy=policy,
        records=records,
        paging=_Pager(links.task(task_id, map_index) + "&", paging or Paging()),
        notes=notes,
        breakers=breakers,
        **_document(),
    )


def run_page(
    links: ViewLinks,
    *,
    policy: Sequence[tuple[str, int, Sequence[DecisionRow]]],
    records: Sequence[GateRecord],
    summaries: Sequence[TaskSummary] = (),
    paging: Paging | None = None,
    notes: Sequence[str] = (),
    breakers: Breakers | None = None,
) -> str:
    """The view of one DAG run: every decision of every task, or a summary where there are many.

    :param links: the view's addresses for the run.
    :param policy: per task instance (task id, map index), the policy's decisions,
        for the tasks shown in full.
    :param records: every gate's and sensor's decision record in the run (read
        with ``paging``'s window when one has many targets).
    :param summaries: per task with many task instances, its summary.
    :param paging: which rows of the summarised lists the page shows.
    :param notes: what the page leaves out and why (look-alikes of a record).
    :param breakers: the run's breaker pools, each as its description holds it.
    """
    return _template("run.html").render(
        title=f"Retry window · {links.run_id}",
        links=links,
        rows=[row for _, _, decided in policy for row in decided],
        records=records,
        summaries=summaries,
        paging=_Pager(links.run + "?", paging or Paging()),
        notes=notes,
        breakers=breakers,
        **_document(),
    )


def fixture_json(fixture: object) -> str:
    """A stored fixture as the file ``airflow-retrywindow evaluate`` reads."""
    return json.dumps(fixture, indent=2) + "\n"


# -- the templates ------------------------------------------------------------------------


@cache
def _environment() -> Environment:
    environment = Environment(
        loader=PackageLoader("airflow_retrywindow.plugins", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )
    filters: dict[str, Callable[..., Any]] = {
        "tone": _tone,
        "state_tone": lambda state: _STATE_TONES.get(state, "error"),
        "formatted": formatted,
        "or_dash": _or_dash,
        "named": _named,
        "attempts": _attempts,
        "article_facts": _article_facts,
        "record_facts": _record_facts,
        "job_answers": _job_answers,
        "override_sentence": override_sentence,
        "stored_json": _stored_json,
        "drawing": _drawing,
        "g": lambda number: format(number, "g"),
        "zip": lambda first, second: zip(first, second, strict=True),
    }
    environment.filters.update(filters)
    return environment


def _template(name: str) -> Template:
    return _environment().get_template(name)


def _document() -> dict[str, str]:
    return {"style_sheet": style_sheet(), "not_deciding": _NOT_DECIDING}


# -- what a section shows ------------------------------------------------------------------


@dataclass(frozen=True)
class _Shown:
    """Which rows of a long list a page shows, and the links to the others."""

    total: int
    first: int
    shown: int
    page: int
    note: str
    where: str
    links: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class _Pager:
    """The page's address and paging, to say which rows of a long list it shows."""

    address: str
    paging: Paging

    def at(self, total: int, first: int, shown: int) -> _Shown:
        """Rows ``first`` to ``first + shown`` of ``total``."""
        at = self.paging
        pages = at.pages(total)
        links = []
        if at.page > 1:
            links.append(self._link(min(at.page - 1, pages), f"previous {at.limit:,}"))
        if first + shown < total:
            links.append(self._link(at.page + 1, f"next {at.limit:,}"))
        hidden = total - shown
        where = (
            f" Page {min(at.page, pages)} of {pages} (the address's page= and limit= choose "
            f"another, up to {MAX_PAGE_ROWS} rows a page)."
        )
        return _Shown(
            total=total,
            first=first,
            shown=shown,
            page=at.page,
            note=f" {hidden:,} more are not shown on this page." if hidden > 0 else "",
            where=where if pages > 1 else "",
            links=tuple(links),
        )

    def _link(self, page: int, text: str) -> tuple[str, str]:
        return f"{self.address}page={page}&limit={self.paging.limit}", text


def _article_facts(row: DecisionRow) -> list[tuple[str, object]]:
    told = "Airflow was told" if row.decided_by == "RetryWindowPolicy" else "Guarded work"
    facts = [
        ("Decided", formatted(row.decided_at) if row.decided_at else None),
        ("Try", _or_dash(row.try_number) if row.try_number is not None else None),
        ("Deadline", _deadline(row.deadline, row.deadline_rule)),
        ("Attempts", _attempts(row) if row.attempts is not None else None),
        ("Failure class", row.failure),
        (told, row.told),
        ("Check", row.check),
        ("Unit of work", row.work_unit),
        ("Pool capacity", row.capacity),
        ("Estimate", row.estimate),
        ("Status update", row.status),
    ]
    return [(name, value) for name, value in facts if value]


def _record_facts(record: GateRecord) -> list[tuple[str, object]]:
    facts = [
        ("Deadline", _deadline(record.deadline, record.deadline_rule)),
        ("Unit of work", record.work_unit),
        ("Budget", record.budget),
    ]
    return [(name, value) for name, value in facts if value]


def _job_answers(row: DecisionRow) -> tuple[tuple[str, str], ...]:
    """The reconciled job's facts and what the next try does, as (question, answer)."""
    if row.reconciliation is None:
        return ()
    start_at = formatted(row.start_at) if row.start_at else None
    return row.reconciliation.answers(formatted, action=row.action, start_at=start_at)


def _stored_json(replay: Replay) -> str:
    return json.dumps({"fixture": replay.fixture, "result": replay.result}, indent=2)


# -- the timeline picture ---------------------------------------------------------------


def _drawing(timeline: Timeline) -> dict[str, Any]:
    """Where each part of the timeline picture goes, in the SVG's units."""
    bar_top = timeline.rows * ROW + 8
    axis = bar_top + BAR + 6
    late = [item for item in timeline.stretches if item.kind == "late"]
    bars = [_bar(item) for item in timeline.stretches if item.kind != "late"]
    lines = {"deadline": "tl-deadline", "finish": "tl-finish late" if late else "tl-finish"}
    labels = {"deadline": "tl-label deadline", "finish": "tl-label late" if late else "tl-label"}
    instants = [
        {
            "kind": item.kind,
            "x": item.x,
            "top": (item.row + 1) * ROW - 10,
            "line": lines.get(item.kind, "tl-tick"),
            "label_class": labels.get(item.kind, "tl-label"),
            "label_x": item.x + (LABEL_PAD if item.anchor == "start" else -LABEL_PAD),
            "label_y": (item.row + 1) * ROW,
            "anchor": item.anchor,
            "label": item.label,
        }
        for item in timeline.instants
    ]
    return {
        "width": WIDTH,
        "height": axis + 6,
        "axis": axis,
        "bar": BAR,
        "bar_top": bar_top,
        "bar_text": bar_top + BAR / 2 + 4,
        "late_top": bar_top - 4,
        "late_height": axis - (bar_top - 4),
        "late": [
            {"x0": item.x0, "width": max(item.x1 - item.x0, 1.5), "label": item.label}
            for item in late
        ],
        "bars": bars,
        "instants": instants,
    }


def _bar(item: Stretch) -> dict[str, Any]:
    """One stretch as a bar, labelled inside when the label fits."""
    width = max(item.x1 - item.x0, 1.5)
    span = f"{item.label}: {item.start.format(UTC_CLOCK)} to {item.end.format(UTC_CLOCK)}"
    return {
        "kind": item.kind,
        "x0": item.x0,
        "width": width,
        "label": item.label,
        "text": width >= len(item.label) * 5.6 + 8,
        "span": span,
    }


# -- small pieces -------------------------------------------------------------------------


def _named(row: DecisionRow) -> str:
    """The task a row is about, with its map index when it is mapped."""
    return label(row.task_id, row.map_index)


def _tone(decision: str) -> str:
    found = verdict(decision)
    if found is not None:
        return TONES[found.role]
    if lets_run_now(decision):  # not-attempted: a first run, not a retry
        return "allow"
    if decision in UNDECIDED:
        return "error"
    return "refuse"


def _deadline(when: pendulum.DateTime | None, rule: str | None) -> str | None:
    if when is None:
        return None
    text = formatted(when)
    return f"{text} ({rule})" if rule else text


def _attempts(row: DecisionRow) -> str:
    if row.attempts is None:
        return "-"
    budget = f" of {row.max_attempts}" if row.max_attempts is not None else ""
    return f"{row.attempts}{budget}"


def _or_dash(value: object) -> str:
    return "-" if value is None else str(value)
