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

import pytest
from devstack.fleet_outage import DEMO_DAG, DEMO_ENV, DEMO_MAX_TRY, demo_problems, holds

from devstack import demo
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
#: the DAG file of the example with a gate and a sensor only, which every Airflow parses
GATE_EXAMPLE = "retry_window_gate_example"
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
        assert {DAG_ID, GATE_EXAMPLE} <= set(found["dag_ids"])
    else:
        # the DAG files with a retry policy are refused, and they alone
        assert set(found["errors"]) == POLICY_FILES
        for name in POLICY_FILES:
            assert "retry policies arrived in Airflow 3.3" in found["errors"][name], name
        assert found["dag_ids"] == [GATE_EXAMPLE]


@pytest.mark.airflow
@pytest.mark.requires_airflow_3_3
def test_a_gated_task_in_a_pool_is_refused_without_the_connection_its_pool_is_read_with(
    airflow_db: Path,
) -> None:
    environment = {key: value for key, value in os.environ.items() if key not in API_CONNECTION}
    done = parse_dags(environment)
    assert done.returncode != 0
    shown = "\n".join(parsed(done)["errors"].values())
    assert "task 'extract_positions' runs in pool 'positions_db', a dependency" in shown, shown
    assert "connection 'airflow_api_default' ([retry_window] default_conn_id)" in shown
    switched_off = {
        **environment,
        # the delivery's pool, and the outage example's
        "AIRFLOW__RETRY_WINDOW__DEPENDENCY_POOLS": '{"positions_db": "off", "positions_api": "off"}',  # noqa: E501
    }
    assert parse_dags(switched_off).returncode == 0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowStack]:
    home = tmp_path_factory.mktemp("example-stack")
    services = ["api-server", "scheduler", "dag-processor", "triggerer"]
    with sqlite_stack(home, services, [DAG_ID, DEMO_DAG], extra_env=DEMO_ENV) as running:
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
def test_the_outage_day_holds_the_retries_and_every_load_succeeds_after_it(
    stack: AirflowStack, played: Played
) -> None:
    run_id = played.runs[demo.OUTAGE_DAY]
    assert stack.run_state(DEMO_DAG, run_id) == "success"
    assert demo_problems(stack, run_id) == []
    finals = stack.task_states(DEMO_DAG, run_id)
    assert len(finals) == 4
    # every load succeeded, none with its attempts exhausted (retries=3: tries 1 to 4)
    assert all(state == "success" and tries <= DEMO_MAX_TRY for state, tries in finals.values())
    held = holds(stack, DEMO_DAG, run_id, every_try=True)
    assert sum(held.values()) >= 1, held
    screen = played.screens()[demo.OUTAGE_DAY]
    assert screen.startswith(f"===== outage day, business date {demo.OUTAGE_DATE}: ")
    assert len(screen.splitlines()) <= 60, screen
    rows = table(screen)
    assert set(rows) == set(finals)
    for task, (state, tries) in finals.items():
        assert rows[task][0] == outcome(state, tries)
        assert rows[task][2].startswith("try 1 ran: 503"), rows[task]
    assert [task for task, cells in rows.items() if cells[1] == "dependency-held"], screen
    # the retries that reached the API while it was down probed it; the rest were held
    assert any("probed: 503" in cells[2] for cells in rows.values()), screen
    # once a probe found the API back, the held retries came through: released in a wave
    # while the pool was recovering, or run once it had closed (which one is timing)
    assert any("released: 200" in cells[2] or "ran: 200" in cells[2] for cells in rows.values()), (
        screen
    )
    assert "Lesson: The positions API was down until 40 s after the first retry" in screen
    assert "differs from what the example expects" not in screen
