"""The example DAG: it parses cleanly, and on a real Airflow it does what the gate decided."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pendulum
import pytest

from airflow_retrywindow.breaker.settings import CONTROLLER_DAG
from airflow_retrywindow.records.breaker_state import (
    CLOSED,
    OPEN,
    RECOVERING,
    SUCCEEDED,
    BreakerState,
)
from devstack import demo, outage_day
from devstack.breaker_fleet import breaker_line
from devstack.example import (
    DAG_ID,
    DAYS,
    FINAL_STATES,
    LATE,
    LOAD_COMMITTED,
    ON_TIME,
    OVER_BUDGET,
    POLICY_DECISIONS,
    Day,
    append_clear_problems,
    evidence,
    load_jobs,
    problems,
    xcom,
)
from devstack.stack import ROOT, AirflowStack, sqlite_stack

PARSE = """
import json, os, sys
try:
    from airflow.dag_processing.dagbag import DagBag
except ImportError:  # Airflow 3.1 keeps it with the models
    from airflow.models.dagbag import DagBag
from airflow_retrywindow import check_dag
bag = DagBag(dag_folder={folder!r})
for dag in bag.dags.values():
    dag.check_cycle()
    assert check_dag(dag) == [], check_dag(dag)
errors = {{os.path.basename(name): error for name, error in bag.import_errors.items()}}
print(json.dumps({{"dag_ids": sorted(bag.dag_ids), "errors": errors}}))
sys.exit(1 if errors else 0)
"""
#: the DAG files of the example with a gate and a sensor only, and of the breakers'
#: controller, which every Airflow parses
GATE_EXAMPLE = "retry_window_gate_example"
EVERY_AIRFLOW = sorted([GATE_EXAMPLE, CONTROLLER_DAG])
#: the example files that build a RetryWindowPolicy: import errors before Airflow 3.3
POLICY_FILES = {"retry_window_example.py", "retry_window_outage.py"}


#: the connection the gated tasks' pool is read through, as a deployment defines it
API_CONNECTION = {"AIRFLOW_CONN_AIRFLOW_API_DEFAULT": "http://admin:admin@localhost:8080"}


def parse_dags(environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PARSE.format(folder=str(ROOT / "dags"))],
        capture_output=True,
        text=True,
        check=False,
        env=environment,
    )


def parsed(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The DAG ids the parse found and its import errors (file name -> error)."""
    assert done.stdout, done.stderr[-3000:]  # a cycle or a check_dag problem: no output
    return dict(json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.airflow
def test_every_dag_file_parses_without_cycles_and_passes_check_dag(
    airflow_db: Path, retry_policies: bool
) -> None:
    found = parsed(parse_dags({**os.environ, **API_CONNECTION}))
    if retry_policies:
        assert found["errors"] == {}
        assert {DAG_ID, outage_day.DAG_ID, *EVERY_AIRFLOW} <= set(found["dag_ids"])
    else:
        # the DAG files with a retry policy are refused, and they alone
        assert set(found["errors"]) == POLICY_FILES
        for name in POLICY_FILES:
            assert "retry policies arrived in Airflow 3.3" in found["errors"][name], name
        assert found["dag_ids"] == EVERY_AIRFLOW


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowStack]:
    home = tmp_path_factory.mktemp("example-stack")
    services = ["api-server", "scheduler", "dag-processor", "triggerer"]
    dag_ids = [DAG_ID, outage_day.DAG_ID, CONTROLLER_DAG]
    with sqlite_stack(home, services, dag_ids, extra_env=outage_day.ENV) as running:
        yield running


@dataclass(frozen=True)
class Played:
    """What the demo's own code did and printed on the module's stack.

    :param printed: everything it printed, as make demo shows it (without the services' start
        and stop).
    :param runs: day kind -> the run id of that day's run.
    :param details: the details file it wrote.
    """

    printed: str
    runs: dict[str, str]
    details: Path

    def screens(self) -> dict[str, str]:
        """What each day, and the clear, printed: day kind (or ``clear``) -> its lines,
        from its title to the next one."""
        found = {}
        for section in self.printed.split("\n===== ")[1:]:
            kind = "clear" if "append cleared with upstream" in section else section.split()[0]
            found[kind] = "===== " + section
        return found


@pytest.fixture(scope="module")
def played(stack: AirflowStack, tmp_path_factory: pytest.TempPathFactory) -> Played:
    """The demo on the module's stack: every day, then the clear of the first day's append."""
    screen = io.StringIO()
    path = tmp_path_factory.mktemp("demo") / "details.log"
    with redirect_stdout(screen), demo.Details(path) as details:
        runs = demo.play(stack, details)
    return Played(screen.getvalue(), runs, path)


#: a state change as the stack logs it: ``[10:00:01]   load   running   try 2``
STATE_CHANGE = re.compile(r"^\[\d\d:\d\d:\d\d\]   (\w+) +(\w+) +try (\d+)$", re.MULTILINE)


def table(screen: str) -> dict[str, list[str]]:
    """The rows of a day's table: task id -> its cells (outcome, decision, reason)."""
    lines = screen.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split() == demo.TABLE_HEADERS)
    rows = {}
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        task, *cells = re.split(r"  +", line)
        rows[task] = cells
    return rows


def outcome(state: str, tries: int) -> str:
    """A task's outcome as the day's table words it."""
    return f"{state}, try {tries}" if tries > 1 else state


@pytest.mark.airflow
@pytest.mark.slow(minutes=7.5)
@pytest.mark.parametrize("day", DAYS, ids=[f"{day.kind} day" for day in DAYS])
def test_example_run_follows_the_gate(stack: AirflowStack, played: Played, day: Day) -> None:
    # the demo's own code runs the day, so what make demo prints is tested too
    run_id = played.runs[day.kind]
    assert stack.run_state(DAG_ID, run_id) == "success"
    if day is not ON_TIME:  # its append was cleared since: the day's screen checked it before
        assert problems(stack, run_id, day) == []
    table_record = xcom(stack, run_id, "retry_gate")
    decisions = {row["taskId"]: row["decision"] for row in table_record["decisions"]}
    assert decisions["append"] == "reconcile-remote"
    assert decisions["monitor"] == "refresh-observation"
    assert decisions["transform"] == "validate-output"
    screen = played.screens()[day.kind]
    assert screen.startswith(f"===== {day.kind} day, business date {day.business_date}: ")
    assert f"run {run_id} ended success" in screen.splitlines()[0]
    # the lesson is drawn only when the run did what the example expects
    assert "Lesson: " in screen
    assert "differs from what the example expects" not in screen
    refused = day in (LATE, OVER_BUDGET)
    assert table(screen)["communicate_impact"][0] == ("success" if refused else "skipped")


@pytest.mark.airflow
@pytest.mark.slow(minutes=7.5)
@pytest.mark.parametrize("day", DAYS, ids=[f"{day.kind} day" for day in DAYS])
def test_each_day_is_one_screen_with_every_task_its_outcome_decision_and_reason(
    played: Played, day: Day
) -> None:
    screen = played.screens()[day.kind]
    assert len(screen.splitlines()) <= 60, screen
    assert not STATE_CHANGE.search(screen), "the state log belongs in the details file"
    rows = table(screen)
    expected = FINAL_STATES[day.kind]
    assert set(rows) >= set(expected), screen
    for task, (state, tries) in expected.items():
        assert len(rows[task]) == 3, f"{task} lacks a decision or a reason: {rows[task]}"
        assert rows[task][0] == outcome(state, tries)
    for task, decided in POLICY_DECISIONS[day.kind].items():
        # the policy's latest decision about the task, and its reason without the cause
        assert rows[task][1] == decided[-1]
        assert rows[task][2] and "Error" not in rows[task][2]
    assert rows["rerun_everything"][2] == "held back by retry_gate"
    assert rows["monitor"][1] == "refresh-observation"


@pytest.mark.airflow
@pytest.mark.slow(minutes=7.5)
def test_the_disclaimer_is_printed_once_and_names_no_one_decision(played: Played) -> None:
    assert played.printed.count("What the model does not claim") == 1
    block = played.printed.split("What the model does not claim")[1]
    for claim in ("jobs executed", "idempotency proven", "completion guaranteed"):
        assert played.printed.count(claim) == 1
        assert claim in block
    # whether the deadline had passed differs between decisions: the details say it
    assert "deadline passed" not in block


@pytest.mark.airflow
@pytest.mark.slow(minutes=7.5)
def test_the_details_file_named_on_each_screen_holds_the_state_log_and_every_decision(
    stack: AirflowStack, played: Played
) -> None:
    named = set(re.findall(r"State log and every decision in full: (\S+)", played.printed))
    assert named == {str(played.details)}
    details = played.details.read_text()
    for day in DAYS:
        run_id = played.runs[day.kind]
        assert f"===== {day.kind} day: run {run_id}: task states as they changed =====" in details
        assert (
            f"===== {day.kind} day: run {run_id} ended success: every decision in full" in details
        )
        for entries in evidence(stack, run_id).values():
            for entry in entries:
                assert entry["reason"] in details  # in full, with its cause
    changes = STATE_CHANGE.findall(details)
    assert ("load", "running", "2") in changes
    assert ("retry_gate", "success", "1") in changes
    assert details.count("task       decision") == len(DAYS)  # retry_gate's explained table
    assert "What the model does not claim" not in details  # shown once, on the screen


@pytest.mark.airflow
@pytest.mark.slow(minutes=7.5)
def test_verbose_prints_the_state_log_and_every_decision_as_well(
    stack: AirflowStack, played: Played, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    day = LOAD_COMMITTED
    run_id = played.runs[day.kind]
    with demo.Details(tmp_path / "details.log", verbose=True) as details:
        demo.follow(stack, day, run_id, details)
    printed = capsys.readouterr().out
    written = (tmp_path / "details.log").read_text()
    # the run has ended, so its log is every task's final state, once
    assert set(STATE_CHANGE.findall(printed)) == {
        (task, state, str(tries)) for task, (state, tries) in FINAL_STATES[day.kind].items()
    }
    assert "every decision in full" in printed
    assert written in printed  # all of the file, then the day's screen
    assert "Lesson: " in printed.split(written)[1]


def test_make_demo_passes_verbose_through() -> None:
    def command(*settings: str) -> str:
        done = subprocess.run(
            # no "Entering/Leaving directory" lines when make runs this under make (CI)
            ["make", "--dry-run", "--no-print-directory", "demo", *settings],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip().splitlines()[-1]

    assert command("VERBOSE=1").endswith("-m devstack.demo --verbose")
    assert not command().endswith("--verbose")
    assert not command("VERBOSE=0").endswith("--verbose")


@pytest.mark.airflow
@pytest.mark.slow(minutes=7.5)
def test_each_day_shows_what_the_reconciliation_and_the_dry_run_decided(
    stack: AirflowStack, played: Played
) -> None:
    for day in DAYS:
        run_id = played.runs[day.kind]
        found = xcom(stack, run_id, "reconcile_load")["load"]
        assert found["source"].startswith(f"job {day.load_job(1)}: ")
        assert found["state"] == ("succeeded" if day.load_committed else "retryable")
        repeat = xcom(stack, run_id, "retry_load")
        if repeat is not None:  # load's try 2 submitted nothing: the repeat is attempt 3's id
            assert repeat.startswith(f"job {day.load_job(3)}: DONE")
        rows = table(played.screens()[day.kind])
        assert rows["reconcile_load"][2] == f"load: {found['source']}"
        assert rows["dry_run_load"][2] == f"the repeat would read {day.dry_run_gb} GB"
    over = xcom(stack, played.runs[OVER_BUDGET.kind], "communicate_impact")
    assert "estimate 260 GB" in over and "approved 200 GB" in over
    budget = table(played.screens()[OVER_BUDGET.kind])["load_retry_window"]
    assert budget[1:] == [
        "budget-exceeded",
        "review the plan or get the budget changed; estimate 260 GB is over the approved 200 GB",
    ]


@pytest.mark.airflow
@pytest.mark.slow(minutes=7.5)
def test_a_lost_worker_reconnects_to_its_running_job_and_submits_nothing(
    stack: AirflowStack, played: Played
) -> None:
    day = LOAD_COMMITTED
    run_id = played.runs[day.kind]
    details = played.details.read_text()
    job = day.load_job(1)
    # one submission, found running by try 2, which reconnected and succeeded
    assert load_jobs(stack, run_id) == {job: "DONE"}
    assert stack.task_states(DAG_ID, run_id)["load"] == ("success", 2)
    assert f"load try 2 read:       job {job}: RUNNING (active), so the try ran" in details
    assert "decided at its start:  observe-running: " in details
    assert f"reconnects to job {job}, submits nothing" in details
    assert "load:                  success after 2 tries" in details
    assert f"load jobs submitted:   1: {job} DONE" in details
    assert table(played.screens()[day.kind])["load"][:2] == ["success, try 2", "observe-running"]


@pytest.mark.airflow
@pytest.mark.slow(minutes=7.5)
def test_a_failed_job_is_decided_by_the_model_and_repeated_once_under_the_next_id(
    stack: AirflowStack, played: Played
) -> None:
    day = ON_TIME
    run_id = played.runs[day.kind]
    details = played.details.read_text()
    first, repeat = day.load_job(1), day.load_job(3)
    assert load_jobs(stack, run_id) == {first: "FAILED", repeat: "DONE"}
    assert f"load try 2 read:       job {first}: FAILED (failed), so the try was refused" in details
    assert "decided at its start:  reconcile-effects: " in details
    assert "load_retry_window:     retry-eligible:" in details
    assert "validate_load:         warehouse.fund_positions partition " in details
    assert f"rows from job {repeat}, no duplicate keys" in details
    assert f"load jobs submitted:   2: {first} FAILED, {repeat} DONE" in details
    rows = table(played.screens()[day.kind])
    assert rows["retry_load"][1:] == [
        "-",
        f"job {repeat}: DONE, 1204 rows appended to warehouse.fund_positions",
    ]


@pytest.mark.airflow
@pytest.mark.slow(minutes=7.5)
def test_clearing_append_with_upstream_lets_its_gate_hold_the_repeat(
    stack: AirflowStack, played: Played
) -> None:
    run_id = played.runs[ON_TIME.kind]
    assert stack.run_state(DAG_ID, run_id) == "success"
    assert append_clear_problems(stack, run_id) == []
    screen = played.screens()["clear"]
    assert screen.startswith(f"===== {run_id}: append cleared with upstream, run ended success")
    assert "Lesson: " in screen
    rows = table(screen)
    assert rows["append"][:2] == ["skipped", "validate-output"]
    assert rows["append"][2].startswith("held back by append_gate: attempt 1 succeeded")
    details = played.details.read_text()
    job = f"positions_append_{ON_TIME.business_date.replace('-', '')}_v3_a1"
    assert f"reconcile_append found: job {job}: DONE" in details
    assert "append_gate decided validate-output: attempt 1 succeeded" in details


@pytest.mark.airflow
@pytest.mark.slow(minutes=7.5)
def test_the_outage_days_breaker_holds_every_load_probes_and_recovers(
    stack: AirflowStack, played: Played
) -> None:
    run_id = played.runs[demo.OUTAGE_DAY]
    assert stack.run_state(outage_day.DAG_ID, run_id) == "success"
    finals = stack.task_states(outage_day.DAG_ID, run_id)
    assert len(finals) == 4
    # every load's first try met the outage, and none exhausted its attempts
    assert all(
        state == "success" and 2 <= tries <= outage_day.MAX_TRY for state, tries in finals.values()
    ), finals
    # the breaker's own record, on the pool: closed again at the pool's size once a probe
    # of the outage succeeded
    breaker = BreakerState.of(breaker_line(stack, outage_day.POOL))
    assert breaker is not None
    assert (breaker.phase, breaker.slots, breaker.size) == (CLOSED, 4, 4), breaker
    assert breaker.probes >= 1 and breaker.last_probe is not None, breaker
    assert breaker.last_probe.outcome == SUCCEEDED, breaker
    # a retry waited for a slot, scheduled and not queued, for a round at least: held
    waits = [
        each.queued - each.scheduled
        for each in outage_day.tries(stack, run_id, [])
        if each.number > 1 and each.queued is not None and each.scheduled is not None
    ]
    assert max(waits) >= outage_day.ROUND, waits
    screen = played.screens()[demo.OUTAGE_DAY]
    assert screen.startswith(f"===== outage day, business date {outage_day.DATE}: ")
    assert len(screen.splitlines()) <= 60, screen
    rows = table(screen)
    assert set(rows) == set(finals)
    for task, (state, tries) in finals.items():
        assert rows[task][0] == outcome(state, tries)
        assert rows[task][2].startswith("try 1: 503"), rows[task]
    # each try as the API answered it, and how long the breaker held it: a probe refused,
    # then the API back
    assert any(" held " in cells[2] for cells in rows.values()), screen
    assert any(", probe: 503" in cells[2] for cells in rows.values()), screen
    assert any(cells[2].endswith(": 200") for cells in rows.values()), screen
    # the breaker's phases, as the pool's description said them
    told = screen.split("Pool positions_api's breaker, as the pool's description said", 1)[1]
    phases = re.findall(r"^  \d\d:\d\d:\d\dZ  (\w+) since ", told, re.MULTILINE)
    assert "open" in phases and phases[-1] == "closed", told
    assert outage_day.BACK in told
    assert "Lesson: The positions API was down from the loads' first tries" in screen
    assert "differs from what the example expects" not in screen
    details = played.details.read_text()
    assert f"===== outage day: run {run_id}: task states as they changed =====" in details
    assert "What the positions API answered, each call:" in details
    assert "retry window breaker: open since " in details


def test_the_outage_days_tries_are_told_by_the_breakers_phases() -> None:
    at = pendulum.datetime(2026, 12, 3, 10, tz="UTC")
    watching = BreakerState.closed(outage_day.POOL, 4, at, "watching the pool")
    opened = watching.moved(OPEN, 0, at.add(seconds=10), "3 calls refused, none served")
    recovering = opened.moved(RECOVERING, 2, at.add(seconds=40), "1 calls served")
    seen = [
        outage_day.Seen(state.since.timestamp() + 1, state)
        for state in (watching, opened, recovering)
    ]
    start = at.timestamp()
    tries = [
        outage_day.Try("load_0", 1, start, start, 503),
        # scheduled while open, queued in the probe's slot
        outage_day.Try("load_0", 2, start + 15, start + 25, 503),
        # scheduled while open, queued once the breaker recovered
        outage_day.Try("load_1", 2, start + 15, start + 41, 200),
    ]
    outage = outage_day.Outage("run", "success", [], seen, start + 30, tries)
    assert outage.told("load_0") == "try 1: 503; try 2 held 10 s, probe: 503"
    assert outage.told("load_1") == "try 2 held 26 s: 200"
    assert [each.number for each in outage.probes()] == [2]
    told = [said for _, said in outage.breaker_lines()]
    assert told[2] == outage_day.BACK and told[3].startswith("recovering since 10:00:40Z")


def test_the_outage_day_differs_loudly_when_the_breaker_never_opened() -> None:
    at = pendulum.datetime(2026, 12, 3, 10, tz="UTC")
    watching = BreakerState.closed(outage_day.POOL, 4, at, "watching the pool")
    # the loads ran into the outage unheld: each of its four tries refused
    refused = [
        outage_day.Try(f"load_{n}", number, None, None, 503) for n in range(4) for number in (1, 2)
    ]
    outage = outage_day.Outage(
        "manual__2026-12-03", "failed", [], [outage_day.Seen(at.timestamp(), watching)], None,
        refused,
    )  # fmt: skip
    finals = {f"load_{n}": ("failed", 4) for n in range(4)}
    found = outage_day.problems(outage, finals)
    assert "pool positions_api's breaker never opened" in found[-1], found
    assert found[0] == "load_0: expected success by try 4, got failed at try 4"
