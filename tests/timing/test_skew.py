"""The one skew rule: the offset an answer's Date bounds, the tolerance in either
direction, and the stricter of the decisions at both ends of the offset (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import pendulum
import pytest

from airflow_retrywindow.exceptions import ClockError
from airflow_retrywindow.model import Decision, Fixture, TaskState, decide
from airflow_retrywindow.timing.fixtures import ClockedFixture, TaskFacts
from airflow_retrywindow.timing.retry_settings import RetrySettings
from airflow_retrywindow.timing.skew import (
    ClockOffset,
    decide_at_both_ends,
    server_date,
    strictest,
    strictness,
)
from airflow_retrywindow.timing.work import Work
from airflow_retrywindow.verdicts import ALLOWS_NOW, DEPENDENCY_HELD, HOLDS, REFUSES, WAITS

T0 = pendulum.datetime(2026, 3, 2, 5, 0, 0, 250_000, tz="UTC")
FIVE = timedelta(seconds=5)


def offset(low: float, high: float) -> ClockOffset:
    return ClockOffset(timedelta(seconds=low), timedelta(seconds=high), "http://api:8080")


def test_a_date_bounds_the_offset_by_its_second_and_the_round_trip() -> None:
    date = pendulum.datetime(2026, 3, 2, 5, 1, 0, tz="UTC")  # the server 60 s ahead
    measured = ClockOffset.measured(T0, T0.add(microseconds=300_000), date, "api")
    assert measured.low == date - T0.add(microseconds=300_000)  # 59.45 s
    # a whole second, and a Date the server may have noted up to a second before
    assert measured.high == date + timedelta(seconds=2) - T0  # 61.75 s
    assert measured.about == pytest.approx(60.6)


def test_answers_together_keep_every_lower_bound_and_the_freshest_upper_one() -> None:
    fresh, stale = offset(-0.4, 1.6), offset(-10.4, -8.4)  # a Date 10 s old
    assert stale.combined(fresh) == fresh.combined(stale) == offset(-0.4, 1.6)
    assert offset(2, 4).combined(offset(3, 3.5)) == offset(3, 4)


def test_a_clock_that_went_back_while_asking_is_refused() -> None:
    with pytest.raises(ClockError, match=r"went back by 1\.000 s"):
        ClockOffset.measured(T0, T0.subtract(seconds=1), T0, "api")


@pytest.mark.parametrize(
    ("low", "high", "words"),
    [
        (59.4, 60.7, "the API server's (http://api:8080) clock runs about 60 s ahead of "
                     "this worker's (at least 59.4 s"),
        (-60.7, -59.4, "this worker's clock runs about 60 s ahead of the API server's "
                       "(http://api:8080) (at least 59.4 s"),
    ],
)  # fmt: skip
def test_beyond_the_tolerance_either_way_names_the_clock_and_the_amount(
    low: float, high: float, words: str
) -> None:
    with pytest.raises(ClockError) as refused:
        offset(low, high).check(FIVE)
    text = str(refused.value)
    assert words in text
    assert "tolerance of 5 s ([retry_window] clock_skew_tolerance)" in text


@pytest.mark.parametrize(("low", "high"), [(4.5, 5.5), (-5.5, -4.5), (-0.3, 0.8), (5.0, 5.0)])
def test_an_interval_reaching_into_the_tolerance_is_accepted(low: float, high: float) -> None:
    assert offset(low, high).check(FIVE) == offset(low, high)


def test_a_tolerance_of_zero_accepts_only_an_interval_holding_zero() -> None:
    assert offset(-0.2, 0.9).check(timedelta(0))
    with pytest.raises(ClockError):
        offset(0.1, 0.9).check(timedelta(0))


def test_the_possible_nows_span_this_workers_clock_and_the_servers() -> None:
    # the server ahead: from this worker's "now" to the server's latest
    assert offset(2, 3).possible_nows(T0) == (T0, T0.add(seconds=3))
    # the server behind: from the server's earliest to this worker's "now"
    assert offset(-3, -2).possible_nows(T0) == (T0.subtract(seconds=3), T0)
    assert offset(-0.5, 0.7).possible_nows(T0) == (
        T0.subtract(microseconds=500_000),
        T0.add(microseconds=700_000),
    )
    assert ClockOffset.same_clock("here").possible_nows(T0) == (T0,)


def test_an_arrival_moves_onto_the_servers_clock_within_the_measurement() -> None:
    assert offset(2, 3).nearest(timedelta(0)) == timedelta(seconds=2)
    assert offset(2, 3).nearest(timedelta(seconds=3)) == timedelta(seconds=3)
    assert offset(-3, -2).nearest(timedelta(0)) == timedelta(seconds=-2)
    assert offset(-1, 1).nearest(timedelta(0)) == timedelta(0)


def test_a_date_header_is_read_or_refused_naming_who_sent_it() -> None:
    assert server_date("Mon, 02 Mar 2026 05:01:00 GMT", "api") == pendulum.datetime(
        2026, 3, 2, 5, 1, tz="UTC"
    )
    with pytest.raises(ClockError, match="the API answered without a Date header"):
        server_date(None, "the API")
    with pytest.raises(ClockError, match="no HTTP date: 'yesterday'"):
        server_date("yesterday", "the API")


def test_strictness_orders_refusals_holds_waits_and_starts_now() -> None:
    assert [strictness(found) for found in Decision] == [REFUSES] * 8 + [WAITS, ALLOWS_NOW]
    assert strictness(DEPENDENCY_HELD) == HOLDS
    assert strictness("not-attempted") == ALLOWS_NOW


def test_strictest_prefers_a_refusal_then_a_wait_then_the_later_wait_end() -> None:
    def pick(*answers: tuple[str, int | None]) -> tuple[str, int | None]:
        return strictest(answers, decision=lambda a: a[0], wait_until=lambda a: None)

    assert pick(("retry-eligible", None), ("deadline-infeasible", None))[0] == (
        "deadline-infeasible"
    )
    assert pick(("wait-backoff", None), ("retry-eligible", None))[0] == "wait-backoff"
    later = strictest(
        [("wait-backoff", T0.add(seconds=1)), ("wait-backoff", T0.add(seconds=9))],
        decision=lambda a: a[0],
        wait_until=lambda a: a[1],
    )
    assert later[1] == T0.add(seconds=9)
    # a hold on a failing dependency: stricter than a backoff, less strict than a refusal
    assert pick(("wait-backoff", None), (DEPENDENCY_HELD, None))[0] == DEPENDENCY_HELD
    assert pick((DEPENDENCY_HELD, None), ("deadline-infeasible", None))[0] == (
        "deadline-infeasible"
    )
    held_longer = strictest(
        [(DEPENDENCY_HELD, T0.add(seconds=60)), (DEPENDENCY_HELD, T0.add(seconds=5))],
        decision=lambda a: a[0],
        wait_until=lambda a: a[1],
    )
    assert held_longer[1] == T0.add(seconds=60)
    # equally strict: the answer for the later "now"
    assert pick(("refresh-observation", 1), ("deadline-infeasible", 2)) == (
        "deadline-infeasible",
        2,
    )


def test_one_loop_decides_at_both_ends_with_the_shift_onto_the_servers_clock() -> None:
    calls: list[tuple[pendulum.DateTime, timedelta]] = []

    def at(now: pendulum.DateTime, shift: timedelta) -> tuple[str, pendulum.DateTime]:
        calls.append((now, shift))
        return ("wait-backoff", now)

    def keep(answers: Sequence[tuple[str, pendulum.DateTime]]) -> tuple[str, pendulum.DateTime]:
        return strictest(answers, decision=lambda a: a[0], wait_until=lambda a: a[1])

    before = pendulum.now("UTC")
    kept = decide_at_both_ends(offset(-2, 3), at, keep)
    (earliest, low), (latest, high) = calls
    # the worker's clock may be 2 s ahead or 3 s behind: the ends are 5 s apart, and the
    # times it noted move by the offset nearest to each end's
    assert latest - earliest == FIVE and earliest >= before.subtract(seconds=2)
    assert (low, high) == (timedelta(seconds=-2), timedelta(seconds=3))
    assert kept == ("wait-backoff", latest)  # the wait that ends later
    calls.clear()
    decide_at_both_ends(None, at, keep)  # unmeasured: this worker's clock, unshifted
    assert len(calls) == 1 and calls[0][1] == timedelta(0)


# -- the ends bound every "now" between them, on the real model -----------------------------

SETTINGS = RetrySettings(task_id="load", retries=2, initial_delay=30, multiplier=1, max_delay=600)
WORK = Work(duration=timedelta(seconds=40), validation=timedelta(seconds=10), safe_repeat=True)
FINISHED = pendulum.datetime(2026, 3, 2, 5, 0, tz="UTC")
#: the backoff ends at +30 s, the deadline can no longer be met from +51 s, the
#: observation is too old from +60 s: every boundary is crossed by some window
DEADLINE = FINISHED.add(seconds=100)
BACKOFF_ENDS = FINISHED.add(seconds=30)


def decided(now: pendulum.DateTime) -> tuple[Decision, pendulum.DateTime | None]:
    facts = TaskFacts(
        task_id="load", state=TaskState.RETRYABLE, attempts=1, observed_at=FINISHED,
        finished_at=FINISHED, work=WORK,
    )  # fmt: skip
    fixture = ClockedFixture.build(
        as_of=now, deadline=DEADLINE, max_observation_age=60, settings=SETTINGS, tasks=[facts]
    )  # fmt: skip
    (task,) = decide(Fixture.from_dict(fixture.payload)).tasks
    start = task.earliest_start
    return task.decision, fixture.clock.at(start) if start is not None else None


def test_no_now_between_the_ends_allows_more_than_the_stricter_end() -> None:
    seen = set()
    for start in range(0, 90):
        nows = [FINISHED.add(seconds=start, microseconds=250_000 * step) for step in range(13)]
        answers = [decided(now) for now in nows]
        seen.update(answer[0] for answer in answers)
        kept = strictest(
            [answers[0], answers[-1]], decision=lambda a: a[0], wait_until=lambda a: a[1]
        )
        for answer in answers:
            assert strictness(kept[0]) <= strictness(answer[0]), (start, kept, answer)
            if strictness(kept[0]) == strictness(answer[0]) == WAITS:
                assert kept[1] is not None and answer[1] is not None
                # never before the backoff's exact end; a "now" between the ends may round
                # its own start up by the model's one second, which allows nothing more
                assert kept[1] >= BACKOFF_ENDS
                assert answer[1] - kept[1] <= timedelta(seconds=1)
    assert {Decision.WAIT_BACKOFF, Decision.RETRY_ELIGIBLE, Decision.DEADLINE_INFEASIBLE} <= seen
