"""A held try's reschedule date, as handed to Airflow: never past, never seconds ahead.

A CI run on a loaded machine read a pool for 22 s and kept its record for 28 s more,
so the hold worked out at the read (15 s) had ended before the try handed itself
back; Airflow started the try again at once, the scheduler's race killed it, and
the retry-start check refused the next try as a lost one.
"""

from __future__ import annotations

import pendulum

from airflow_retrywindow.dependency.admission import MIN_HOLD
from airflow_retrywindow.dependency.check import reschedule_at

NOW = pendulum.datetime(2026, 12, 4, 18, 30, 57)


def test_a_hold_that_ended_while_it_was_kept_is_moved_past_the_race() -> None:
    worked_out = NOW.subtract(seconds=13)  # 18:30:44, as the read left it
    assert reschedule_at(worked_out, NOW) == NOW.add(seconds=MIN_HOLD)


def test_a_hold_only_seconds_ahead_is_moved_to_the_shortest_hold() -> None:
    assert reschedule_at(NOW.add(seconds=3), NOW) == NOW.add(seconds=MIN_HOLD)


def test_a_hold_further_ahead_is_kept_as_it_was_worked_out() -> None:
    later = NOW.add(minutes=4)
    assert reschedule_at(later, NOW) == later
    assert reschedule_at(NOW.add(seconds=MIN_HOLD), NOW) == NOW.add(seconds=MIN_HOLD)


def test_a_hold_without_an_end_waits_the_shortest_hold() -> None:
    assert reschedule_at(None, NOW) == NOW.add(seconds=MIN_HOLD)
