"""Airflow's scheduler race: the schedulers it is open in, and the sensor's short wait there."""

from __future__ import annotations

from datetime import timedelta

import pytest

from airflow_retrywindow import scheduler_race
from airflow_retrywindow.scheduler_race import ISSUES, open_issues, race_open
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
        # a pre-release or a development build counts as its release, as everywhere
        # (version_compat.release_of): the release is its last candidate
        ("3.2.2rc1", [67287, 72716, 71580]),
        ("3.2.2.dev0", [67287, 72716, 71580]),
        ("3.2.2", [67287, 72716, 71580]),
        ("3.2.2.post1", [67287, 72716, 71580]),
        ("3.3.2", [67287, 72716, 71580]),
        ("3.3.2+local", [67287, 72716, 71580]),
        # a version nobody can read is taken to have the race
        ("", [66374, 67287, 72716, 71580]),
        ("three", [66374, 67287, 72716, 71580]),
    ],
)
def test_the_issues_open_in_a_schedulers_version(version: str, still_open: list[int]) -> None:
    assert [issue.number for issue in open_issues(version)] == still_open


def _all_fixed_in(monkeypatch: pytest.MonkeyPatch, release: str) -> None:
    fixed = tuple(
        scheduler_race.RaceIssue(issue.number, issue.state, fixed_in=release) for issue in ISSUES
    )
    monkeypatch.setattr(scheduler_race, "ISSUES", fixed)


def _never_asked() -> str:
    raise AssertionError("the scheduler's version was asked while an issue has no fix")


def test_while_an_issue_is_unfixed_every_scheduler_races_unasked() -> None:
    assert race_open(_never_asked)


def test_once_every_issue_is_fixed_the_schedulers_version_decides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _all_fixed_in(monkeypatch, "3.4.1")
    assert race_open(lambda: "3.4.0")
    assert not race_open(lambda: "3.4.1")
    assert not race_open(lambda: "4.0.0")
    assert race_open(lambda: "not a version")


def test_a_scheduler_version_that_cannot_be_read_leaves_the_race_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _all_fixed_in(monkeypatch, "3.3.0")

    def unreachable() -> str:
        raise ConnectionError("the API server did not answer")

    assert race_open(unreachable)


def test_the_sensor_judges_the_schedulers_airflow_not_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AIRFLOW__RETRY_WINDOW__SENSOR_SHORT_WAIT", raising=False)
    assert short_wait(_never_asked) == timedelta(seconds=10)
    # every fix released in 3.4.0: this worker's Airflow (3.3.2, installed) does not count
    _all_fixed_in(monkeypatch, "3.4.0")
    assert short_wait(lambda: "3.3.2") == timedelta(seconds=10)
    # a scheduler with every fix: every wait is deferred, and the option is not even read
    monkeypatch.setenv("AIRFLOW__RETRY_WINDOW__SENSOR_SHORT_WAIT", "not read")
    assert short_wait(lambda: "3.4.0") == timedelta(0)
