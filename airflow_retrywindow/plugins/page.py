"""Page: the Retry window view as one self-contained HTML document.

Rendered on the server from :mod:`~airflow_retrywindow.plugins.decision_rows`:
the timeline is inline SVG, the style sheet shipped in this package is inlined,
and the page has no script and loads nothing, so it works without a network.
Every value is escaped. Nothing here imports Airflow.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from functools import cache
from html import escape
from importlib.resources import files

import pendulum

from airflow_retrywindow.labels import UTC_CLOCK, label
from airflow_retrywindow.links.addresses import ViewLinks
from airflow_retrywindow.model.decisions import lets_run_now
from airflow_retrywindow.plugins.decision_rows import (
    DecisionRow,
    GateRecord,
    Replay,
    formatted,
    override_sentence,
)
from airflow_retrywindow.plugins.dependency_rows import Dependencies, DependencySection
from airflow_retrywindow.plugins.run_summary import MAX_PAGE_ROWS, Paging, TaskSummary
from airflow_retrywindow.plugins.timeline import LABEL_PAD, WIDTH, Instant, Stretch, Timeline
from airflow_retrywindow.records.override import OverrideEntry
from airflow_retrywindow.verdicts import Role, verdict

#: a dependency's state as a badge's tone: failing, coming back, healthy
_STATE_TONES = {"open": "refuse", "recovering": "wait", "closed": "allow"}
#: what the view shows instead of a decision when none was taken or none can be read
UNDECIDED = frozenset({"gate-error", "unreadable"})
#: a badge's tone for each role a verdict has in the view (the verdicts table gives the role)
TONES = {Role.RUNS: "allow", Role.WAITING: "wait", Role.REFUSED: "refuse"}
#: the height of one label row of the timeline
ROW = 14.0
BAR = 20.0
#: beside the model's badge of a refusal an approval overrode
_OVERRIDDEN_BADGE = ' <span class="badge override">overridden</span>'
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
    dependencies: Dependencies | None = None,
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
    :param dependencies: the run's pools as dependencies, as its task instances stored them.
    """
    mapped = f" · map index {map_index}" if map_index >= 0 else ""
    body = [
        "<header>",
        f"<h1>Retry window · {_e(task_id)}</h1>",
        f'<p class="where">DAG {_e(links.dag_id)} · run {_e(links.run_id)}{mapped} · '
        f'<a href="{_e(links.run)}">every decision of this run</a></p>',
        "</header>",
    ]
    if not policy and not records:
        body.append(
            '<p class="empty">No retry window decision is recorded for this task instance: '
            "it has no RetryWindowPolicy that decided yet, and it is not a gate or a sensor "
            "that published a decision record.</p>"
        )
    if dependencies:
        body += _dependency_section(dependencies)
    if policy:
        body += _policy_section(links, policy, with_task=False)
    here = links.task(task_id, map_index) + "&"
    for record in records:
        body += _record_section(links, record, paging=(here, paging or Paging()))
    body += _notes(notes)
    return _document(f"Retry window · {task_id}", body)


def run_page(
    links: ViewLinks,
    *,
    policy: Sequence[tuple[str, int, Sequence[DecisionRow]]],
    records: Sequence[GateRecord],
    summaries: Sequence[TaskSummary] = (),
    paging: Paging | None = None,
    notes: Sequence[str] = (),
    dependencies: Dependencies | None = None,
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
    :param dependencies: the run's pools as dependencies, as its task instances stored them.
    """
    body = [
        "<header>",
        f"<h1>Retry window · run {_e(links.run_id)}</h1>",
        f'<p class="where">DAG {_e(links.dag_id)} · every decision of the run</p>',
        "</header>",
    ]
    rows = [row for _, _, decided in policy for row in decided]
    if not rows and not records and not summaries:
        body.append('<p class="empty">No retry window decision is recorded for this run.</p>')
    if dependencies:
        body += _dependency_section(dependencies)
    if rows:
        body += _policy_section(links, rows, with_task=True)
    here = links.run + "?"
    for summary in summaries:
        body += _summary_section(links, summary, paging=(here, paging or Paging()))
    for record in records:
        body += _record_section(links, record, paging=(here, paging or Paging()), articles=False)
    body += _notes(notes)
    return _document(f"Retry window · {links.run_id}", body)


def _notes(notes: Sequence[str]) -> list[str]:
    """What the page leaves out, one paragraph each."""
    if not notes:
        return []
    paragraphs = [f'<p class="problem">{_e(note)}</p>' for note in notes]
    return ['<section class="notes">', *paragraphs, "</section>"]


def fixture_json(fixture: object) -> str:
    """A stored fixture as the file ``airflow-retrywindow evaluate`` reads."""
    return json.dumps(fixture, indent=2) + "\n"


# -- sections -------------------------------------------------------------------------


def _dependency_section(found: Dependencies) -> list[str]:
    """Each pool the run's retries depend on: its latest stored state, and what is unreadable."""
    count = len(found.sections)
    out = [
        '<section class="dependencies">',
        f"<h2>Dependencies · {count} pool{'s' if count != 1 else ''}</h2>",
        '<p class="where">Each pool as its task instances last read it (latest by read time '
        "among the run&#x27;s task instances).</p>",
    ]
    out += [_dependency(section) for section in found.sections]
    out += [
        f'<p class="problem">Could not read a stored dependency state: {_e(problem)}</p>'
        for problem in found.problems
    ]
    out.append("</section>")
    return out


def _dependency(section: DependencySection) -> str:
    tone = _STATE_TONES.get(section.state, "error")
    parts = [
        f'<div class="dependency {tone}" data-pool="{_e(section.pool)}" '
        f'data-state="{_e(section.state)}">',
        f'<h3><span class="badge {tone}">{_e(section.state)}</span> Pool {_e(section.pool)}</h3>',
        f'<p class="reason">{_badge(section.decision)} {_e(section.reason)}</p>',
        _facts(section.facts),
    ]
    if section.own:
        parts.append(f'<p class="own">{_e(section.own)}</p>')
    parts.append("</div>")
    return "\n".join(parts)


def _policy_section(links: ViewLinks, rows: Sequence[DecisionRow], *, with_task: bool) -> list[str]:
    count = f"{len(rows)} decision{'s' if len(rows) != 1 else ''}"
    when = (
        "at failure time and at try start"
        if any(row.check == "retry-start" for row in rows)
        else "at failure time"
    )
    head = [
        "When",
        "Try",
        "Decision",
        "Reason",
        "Deadline",
        "Attempts",
        "Failure",
        "Airflow was told",
    ]
    if with_task:
        head.insert(0, "Task")
    table = [
        [
            *([_task_link(links, row)] if with_task else []),
            _e(formatted(row.decided_at)),
            _e(_or_dash(row.try_number)),
            _badge(row.decision),
            _e(row.reason) + _start_check_flag(row),
            _e(formatted(row.deadline)),
            _e(_attempts(row)),
            _e(row.failure or "-"),
            _e(row.told or "-"),
        ]
        for row in rows
    ]
    out = [
        '<section class="policy">',
        f"<h2>RetryWindowPolicy · {count} {when}</h2>",
        _table(head, table),
    ]
    out += [
        _article(links, row, title=f"{_named(row)} · try {_or_dash(row.try_number)}")
        for row in rows
    ]
    out.append("</section>")
    return out


def _summary_section(
    links: ViewLinks, summary: TaskSummary, *, paging: tuple[str, Paging]
) -> list[str]:
    """One task's many task instances: counts, then one page of latest decisions."""
    instances = f"{summary.instances:,} task instances"
    head = ["Task", "When", "Try", "Latest decision", "Reason", "Attempts", "Failure"]
    head += ["Airflow was told", "Decisions"]
    table = [
        [
            _task_link(links, row),
            _e(formatted(row.decided_at)),
            _e(_or_dash(row.try_number)),
            _badge(row.decision),
            _e(row.reason) + (f'<p class="problem">{_e(row.problem)}</p>' if row.problem else ""),
            _e(_attempts(row)),
            _e(row.failure or "-"),
            _e(row.told or "-"),
            _e(stored),
        ]
        for row, stored in zip(summary.rows, summary.stored, strict=True)
    ]
    return [
        f'<section class="policy summarised" data-task="{_e(summary.task_id)}">',
        f"<h2>RetryWindowPolicy · {_e(summary.task_id)} · {instances} · "
        f"{summary.decisions:,} decisions</h2>",
        _counts("Latest decision of each task instance, as stored", summary.counts),
        _paged(
            paging,
            total=summary.instances,
            first=summary.first,
            shown=len(summary.rows),
            what="task instances",
            order="in map index order, each with its latest decision; each links to its own "
            "view with every decision, its timeline and its fixture",  # no markup to escape
        ),
        _table(head, table),
        "</section>",
    ]


def _counts(title: str, counts: Sequence[tuple[str, int]]) -> str:
    items = "".join(f"<li>{_badge(decision)} {count:,}</li>" for decision, count in counts)
    return f'<div class="counts"><p>{_e(title)}:</p><ul class="counts">{items}</ul></div>'


def _paged(
    paging: tuple[str, Paging], *, total: int, first: int, shown: int, what: str, order: str
) -> str:
    """Which rows the page shows, what is hidden, and the links to the others.

    :param order: how the rows are ordered and where more is, as HTML already escaped.
    """
    address, at = paging
    if shown:
        span = f"Showing {what} {first + 1:,} to {first + shown:,} of {total:,}, {order}."
    else:
        span = f"No {what} on page {at.page}: there are {total:,}."
    pages = at.pages(total)
    links = []
    if at.page > 1:
        previous = min(at.page - 1, pages)
        links.append(_page_link(address, previous, at.limit, f"previous {at.limit:,}"))
    if first + shown < total:
        links.append(_page_link(address, at.page + 1, at.limit, f"next {at.limit:,}"))
    hidden = total - shown
    note = f" {hidden:,} more are not shown on this page." if hidden > 0 else ""
    where = (
        f" Page {min(at.page, pages)} of {pages} (the address's page= and limit= choose "
        f"another, up to {MAX_PAGE_ROWS} rows a page)."
    )
    return (
        f'<p class="paged" data-total="{total}" data-shown="{shown}">{span}{_e(note)}'
        f"{_e(where) if pages > 1 else ''} {' · '.join(links)}</p>"
    )


def _page_link(address: str, page: int, limit: int, text: str) -> str:
    return f'<a href="{_e(f"{address}page={page}&limit={limit}")}">{_e(text)}</a>'


def _record_section(
    links: ViewLinks,
    record: GateRecord,
    *,
    paging: tuple[str, Paging] | None = None,
    articles: bool = True,
) -> list[str]:
    what = "Sensor" if record.kind == "sensor" else "Gate"
    out = [
        f'<section class="record" data-gate="{_e(record.task_id)}">',
        f"<h2>{what} {_e(record.task_id)} · try {_e(_or_dash(record.try_number))} · "
        f"as of {_e(formatted(record.as_of))}</h2>",
    ]
    facts = [
        ("Deadline", _deadline(record.deadline, record.deadline_rule)),
        ("Unit of work", record.work_unit),
        ("Budget", record.budget),
    ]
    out.append(_facts((name, value) for name, value in facts if value))
    if record.override is not None:
        out.append(_override_block(record.override))
    if record.guard:
        out.append(
            '<ul class="guard">'
            + "".join(f"<li>{_e(line)}</li>" for line in record.guard)
            + "</ul>"
        )
    if record.status_update:
        out.append(f'<pre class="status">{_e(record.status_update)}</pre>')
    if record.problem:
        out.append(
            f'<p class="problem">Could not read part of this record: {_e(record.problem)}</p>'
        )
    summarised = record.total_rows is not None and paging is not None
    if summarised and paging is not None and record.total_rows is not None:
        out.append(_counts("Decisions of the targets, as stored", record.counts))
        gate_view = links.task(record.task_id, record.map_index)
        order = (
            "in the record&#x27;s order"
            if articles
            else f'in the record&#x27;s order; <a href="{_e(gate_view)}">'
            f"{_e(record.task_id)}&#x27;s own view</a> shows each with its timeline and fixture"
        )
        out.append(
            _paged(
                paging,
                total=record.total_rows,
                first=record.first_row,
                shown=len(record.rows),
                what="targets",
                order=order,
            )
        )
    head = ["Target", "Target's try", "Decision", "Reason", "Attempts", "Pool capacity"]
    table = [
        [
            _e(_named(row)),
            _e(_or_dash(row.try_number)),
            _badge(row.decision) + (_OVERRIDDEN_BADGE if row.override else ""),
            _e(row.reason),
            _e(_attempts(row)),
            _e(row.capacity or "-"),
        ]
        for row in record.rows
    ]
    out.append(_table(head, table))
    if articles or not summarised:
        out += [
            _article(links, row, title=f"{_named(row)} · decided by {record.task_id}")
            for row in record.rows
        ]
    out.append("</section>")
    return out


def _article(links: ViewLinks, row: DecisionRow, *, title: str) -> str:
    tone = _tone(row.decision)
    facts = [
        ("Decided", formatted(row.decided_at) if row.decided_at else None),
        ("Try", _or_dash(row.try_number) if row.try_number is not None else None),
        ("Deadline", _deadline(row.deadline, row.deadline_rule)),
        ("Attempts", _attempts(row) if row.attempts is not None else None),
        ("Failure class", row.failure),
        ("Airflow was told" if row.decided_by == "RetryWindowPolicy" else "Guarded work", row.told),
        ("Check", row.check),
        ("Unit of work", row.work_unit),
        ("Pool capacity", row.capacity),
        ("Estimate", row.estimate),
        ("Status update", row.status),
    ]
    parts = [
        f'<article class="decision {tone}" data-task="{_e(row.task_id)}" '
        f'data-decision="{_e(row.decision)}"{" data-overridden" if row.override else ""}>',
        f"<h3>{_badge(row.decision)}{_OVERRIDDEN_BADGE if row.override else ''} {_e(title)}</h3>",
        f'<p class="reason">{_e(row.reason or "No reason was stored.")}</p>',
    ]
    if row.override:
        # beside the model's decision, which stays as it was taken
        parts.append(f'<p class="override applied">{_e(row.override)}</p>')
    if row.problem:
        parts.append(f'<p class="problem">{_e(row.problem)}</p>')
    if row.start_check is not None:
        parts.append(_start_check_flag(row))
    if row.timeline is not None:
        parts.append(_figure(row.timeline))
    parts.append(_facts((name, value) for name, value in facts if value))
    if row.reconciliation is not None:
        parts.append(_reconciliation(row))
    if row.replay is not None:
        parts.append(_replay(links, row.replay))
    parts.append("</article>")
    return "\n".join(parts)


def _start_check_flag(row: DecisionRow) -> str:
    """The flag of a failed try that ran without its retry-start check ("" for the others)."""
    if row.start_check is None:
        return ""
    return f'<p class="problem start-check-not-run">{_e(row.start_check)}</p>'


def _reconciliation(row: DecisionRow) -> str:
    """The resumable job read before deciding: the job, its status, the three questions."""
    job = row.reconciliation
    if job is None:
        return ""
    start_at = formatted(row.start_at) if row.start_at else None
    answers = job.answers(formatted, action=row.action, start_at=start_at)
    return (
        f'<div class="reconciliation" data-outcome="{_e(job.outcome)}">'
        f"<h4>Reconciled before deciding: {_e(job.job)}</h4>" + _facts(answers) + "</div>"
    )


def _override_block(entry: OverrideEntry) -> str:
    """The gate's approved override, clearly apart from the model's decisions; or why none."""
    if not entry.applied:
        return f'<p class="override none">{_e(override_sentence(entry))}</p>'
    refused = ", ".join(f"{name} {decision}" for name, decision in entry.overridden)
    notes = [
        f"Approved through {entry.approval}. The model's decisions below are unchanged"
        + (f": {refused}." if refused else "."),
    ]
    if entry.note:
        notes.append(f"Not released: {entry.note}.")
    return (
        '<div class="override applied" role="note"><h3>Approved override</h3>'
        f"<p><strong>{_e(override_sentence(entry))}</strong></p>"
        + "".join(f"<p>{_e(line)}</p>" for line in notes)
        + "</div>"
    )


def _replay(links: ViewLinks, replay: Replay) -> str:
    url = links.fixture(replay.owner, replay.map_index, replay.name)
    check = (
        '<span class="replays-ok">replays to the stored result</span>'
        if replay.replays
        else '<span class="problem">does not replay to the stored result</span>'
    )
    commands = "\n".join(f"$ {command}" for command in replay.commands())
    stored = json.dumps({"fixture": replay.fixture, "result": replay.result}, indent=2)
    return (
        '<div class="replay">'
        f'<a class="fixture" href="{_e(url)}" download="{_e(replay.filename)}">'
        f"Download the fixture {_e(replay.filename)}</a> · {check}"
        f'<pre class="commands">{_e(commands)}</pre>'
        f"<details><summary>Fixture and stored result</summary><pre>{_e(stored)}</pre></details>"
        "</div>"
    )


# -- the timeline picture ---------------------------------------------------------------


def _figure(timeline: Timeline) -> str:
    legend = "".join(
        f'<li><i class="tl-{_e(item.kind)}"></i>{_e(item.label)}</li>'
        for item in timeline.stretches
    )
    return (
        '<figure class="timeline">'
        + timeline_svg(timeline)
        + f"<figcaption>{_e(timeline.summary)}</figcaption>"
        + (f'<ul class="legend">{legend}</ul>' if legend else "")
        + "</figure>"
    )


def timeline_svg(timeline: Timeline) -> str:
    """The timeline as an inline SVG picture."""
    bar_top = timeline.rows * ROW + 8
    axis = bar_top + BAR + 6
    height = axis + 6
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH:g} {height:g}" '
        f'role="img" aria-label="{_e(timeline.summary)}">',
        f"<title>{_e(timeline.summary)}</title>",
    ]
    late = [item for item in timeline.stretches if item.kind == "late"]
    bars = [item for item in timeline.stretches if item.kind != "late"]
    parts += [_late_zone(item, top=bar_top - 4, bottom=axis) for item in late]
    parts += [_bar(item, top=bar_top) for item in bars]
    parts.append(f'<line class="tl-axis" x1="0" y1="{axis:g}" x2="{WIDTH:g}" y2="{axis:g}"/>')
    # every line before any label, so that no line crosses a label
    parts += [_instant_line(item, late=bool(late), bottom=axis) for item in timeline.instants]
    parts += [_instant_label(item, late=bool(late)) for item in timeline.instants]
    parts.append("</svg>")
    return "".join(parts)


def _late_zone(item: Stretch, *, top: float, bottom: float) -> str:
    width = max(item.x1 - item.x0, 1.5)
    return (
        f'<rect class="tl-late" x="{item.x0:g}" y="{top:g}" width="{width:g}" '
        f'height="{bottom - top:g}"><title>{_e(item.label)}</title></rect>'
    )


def _bar(item: Stretch, *, top: float) -> str:
    width = max(item.x1 - item.x0, 1.5)
    text = ""
    if width >= len(item.label) * 5.6 + 8:
        text = (
            f'<text class="tl-bar-text" x="{item.x0 + 4:g}" y="{top + BAR / 2 + 4:g}">'
            f"{_e(item.label)}</text>"
        )
    span = f"{item.label}: {item.start.format(UTC_CLOCK)} to {item.end.format(UTC_CLOCK)}"
    return (
        f'<g><rect class="tl-{_e(item.kind)}" x="{item.x0:g}" y="{top:g}" width="{width:g}" '
        f'height="{BAR:g}" rx="2"><title>{_e(span)}</title></rect>{text}</g>'
    )


def _instant_line(item: Instant, *, late: bool, bottom: float) -> str:
    line = {"deadline": "tl-deadline", "finish": "tl-finish late" if late else "tl-finish"}
    top = (item.row + 1) * ROW - 10
    return (
        f'<line class="{line.get(item.kind, "tl-tick")}" data-kind="{_e(item.kind)}" '
        f'x1="{item.x:g}" y1="{top:g}" x2="{item.x:g}" y2="{bottom:g}"/>'
    )


def _instant_label(item: Instant, *, late: bool) -> str:
    label = {"deadline": "tl-label deadline", "finish": "tl-label late" if late else "tl-label"}
    shift = LABEL_PAD if item.anchor == "start" else -LABEL_PAD
    return (
        f'<text class="{label.get(item.kind, "tl-label")}" data-kind="{_e(item.kind)}" '
        f'x="{item.x + shift:g}" y="{(item.row + 1) * ROW:g}" text-anchor="{item.anchor}">'
        f"{_e(item.label)}</text>"
    )


# -- small pieces -------------------------------------------------------------------------


def _document(title: str, body: Iterable[str]) -> str:
    return "\n".join(
        [
            "<!doctype html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{_e(title)}</title>",
            f"<style>{style_sheet()}</style>",
            "</head><body>",
            *body,
            f"<footer>{_e(_NOT_DECIDING)}</footer>",
            "</body></html>",
        ]
    )


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A table; ``rows`` hold HTML already escaped."""
    top = "".join(f"<th>{_e(name)}</th>" for name in head)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f'<table class="summary"><thead><tr>{top}</tr></thead><tbody>{body}</tbody></table>'


def _facts(pairs: Iterable[tuple[str, object]]) -> str:
    items = "".join(f"<dt>{_e(name)}</dt><dd>{_e(value)}</dd>" for name, value in pairs)
    return f'<dl class="facts">{items}</dl>'


def _task_link(links: ViewLinks, row: DecisionRow) -> str:
    return f'<a href="{_e(links.task(row.task_id, row.map_index))}">{_e(_named(row))}</a>'


def _named(row: DecisionRow) -> str:
    """The task a row is about, with its map index when it is mapped."""
    return label(row.task_id, row.map_index)


def _badge(decision: str) -> str:
    return f'<span class="badge {_tone(decision)}">{_e(decision)}</span>'


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


def _e(value: object) -> str:
    return escape(str(value), quote=True)
