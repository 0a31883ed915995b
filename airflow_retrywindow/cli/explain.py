"""``explain``: the model's decisions as a table and short status updates.

It explains a fixture, or one decision as :class:`~airflow_retrywindow.RetryWindowPolicy`
stored it (an entry of ``retry_window.evidence``: its ``fixture``, on its stored
``origin``). For a decision taken on a resumable job's status read, the read is
shown under the table (:mod:`~airflow_retrywindow.records.reconciliation`). Stored
text loses URL credentials before it is printed; nothing here imports Airflow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import pendulum

from airflow_retrywindow.cli.streams import UnreadableInputError, emit, load, refuse
from airflow_retrywindow.cli.table import render_table
from airflow_retrywindow.exceptions import ClockError
from airflow_retrywindow.labels import UTC_CLOCK, UTC_SHOWN
from airflow_retrywindow.model import Fixture, InvalidFixture, Verdict, decide
from airflow_retrywindow.records.decision_facts import DecisionFacts
from airflow_retrywindow.records.reconciliation import KEY, RESCHEDULE, TimeText, action_words
from airflow_retrywindow.redaction import without_credentials
from airflow_retrywindow.timing.clock import Clock
from airflow_retrywindow.timing.reasons import moment
from airflow_retrywindow.timing.status import TimeFormat, fixture_time, status_update

_HEADERS = ["task", "decision", "backoff", "earliest start", "estimated finish", "slack"]
_RIGHT = frozenset({2, 3, 4, 5})


def run(path: str, origin: str | None = None) -> int:
    """Explain the decisions for the fixture, or the stored decision, at ``path``.

    :param path: a file name, or ``-`` for standard input.
    :param origin: the clock origin stored next to the fixture (a decision
        record's ``origin``): times are then printed as UTC wall-clock times. A
        stored decision brings its own.
    :returns: 0 when explained, 2 when the input was refused.
    """
    try:
        clock = None if origin is None else Clock.from_iso(origin)
    except ClockError as error:
        return refuse(f"--origin: {error}; give the record's origin, e.g. 2026-12-01T10:00:00Z")
    try:
        data = load(path)
        entry = stored_decision(data)
        if entry is not None:
            clock = _stored_clock(entry, clock)
        fixture = Fixture.from_dict(data if entry is None else entry["fixture"])
    except UnreadableInputError as error:
        return refuse(error.reason)
    except InvalidFixture as error:
        return refuse(str(error))
    show = fixture_time if clock is None else wall_clock(clock, fixture)
    verdict = decide(fixture)
    written = _written(clock, fixture)
    if entry is None:
        lines = explanation(fixture, verdict, show=show)
    else:
        # a file holds no Airflow task id: the fixture's only task is the one decided
        facts = DecisionFacts.of_evidence(entry, task_id="", mask=_shown)
        stored = _stored_lines(entry, facts, verdict, show, written)
        lines = explanation(fixture, verdict, show=show, after_table=stored)
        lines.insert(0, _decision_line(facts, verdict, show))
    if clock is not None:
        day = clock.at(fixture.as_of).format("YYYY-MM-DD")
        lines.insert(0, f"Times are UTC, on {day} unless dated; model time t=0 is {clock.iso()}.")
    return emit("\n".join(lines) + "\n")


def stored_decision(data: object) -> Mapping[str, Any] | None:
    """The policy decision ``data`` is, or ``None`` when it is a fixture.

    :param data: the decoded input.
    :raises UnreadableInputError: for a stored value that holds no fixture to explain.
    """
    if not isinstance(data, Mapping):
        return None
    if "fixture" in data:
        return data
    if isinstance(data.get("decisions"), list) and "latest" in data:
        raise UnreadableInputError(
            "this is a stored decision history (latest, decisions): give one of its "
            "decisions, e.g. its latest"
        )
    if "tryNumber" in data:
        why = _shown(data.get("reason", "no reason was stored"))
        raise UnreadableInputError(f"the stored decision holds no fixture to explain ({why})")
    return None


def _stored_clock(entry: Mapping[str, Any], given: Clock | None) -> Clock:
    """The stored decision's clock; ``--origin``, when given, must be the same."""
    origin = entry.get("origin")
    try:
        stored = Clock.from_iso(origin) if isinstance(origin, str) else None
    except ClockError:
        stored = None
    if stored is None:
        raise UnreadableInputError(
            f"origin of the stored decision must be an ISO 8601 time with an offset, "
            f"got {_shown(repr(origin))}"
        )
    if given is not None and given.origin != stored.origin:
        raise UnreadableInputError(
            f"--origin {given.iso()} is not the stored decision's origin {stored.iso()}; "
            "leave --origin out to use the stored one"
        )
    return stored


def wall_clock(clock: Clock, fixture: Fixture) -> TimeFormat:
    """Model seconds as UTC times on ``clock``, dated only when not on asOf's day."""
    return partial(moment, clock, today=clock.at(fixture.as_of))


def explanation(
    fixture: Fixture,
    verdict: Verdict,
    *,
    show: TimeFormat = fixture_time,
    after_table: Sequence[str] = (),
) -> list[str]:
    """The lines that explain ``verdict`` for people.

    :param fixture: the fixture that was decided.
    :param verdict: the model's decisions for it.
    :param show: how a model time is printed (``t=103`` by default).
    :param after_table: lines printed right under the table (what a stored decision adds).
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
    if after_table:
        lines += ["", *after_table]
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


def _decision_line(facts: DecisionFacts, verdict: Verdict, show: TimeFormat) -> str:
    """Which stored decision this is, and what it did with the try."""
    about = "a try" if facts.try_number is None else f"try {facts.try_number}"
    by = f" ({facts.check})" if facts.check is not None else ""
    if facts.action is None:
        return f"Stored decision about {about}{by}."
    start_at = _start_at(facts, verdict, show)
    words = action_words(facts.action, facts.job, start_at=start_at)
    return f"Stored decision about {about}{by}; what Airflow was told: {words}."


def _stored_lines(
    entry: Mapping[str, Any],
    facts: DecisionFacts,
    verdict: Verdict,
    show: TimeFormat,
    written: TimeText,
) -> list[str]:
    """What the stored decision adds under the table: its reconciled job."""
    lines = []
    if verdict.to_dict() != entry.get("result"):
        lines.append(
            "The stored result is not what the fixture gives today; the table shows this replay."
        )
    if facts.composition:
        lines.append(facts.composition)
    if KEY not in entry:
        return lines
    job = facts.job
    if job is None:
        return [*lines, f"Reconciled before deciding: could not be read ({facts.job_problem})."]
    answers = job.answers(written, action=facts.action, start_at=_start_at(facts, verdict, show))
    width = max(len(question) for question, _ in answers) + 1
    lines.append(f"Reconciled before deciding: {job.job}")
    lines += [f"  {(question + ':').ljust(width)}  {answer}" for question, answer in answers]
    return lines


def _start_at(facts: DecisionFacts, verdict: Verdict, show: TimeFormat) -> str | None:
    """When a try the retry-start check rescheduled may start, as the table writes times."""
    if facts.action != RESCHEDULE or not verdict.tasks:
        return None
    at = verdict.tasks[0].earliest_start
    return None if at is None else show(at)


def _written(clock: Clock | None, fixture: Fixture) -> TimeText:
    """How a stored real time is printed: like the table's times on ``clock``'s day."""
    today = None if clock is None else clock.at(fixture.as_of)

    def write(when: pendulum.DateTime) -> str:
        utc = when.in_timezone("UTC")
        if today is not None and utc.date() == today.date():
            return utc.format(UTC_CLOCK)
        return utc.format(UTC_SHOWN)

    return write


def _shown(text: object) -> str:
    """Stored text as it may be printed: no URL credentials, bounded."""
    return without_credentials(str(text), limit=2_000)


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
