"""The timeline's geometry: a refusal's finish lies right of the deadline; labels never collide."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pendulum
import pytest

from airflow_retrywindow.model.fixture import Fixture
from airflow_retrywindow.model.verdict import Verdict
from airflow_retrywindow.plugins.decision_rows import gate_record, policy_rows
from airflow_retrywindow.plugins.timeline import MARGIN, WIDTH, Timeline, label_extent, timeline
from airflow_retrywindow.timing.clock import Clock

CLOCK = Clock(pendulum.datetime(2026, 12, 2, 5, 0, tz="UTC"))


def fixture(*, deadline: int, state: str = "retryable", **task: Any) -> Fixture:
    facts = {
        "id": "report", "state": state, "safeRepeat": True, "attempts": 1,
        "observedAt": 100, "lastFinishedAt": 95, "duration": 20, "validation": 5,
        **task,
    }  # fmt: skip
    return Fixture.from_dict(
        {
            "asOf": 100,
            "deadline": deadline,
            "maxObservationAge": 60,
            "policy": {"maxAttempts": 4, "initialDelay": 10, "maxDelay": 60, "multiplier": 2},
            "tasks": [facts],
        }
    )


def picture(decided: Fixture) -> Timeline:
    return timeline(decided, Verdict.of(decided).tasks[0], CLOCK)


def test_a_refusal_puts_the_finish_after_the_deadline() -> None:
    # last end 95 + backoff 10 = start 105; 20 s attempt, 5 s validation: finish 130 > 120
    drawn = picture(fixture(deadline=120))
    assert drawn.decision == "deadline-infeasible"
    deadline, finish = drawn.instant("deadline"), drawn.instant("finish")
    assert deadline is not None and finish is not None
    assert finish.x > deadline.x
    assert deadline.at == CLOCK.origin.add(seconds=120)
    late = drawn.stretch("late")
    assert late is not None
    assert (late.x0, late.x1) == (deadline.x, finish.x)
    assert late.label == "after the deadline 10 s"
    assert drawn.slack == -10
    assert "10 s after the deadline 05:02:00Z" in drawn.summary


def test_backoff_attempt_and_validation_follow_each_other() -> None:
    drawn = picture(fixture(deadline=120))
    backoff, attempt, validation = (
        drawn.stretch(kind) for kind in ("backoff", "attempt", "validation")
    )
    assert backoff is not None and attempt is not None and validation is not None
    assert backoff.start == CLOCK.at(95) and backoff.end == CLOCK.at(105)
    assert attempt.start == CLOCK.at(105) and attempt.end == CLOCK.at(125)
    assert validation.start == CLOCK.at(125) and validation.end == CLOCK.at(130)
    assert backoff.x1 == attempt.x0 and attempt.x1 == validation.x0
    assert [item.label for item in (backoff, attempt, validation)] == [
        "backoff 10 s", "next attempt 20 s", "validation 5 s",
    ]  # fmt: skip


def test_a_retry_that_fits_has_no_late_stretch() -> None:
    drawn = picture(fixture(deadline=200))
    assert drawn.decision == "wait-backoff"
    assert drawn.stretch("late") is None
    finish, deadline = drawn.instant("finish"), drawn.instant("deadline")
    assert finish is not None and deadline is not None and finish.x < deadline.x
    assert drawn.slack == 70
    assert "70 s before the deadline" in drawn.summary


def test_without_a_scheduled_attempt_only_the_facts_are_drawn() -> None:
    drawn = picture(fixture(deadline=200, state="unknown", lastFinishedAt=None))
    assert drawn.decision == "reconcile-remote"
    assert drawn.stretches == ()
    assert drawn.instant("finish") is None
    assert drawn.slack is None
    assert "no attempt is scheduled" in drawn.summary


def test_moments_in_one_second_share_a_label_but_the_deadline_stands_alone() -> None:
    drawn = picture(fixture(deadline=100, observedAt=100, lastFinishedAt=100))
    labels = [item.label for item in drawn.instants]
    assert "observed / last attempt ended / decided 05:01:40Z" in labels
    assert "deadline 05:01:40Z" in labels


def collisions(drawn: Timeline) -> list[str]:
    """Labels that overlap on a row, and lines that cross a label below them."""
    found = []
    for mine in drawn.instants:
        left, right = label_extent(mine)
        for other in drawn.instants:
            low, high = label_extent(other)
            if other is not mine and other.row == mine.row and left < high and low < right:
                found.append(f"{mine.label!r} overlaps {other.label!r}")
            if other.row < mine.row and left - 1 <= other.x <= right + 1:
                found.append(f"the line of {other.label!r} crosses {mine.label!r}")
    return found


@pytest.mark.parametrize("deadline", [101, 120, 135, 400, 5000])
def test_labels_neither_overlap_nor_sit_across_a_line(deadline: int) -> None:
    drawn = picture(fixture(deadline=deadline, observedAt=99, lastFinishedAt=97))
    assert collisions(drawn) == []
    for item in drawn.instants:
        left, right = label_extent(item)
        assert left >= 0 and right <= WIDTH, item
        assert MARGIN <= item.x <= WIDTH - MARGIN


def test_no_label_collides_in_the_pictures_of_a_real_run() -> None:
    stored = json.loads(Path(__file__).with_name("stored_decisions.json").read_text())
    drawn = [
        row.timeline
        for day in (stored["late"], stored["on-time"])
        for task_id, value in day["evidence"].items()
        for row in policy_rows(task_id, -1, value)
    ] + [
        row.timeline
        for day in (stored["late"], stored["on-time"])
        for gate, record in day["records"].items()
        for row in gate_record(gate, -1, record).rows
    ]
    assert len(drawn) == 23
    for picture_of_row in drawn:
        assert picture_of_row is not None
        assert collisions(picture_of_row) == []
