"""Timeline: one decision as a picture's geometry, so a refusal is seen, not read.

For one target of one fixture, the timeline places on a single horizontal axis
what the model weighed: when the last attempt ended, when the state was
observed, when the decision was taken, the backoff, the earliest start of the
next attempt, the attempt itself, its validation, the estimated finish, and the
deadline. A finish to the right of the deadline is the refusal.

Everything is computed here, in the model's seconds and on the fixture's clock,
and handed to :mod:`~airflow_retrywindow.plugins.page` as x positions; nothing
here knows about SVG or Airflow.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

import pendulum

from airflow_retrywindow.model.fixture import Fixture
from airflow_retrywindow.model.verdict import TaskDecision
from airflow_retrywindow.timing.clock import Clock
from airflow_retrywindow.timing.reasons import moment
from airflow_retrywindow.timing.status import TimeFormat

#: the picture's width, in SVG user units
WIDTH = 720.0
#: room left and right of the axis, so edge labels and lines stay inside
MARGIN = 12.0
#: an estimate of one label character's width at the view's font size
CHAR_WIDTH = 6.2
#: the least room between two labels on one row
LABEL_GAP = 10.0
#: the room between an instant's line and its label
LABEL_PAD = 3.0

# the order instants sharing a second are named in, and which one's kind the
# merged instant keeps (the last one listed wins)
_NAMING_ORDER = ("observed", "last-end", "decided", "earliest-start", "finish")
_LABELS = {
    "observed": "observed",
    "last-end": "last attempt ended",
    "decided": "decided",
    "earliest-start": "earliest start",
    "finish": "estimated finish",
    "deadline": "deadline",
}


@dataclass(frozen=True)
class Instant:
    """A moment on the picture, drawn as a vertical line with a label.

    :param kind: ``observed``, ``last-end``, ``decided``, ``earliest-start``,
        ``finish`` or ``deadline``; for moments that share a second, the most
        telling of them.
    :param label: what happened then, with the wall-clock time.
    :param at: the wall-clock time.
    :param x: the horizontal position.
    :param row: the label row, counted from the top, so labels never overlap.
    :param anchor: ``start`` (label to the right of the line) or ``end``.
    """

    kind: str
    label: str
    at: pendulum.DateTime
    x: float
    row: int
    anchor: str


@dataclass(frozen=True)
class Stretch:
    """A length of time on the picture, drawn as a bar.

    :param kind: ``backoff``, ``attempt``, ``validation`` or ``late`` (after the deadline).
    :param label: what it is, with its length.
    :param start: when it starts.
    :param end: when it ends.
    :param x0: where it starts.
    :param x1: where it ends.
    """

    kind: str
    label: str
    start: pendulum.DateTime
    end: pendulum.DateTime
    x0: float
    x1: float


@dataclass(frozen=True)
class Timeline:
    """The picture of one target's decision.

    :param model_id: the target's id in the fixture.
    :param decision: the model's decision.
    :param instants: the moments, left to right.
    :param stretches: the bars, left to right.
    :param rows: how many label rows the instants need.
    :param slack: seconds from the estimated finish to the deadline; negative
        when late; ``None`` when no attempt is scheduled.
    :param summary: one sentence saying what the picture shows.
    """

    model_id: str
    decision: str
    instants: tuple[Instant, ...]
    stretches: tuple[Stretch, ...]
    rows: int
    slack: int | None
    summary: str

    @property
    def width(self) -> float:
        """The picture's width."""
        return WIDTH

    def instant(self, kind: str) -> Instant | None:
        """The instant of ``kind``, if the picture has one."""
        return next((item for item in self.instants if item.kind == kind), None)

    def stretch(self, kind: str) -> Stretch | None:
        """The stretch of ``kind``, if the picture has one."""
        return next((item for item in self.stretches if item.kind == kind), None)


@dataclass(frozen=True)
class _Scale:
    """Model seconds to x positions."""

    low: int
    high: int

    def x(self, seconds: int) -> float:
        span = max(self.high - self.low, 1)
        return round(MARGIN + (seconds - self.low) / span * (WIDTH - 2 * MARGIN), 1)


def timeline(fixture: Fixture, decision: TaskDecision, clock: Clock) -> Timeline:
    """The picture of ``decision``, one target's answer on ``fixture``.

    :param fixture: the fixture the model decided.
    :param decision: the model's decision for one of its tasks.
    :param clock: the fixture's clock, to show wall-clock times.
    :raises KeyError: if the decision is about a task the fixture does not hold.
    """
    task = fixture.task(decision.id)
    today = clock.at(fixture.as_of)
    moments: list[tuple[str, int]] = [
        ("observed", task.observed_at),
        ("decided", fixture.as_of),
        ("deadline", fixture.deadline),
    ]
    if task.last_finished_at is not None:
        moments.append(("last-end", task.last_finished_at))
    spans: list[tuple[str, int, int]] = []
    start, finish = decision.earliest_start, decision.estimated_finish
    if start is not None and finish is not None:
        moments += [("earliest-start", start), ("finish", finish)]
        if task.last_finished_at is not None and decision.backoff:
            ended = task.last_finished_at
            spans.append(("backoff", ended, ended + decision.backoff))
        spans.append(("attempt", start, start + task.duration))
        if task.validation:
            spans.append(("validation", start + task.duration, finish))
        if finish > fixture.deadline:
            spans.append(("late", fixture.deadline, finish))
    seconds = [at for _, at in moments] + [at for _, low, high in spans for at in (low, high)]
    scale = _Scale(min(seconds), max(seconds))

    def shown(at: int) -> str:
        return moment(clock, at, today)

    instants = _placed(
        [(kind, label, clock.at(at), scale.x(at)) for kind, label, at in _merged(moments, shown)]
    )
    stretches = tuple(
        Stretch(
            kind,
            _stretch_label(kind, high - low),
            clock.at(low),
            clock.at(high),
            scale.x(low),
            scale.x(high),
        )
        for kind, low, high in spans
    )
    slack = decision.slack(fixture.deadline)
    return Timeline(
        model_id=decision.id,
        decision=decision.decision.value,
        instants=instants,
        stretches=stretches,
        rows=1 + max((item.row for item in instants), default=0),
        slack=slack,
        summary=_summary(fixture, decision, shown),
    )


def _merged(moments: Iterable[tuple[str, int]], shown: TimeFormat) -> list[tuple[str, str, int]]:
    """One instant per second, naming everything that happened in it.

    The deadline always stands alone: it is the line the rest is judged against.
    """
    by_second: dict[int, list[str]] = {}
    labelled: list[tuple[str, str, int]] = []
    for kind, at in moments:
        if kind == "deadline":
            labelled.append((kind, f"{_LABELS[kind]} {shown(at)}", at))
        else:
            by_second.setdefault(at, []).append(kind)
    for at, kinds in by_second.items():
        ordered = sorted(set(kinds), key=_NAMING_ORDER.index)
        names = " / ".join(_LABELS[kind] for kind in ordered)
        labelled.append((ordered[-1], f"{names} {shown(at)}", at))
    return sorted(labelled, key=lambda item: (item[2], item[0] != "deadline"))


def _placed(items: list[tuple[str, str, pendulum.DateTime, float]]) -> tuple[Instant, ...]:
    """Instants with label rows, so that labels neither overlap nor sit across a line.

    Rows count from the top; an instant's line runs from its label down to the
    axis. Each label takes the first row where it overlaps no label of that row
    and its line crosses no label of the rows below. Labels reaching left are
    placed from the right, the others from the left, so that each is placed
    before the labels it reaches towards. A line may still cross a label where
    labels reaching left and right interleave; the page draws a halo around
    every label to keep it legible.
    """
    anchored = [Instant(kind, label, at, x, 0, _anchor(label, x)) for kind, label, at, x in items]
    ends = [index for index, item in enumerate(anchored) if item.anchor == "end"]
    starts = [index for index, item in enumerate(anchored) if item.anchor == "start"]
    order = sorted(ends, key=lambda index: -anchored[index].x) + starts
    placed: dict[int, Instant] = {}
    for index in order:
        mine, others = anchored[index], list(placed.values())
        rows = range(max((other.row for other in others), default=-1) + 2)
        row = next(row for row in rows if _fits(mine, row, others))
        placed[index] = replace(mine, row=row)
    return tuple(placed[index] for index in range(len(anchored)))


def _anchor(label: str, x: float) -> str:
    """``start`` (the label right of its line) unless the label would leave the picture."""
    return "start" if x + LABEL_PAD + len(label) * CHAR_WIDTH <= WIDTH else "end"


def label_extent(instant: Instant) -> tuple[float, float]:
    """Where an instant's label is estimated to reach, left and right."""
    width = len(instant.label) * CHAR_WIDTH
    if instant.anchor == "start":
        return instant.x + LABEL_PAD, instant.x + LABEL_PAD + width
    return instant.x - LABEL_PAD - width, instant.x - LABEL_PAD


def _fits(mine: Instant, row: int, placed: list[Instant]) -> bool:
    left, right = label_extent(mine)
    for other in placed:
        low, high = label_extent(other)
        if other.row == row and left < high + LABEL_GAP and low < right + LABEL_GAP:
            return False  # the labels would overlap
        if other.row > row and low - 1 <= mine.x <= high + 1:
            return False  # my line would cross its label
    return True


def _stretch_label(kind: str, seconds: int) -> str:
    names = {
        "backoff": "backoff",
        "attempt": "next attempt",
        "validation": "validation",
        "late": "after the deadline",
    }
    return f"{names[kind]} {seconds} s"


def _summary(fixture: Fixture, decision: TaskDecision, shown: TimeFormat) -> str:
    """What the picture shows, in one sentence (also the picture's text alternative)."""
    deadline = shown(fixture.deadline)
    finish = decision.estimated_finish
    if finish is None:
        passed = " (already passed)" if fixture.as_of > fixture.deadline else ""
        return (
            f"{decision.decision.value}: no attempt is scheduled, so nothing is set against "
            f"the deadline {deadline}{passed}."
        )
    slack = fixture.deadline - finish
    if slack < 0:
        return (
            f"The next attempt would finish, validation included, at {shown(finish)}: "
            f"{-slack} s after the deadline {deadline}."
        )
    return (
        f"The next attempt would finish, validation included, at {shown(finish)}: "
        f"{slack} s before the deadline {deadline}."
    )
