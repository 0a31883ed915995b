"""``explain``: the model's decisions as a table and short status updates."""

from __future__ import annotations

from functools import partial

from airflow_retrywindow.cli.streams import UnreadableInputError, emit, load, refuse
from airflow_retrywindow.cli.table import render_table
from airflow_retrywindow.exceptions import ClockError
from airflow_retrywindow.model import Fixture, InvalidFixture, Verdict, decide
from airflow_retrywindow.timing.clock import Clock
from airflow_retrywindow.timing.reasons import moment
from airflow_retrywindow.timing.status import TimeFormat, fixture_time, status_update

_HEADERS = ["task", "decision", "backoff", "earliest start", "estimated finish", "slack"]
_RIGHT = frozenset({2, 3, 4, 5})


def run(path: str, origin: str | None = None) -> int:
    """Explain the decisions for the fixture at ``path``.

    :param path: a file name, or ``-`` for standard input.
    :param origin: the clock origin stored next to the fixture (a decision
        record's ``origin``): times are then printed as UTC wall-clock times.
    :returns: 0 when explained, 2 when the input was refused.
    """
    try:
        clock = None if origin is None else Clock.from_iso(origin)
        fixture = Fixture.from_dict(load(path))
    except ClockError as error:
        return refuse(f"--origin: {error}; give the record's origin, e.g. 2026-12-01T10:00:00Z")
    except UnreadableInputError as error:
        return refuse(error.reason)
    except InvalidFixture as error:
        return refuse(str(error))
    show = fixture_time if clock is None else wall_clock(clock, fixture)
    lines = explanation(fixture, decide(fixture), show=show)
    if clock is not None:
        day = clock.at(fixture.as_of).format("YYYY-MM-DD")
        lines.insert(0, f"Times are UTC, on {day} unless dated; model time t=0 is {clock.iso()}.")
    return emit("\n".join(lines) + "\n")


def wall_clock(clock: Clock, fixture: Fixture) -> TimeFormat:
    """Model seconds as UTC times on ``clock``, dated only when not on asOf's day."""
    return partial(moment, clock, today=clock.at(fixture.as_of))


def explanation(
    fixture: Fixture, verdict: Verdict, *, show: TimeFormat = fixture_time
) -> list[str]:
    """The lines that explain ``verdict`` for people.

    :param fixture: the fixture that was decided.
    :param verdict: the model's decisions for it.
    :param show: how a model time is printed (``t=103`` by default).
    """
    policy = fixture.policy
    lines = [
        _deadline_line(fixture, show),
        f"Observations count for {fixture.max_observation_age} s. Policy: up to "
        f"{policy.max_attempts} attempts; waits start at {policy.initial_delay} s, grow "
        f"x{policy.multiplier}, capped at {policy.max_delay} s.",
        "",
    ]
    rows = [
        [
            decision.id,
            decision.decision.value,
            _seconds(decision.backoff),
            _time(decision.earliest_start, show),
            _time(decision.estimated_finish, show),
            _seconds(decision.slack(fixture.deadline)),
        ]
        for decision in verdict.tasks
    ]
    lines += render_table(_HEADERS, rows, right=_RIGHT)
    lines += ["", "Status updates:"]
    lines += [
        f"  {status_update(decision, fixture.task(decision.id), fixture, clock=show)}"
        for decision in verdict.tasks
    ]
    claims = [
        ("deadline passed", verdict.deadline_passed, ""),
        ("jobs executed", verdict.jobs_executed, _NEVER_RUNS),
        ("idempotency proven", verdict.idempotency_proven, _CLAIM),
        ("completion guaranteed", verdict.completion_guaranteed, _LEFT_OUT),
        ("production approval", verdict.production_approval, _NOT_APPROVAL),
    ]
    width = max(len(label) for label, _, _ in claims)
    lines += ["", "What the model does not claim:"]
    lines += [
        f"  {label.ljust(width)}  {'yes' if flag else 'no '}  {why}".rstrip()
        for label, flag, why in claims
    ]
    return lines


_NEVER_RUNS = "it only decides: it never submits, cancels or observes a job"
_CLAIM = "safeRepeat is the caller's claim, taken as given"
_LEFT_OUT = "estimates leave out queues, capacity and future failures"
_NOT_APPROVAL = "a favourable estimate is not an approval"


def _deadline_line(fixture: Fixture, show: TimeFormat) -> str:
    now, deadline = show(fixture.as_of), show(fixture.deadline)
    left = fixture.deadline - fixture.as_of
    if left < 0:
        return f"As of {now} the deadline {deadline} passed {-left} s ago."
    return f"As of {now} the deadline {deadline} is {left} s away."


def _time(seconds: int | None, show: TimeFormat) -> str:
    return "-" if seconds is None else show(seconds)


def _seconds(seconds: int | None) -> str:
    return "-" if seconds is None else f"{seconds} s"
