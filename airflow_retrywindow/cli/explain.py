"""``explain``: the model's decisions as a table and short status updates."""

from __future__ import annotations

from airflow_retrywindow.cli.streams import UnreadableInputError, emit, load, refuse
from airflow_retrywindow.cli.table import render_table
from airflow_retrywindow.model import Fixture, InvalidFixture, Verdict, decide
from airflow_retrywindow.timing.status import fixture_time, status_update

_HEADERS = ["task", "decision", "backoff", "earliest start", "estimated finish", "slack"]
_RIGHT = frozenset({2, 3, 4, 5})


def run(path: str) -> int:
    """Explain the decisions for the fixture at ``path``.

    :param path: a file name, or ``-`` for standard input.
    :returns: 0 when explained, 2 when the input was refused.
    """
    try:
        fixture = Fixture.from_dict(load(path))
    except UnreadableInputError as error:
        return refuse(error.reason)
    except InvalidFixture as error:
        return refuse(str(error))
    return emit("\n".join(explanation(fixture, decide(fixture))) + "\n")


def explanation(fixture: Fixture, verdict: Verdict) -> list[str]:
    """The lines that explain ``verdict`` for people.

    :param fixture: the fixture that was decided.
    :param verdict: the model's decisions for it.
    """
    policy = fixture.policy
    lines = [
        _deadline_line(fixture),
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
            _time(decision.earliest_start),
            _time(decision.estimated_finish),
            _seconds(decision.slack(fixture.deadline)),
        ]
        for decision in verdict.tasks
    ]
    lines += render_table(_HEADERS, rows, right=_RIGHT)
    lines += ["", "Status updates:"]
    lines += [
        f"  {status_update(decision, fixture.task(decision.id), fixture)}"
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


def _deadline_line(fixture: Fixture) -> str:
    now, deadline = fixture_time(fixture.as_of), fixture_time(fixture.deadline)
    left = fixture.deadline - fixture.as_of
    if left < 0:
        return f"As of {now} the deadline {deadline} passed {-left} s ago."
    return f"As of {now} the deadline {deadline} is {left} s away."


def _time(seconds: int | None) -> str:
    return "-" if seconds is None else fixture_time(seconds)


def _seconds(seconds: int | None) -> str:
    return "-" if seconds is None else f"{seconds} s"
