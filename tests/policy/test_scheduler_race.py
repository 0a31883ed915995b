"""Airflow's scheduler race: the versions it is open in, and the sensor's short wait there."""

from __future__ import annotations

from datetime import timedelta

import pytest

from airflow_retrywindow import scheduler_race
from airflow_retrywindow.scheduler_race import ISSUES, open_issues, parse_version, race_open
from airflow_retrywindow.sensors.retry_window import short_wait


def test_the_issues_are_airflows_own_with_the_state_each_finds() -> None:
    assert [(issue.number, issue.state, issue.fixed_in) for issue in ISSUES] == [
        (66374, "scheduled", "3.2.2"),
        (67287, "queued", None),
        (72716, "running", None),
        (71580, "running", None),
    ]
    assert ISSUES[0].url == "https://github.com/apache/airflow/issues/66374"


@pytest.mark.parametrize(
    ("version", "still_open"),
    [
        ("3.2.1", [66374, 67287, 72716, 71580]),
        # a pre-release or a development build of the fixing release is not fixed yet
        ("3.2.2rc1", [66374, 67287, 72716, 71580]),
        ("3.2.2.dev0", [66374, 67287, 72716, 71580]),
        ("3.2.2", [67287, 72716, 71580]),
        ("3.2.2.post1", [67287, 72716, 71580]),
        ("3.3.2", [67287, 72716, 71580]),
        ("3.3.2+local", [67287, 72716, 71580]),
        # a version nobody can read is taken to have the race
        ("", [66374, 67287, 72716, 71580]),
        ("three", [66374, 67287, 72716, 71580]),
    ],
)
def test_the_issues_open_in_a_version(version: str, still_open: list[int]) -> None:
    assert [issue.number for issue in open_issues(version)] == still_open
    assert race_open(version)


def test_once_every_issue_is_fixed_the_race_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    fixed = tuple(
        scheduler_race.RaceIssue(issue.number, issue.state, fixed_in="3.4.1") for issue in ISSUES
    )
    monkeypatch.setattr(scheduler_race, "ISSUES", fixed)
    assert race_open("3.4.0")
    assert not race_open("3.4.1")
    assert not race_open("4.0.0")
    assert race_open("3.4.1rc2")


def test_a_version_is_read_by_its_release_numbers() -> None:
    assert parse_version("3.3.2") == ((3, 3, 2), True)
    assert parse_version("3.4") == ((3, 4, 0), True)
    assert parse_version("3.4.0b1") == ((3, 4, 0), False)
    assert parse_version("not a version") is None
    assert parse_version("3.3.10") > parse_version("3.3.9")  # type: ignore[operator]


def test_the_sensor_sleeps_short_waits_only_where_the_race_is_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AIRFLOW__RETRY_WINDOW__SENSOR_SHORT_WAIT", raising=False)
    assert short_wait() == timedelta(seconds=10)  # the installed Airflow 3.3.2 has it
    fixed = tuple(
        scheduler_race.RaceIssue(issue.number, issue.state, fixed_in="3.4.0") for issue in ISSUES
    )
    monkeypatch.setattr(scheduler_race, "ISSUES", fixed)
    assert short_wait("3.3.2") == timedelta(seconds=10)
    # outside the range every wait is deferred, and the option is not even read
    monkeypatch.setenv("AIRFLOW__RETRY_WINDOW__SENSOR_SHORT_WAIT", "not read")
    assert short_wait("3.4.0") == timedelta(0)
