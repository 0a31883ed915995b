"""``explain`` and the status updates it prints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_retrywindow.model import Fixture, decide
from airflow_retrywindow.timing.status import fixture_time, status_update
from tests.cli.cli_runner import EXAMPLES, refusal_lines, run_cli

CASE = EXAMPLES / "case.json"


def updates(path: str = str(CASE)) -> dict[str, str]:
    fixture = Fixture.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
    return {
        decision.id: status_update(decision, fixture.task(decision.id), fixture)
        for decision in decide(fixture).tasks
    }


def test_explain_table_lists_every_decision_with_slack() -> None:
    process = run_cli("explain", str(CASE))

    assert process.returncode == 0 and process.stderr == b""
    lines = process.stdout.decode().splitlines()
    header = next(line for line in lines if line.startswith("task "))
    assert header.split("  ")[0] == "task"
    for heading in ("decision", "backoff", "earliest start", "estimated finish", "slack"):
        assert heading in header
    rows = {line.split()[0]: line.split() for line in lines[lines.index(header) + 1 :][:6]}
    assert rows["report"] == ["report", "wait-backoff", "8", "s", "t=103", "t=128", "12", "s"]
    assert rows["load"] == ["load", "retry-eligible", "4", "s", "t=100", "t=140", "0", "s"]
    assert rows["append"] == ["append", "reconcile-remote", "-", "-", "-", "-"]


def test_explain_reads_stdin_and_shows_the_flags() -> None:
    text = run_cli("explain", stdin=CASE.read_bytes()).stdout.decode()

    assert "As of t=100 the deadline t=140 is 40 s away." in text
    for claim in (
        "deadline passed",
        "jobs executed",
        "idempotency proven",
        "completion guaranteed",
        "production approval",
    ):
        line = next(line for line in text.splitlines() if line.strip().startswith(claim))
        assert line.split()[len(claim.split())] == "no"
    assert "Status updates:" in text


def test_explain_refuses_like_evaluate() -> None:
    bad = (EXAMPLES / "boundaries" / "load-observed-in-future.json").read_bytes()

    explained, evaluated = run_cli("explain", stdin=bad), run_cli("evaluate", stdin=bad)

    assert refusal_lines(explained) == refusal_lines(evaluated)
    assert "observedAt" in refusal_lines(explained)[1]
    assert (
        refusal_lines(run_cli("explain", stdin=b"[" * 100_000))[1] == "input is nested too deeply"
    )


def test_status_updates_say_state_unknowns_action_and_next_evidence() -> None:
    found = updates()

    assert found["report"].startswith("report: confirmed attempt 2 failed with a retryable error")
    assert "wait out the 8 s backoff, then start attempt 3 at t=103" in found["report"]
    assert "next evidence: the start of attempt 3, at t=103." in found["report"]
    assert "start attempt 2 now" in found["load"] and "0 s before the deadline" in found["load"]
    assert "look the remote job up" in found["append"]
    assert "outcome unknown" in found["append"]
    assert "escalate" in found["archive"]
    assert "15 s old" in found["monitor"] and "due now (t=100)" in found["monitor"]
    assert "validation result, due by t=105" in found["transform"]
    for text in found.values():
        for part in ("confirmed ", "; unknown: ", "; next: ", "; next evidence: "):
            assert part in text
        assert "\n" not in text


@pytest.mark.parametrize(
    ("name", "task", "fragment"),
    [
        ("deadline-139.json", "load", "1 s after the deadline t=139"),
        ("monitor-observed-at-90.json", "monitor", "the next observation, due by t=100"),
        ("report-not-safe-to-repeat.json", "report", "reconcile those effects"),
        ("as-of-103.json", "report", "start attempt 3 now"),
    ],
)
def test_status_updates_for_the_boundaries(name: str, task: str, fragment: str) -> None:
    assert fragment in updates(str(EXAMPLES / "boundaries" / name))[task]


def test_status_update_uses_the_callers_clock() -> None:
    fixture = Fixture.from_dict(json.loads(CASE.read_text()))
    decision = decide(fixture).task("report")

    text = status_update(decision, fixture.task("report"), fixture, clock=lambda s: f"09:{s:02}")

    assert "at 09:103" in text and "t=" not in text
    assert fixture_time(7) == "t=7"


def test_terminal_and_passed_deadline_wording() -> None:
    payload = json.loads(CASE.read_text())
    payload["deadline"] = 90
    payload["tasks"][0]["state"] = "terminal"
    fixture = Fixture.from_dict(payload)
    verdict = decide(fixture)

    report = status_update(verdict.task("report"), fixture.task("report"), fixture)
    load = status_update(verdict.task("load"), fixture.task("load"), fixture)

    assert "failed terminally" in report and "the deadline t=90 has passed" in report
    assert "report the delivery at risk" in load
    assert (
        "As of t=100 the deadline t=90 passed 10 s ago."
        in run_cli("explain", stdin=json.dumps(payload).encode()).stdout.decode()
    )


ORIGIN = "2026-12-01T10:00:00Z"


def test_explain_with_origin_prints_wall_clock_times() -> None:
    fixture = Fixture.from_dict(json.loads(CASE.read_text(encoding="utf-8")))
    process = run_cli("explain", "--origin", ORIGIN, str(CASE))

    assert process.returncode == 0 and process.stderr == b""
    text = process.stdout.decode()
    assert "t=" not in text.replace("t=0 is", "")
    assert text.splitlines()[0] == (
        f"Times are UTC, on 2026-12-01 unless dated; model time t=0 is {ORIGIN}."
    )
    # asOf is t=100 and the deadline t=140: 100 and 140 seconds after the origin
    assert (
        f"As of 10:01:40Z the deadline 10:02:20Z is {fixture.deadline - fixture.as_of} s away."
        in text
    )
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line[:1].isalpha()}
    assert rows["report"][4:6] == ["10:01:43Z", "10:02:08Z"]  # t=103 and t=128
    assert rows["load"][4:6] == ["10:01:40Z", "10:02:20Z"]


def test_explain_dates_times_that_fall_on_another_day() -> None:
    process = run_cli("explain", "--origin", "2026-12-01T23:59:00Z", str(CASE))

    text = process.stdout.decode()
    # asOf (t=100) is on 12-02; nothing is dated from the day before
    assert "As of 00:00:40Z the deadline 00:01:20Z" in text
    assert "on 2026-12-02 unless dated" in text


@pytest.mark.parametrize("origin", ["garbage", "2026-12-01T10:00:00", "2026-13-01T00:00:00Z"])
def test_explain_refuses_an_origin_that_is_not_an_aware_time(origin: str) -> None:
    process = run_cli("explain", "--origin", origin, str(CASE))

    assert process.returncode == 2 and process.stdout == b""
    reason = refusal_lines(process)[1]
    assert reason.startswith("--origin: ") and origin in reason
