"""``make demo``: the example DAG on an embedded Airflow, end to end, headless.

Run from the repository root as ``python -m devstack.demo``.

Starts Airflow's services natively on a SQLite metadata DB under ``.demo/``,
runs the example delivery on four days, each losing the worker that runs the
load while its job runs (the job failed and the load's repeat fits; the job runs
on and commits, so the retry reconnects to it and nothing is repeated; the
repeat's dry run exceeds the approved budget; a late day where nothing fits),
then clears ``append`` with upstream on the first day, as the runbook says, and
shows its gate holding the repeat. It prints what the policy, the sensor and the
gates decided and each task's outcome, then stops every service it started.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from devstack.example import (
    DAG_ID,
    DAYS,
    Day,
    clear_append,
    evidence,
    load_jobs,
    load_start,
    xcom,
)
from devstack.stack import ROOT, AirflowStack, log

HOME = ROOT / ".demo" / "airflow"


def policy_decisions(stack: AirflowStack, run_id: str) -> list[str]:
    return [
        f"  {task_id:<18} try {entry['tryNumber']}: {entry['reason']}"
        for task_id, entries in sorted(evidence(stack, run_id).items())
        for entry in entries
    ]


def explain(fixture: object, origin: str | None) -> str:
    wall_clock = ["--origin", origin] if origin else []
    done = subprocess.run(
        [sys.executable, "-m", "airflow_retrywindow", "explain", *wall_clock],
        input=json.dumps(fixture),
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout or done.stderr


def show(stack: AirflowStack, title: str, run_id: str, state: str) -> None:
    print(f"\n===== {title}: run {run_id} ended {state} =====")
    print("\nEach task's outcome (state, tries):")
    for task_id, (task_state, tries) in sorted(stack.task_states(DAG_ID, run_id).items()):
        print(f"  {task_id:<22} {task_state or 'none':<10} {tries}")
    print("\nWhat RetryWindowPolicy decided at each failure, and at each undecided try start:")
    print("\n".join(policy_decisions(stack, run_id)) or "  (no failure)")
    show_lost_worker(stack, run_id)
    show_load_repeat(stack, run_id)
    record = xcom(stack, run_id, "retry_gate")
    if isinstance(record, dict):
        print("\nretry_gate's decision table (airflow-retrywindow explain of its fixtures):")
        for fixture in record.get("fixtures", []):
            print(explain(fixture.get("fixture", fixture), fixture.get("origin")))
    impact = xcom(stack, run_id, "communicate_impact")
    if impact:
        print(f"\nImpact communicated instead of a retry:\n  {impact}")


#: what a starting try did, in words
_STARTED = {"run": "ran", "fail": "was refused", "reschedule": "was rescheduled"}


def show_lost_worker(stack: AirflowStack, run_id: str) -> None:
    """What load's try 2 read of the job its lost worker left running, and what it did."""
    print("\nThe load's worker was lost while its job ran (try 1 SIGKILLed):")
    entry = load_start(stack, run_id)
    if entry is None:
        print("  load try 2 was not decided when it started")
    else:
        read = entry.get("reconciliation") or {}
        print(
            f"  load try 2 read:       job {read.get('externalId')}: {read.get('status')} "
            f"({read.get('outcome')}), so the try {_STARTED.get(entry['action'], entry['action'])}"
        )
        # the reason starts with the model's decision, as stored in the evidence
        print(f"  decided at its start:  {entry['reason']}")
    state, tries = stack.task_states(DAG_ID, run_id).get("load", (None, 0))
    print(f"  load:                  {state} after {tries} tries")


def show_load_repeat(stack: AirflowStack, run_id: str) -> None:
    """What the reconciliation found, and what the sensor decided about the load's repeat."""
    found = xcom(stack, run_id, "reconcile_load") or {}
    print("\nThe load's repeat:")
    print(f"  reconcile_load found:  {found.get('load', {}).get('source', 'nothing')}")
    print(f"  dry_run_load estimate: {xcom(stack, run_id, 'dry_run_load')} GB")
    record = xcom(stack, run_id, "load_retry_window")
    if isinstance(record, dict) and record.get("decisions"):
        row = record["decisions"][0]
        print(f"  load_retry_window:     {row['reason']}")
        budget = record.get("budget") or {}
        if budget:
            print(f"  budget:                {budget['reason']}")
    print(f"  retry_load:            {xcom(stack, run_id, 'retry_load') or 'did not run'}")
    print(f"  validate_load:         {xcom(stack, run_id, 'validate_load') or 'did not run'}")
    # the warehouse's own record, not what the tasks say of it
    jobs = load_jobs(stack, run_id)
    listed = ", ".join(f"{job_id} {status}" for job_id, status in jobs.items())
    print(f"  load jobs submitted:   {len(jobs)}: {listed or 'none'}")


def run_day(stack: AirflowStack, day: Day) -> str:
    """Trigger one day's run, wait for it, and print what happened; return its run id."""
    log(f"{day.kind} day: business date {day.business_date}, deadline {day.deadline} s")
    run_id = stack.trigger(DAG_ID, conf=day.conf, logical_date=day.business_date)
    state = stack.wait_for_run(DAG_ID, run_id, timeout=300)
    show(stack, f"{day.kind} day", run_id, state)
    return run_id


def repeat_append(stack: AirflowStack, run_id: str) -> str:
    """Clear append with upstream, as an operator asking for its repeat would; print
    what append_gate decided. Returns the run's state."""
    log(f"clearing append with upstream in {run_id}: append_gate decides the repeat")
    state = clear_append(stack, run_id)
    print(f"\n===== {run_id}: append cleared with upstream, run ended {state} =====")
    found = xcom(stack, run_id, "reconcile_append") or {}
    print(f"  reconcile_append found: {found.get('append', {}).get('source', 'nothing')}")
    record = xcom(stack, run_id, "append_gate") or {}
    for row in record.get("decisions", []):
        print(f"  append_gate decided {row['reason']}")
    append = stack.task_states(DAG_ID, run_id).get("append", (None, 0))
    print(f"  append: {append[0]} (try {append[1]}): the rows were not appended twice")
    return state


def main() -> int:
    shutil.rmtree(HOME, ignore_errors=True)
    stack = AirflowStack(home=HOME, database_url=f"sqlite:///{HOME}/airflow.db")
    stack.prepare()
    try:
        stack.start("api-server", "scheduler", "dag-processor", "triggerer")
        log(f"waiting for the DAG processor to parse {DAG_ID}")
        stack.wait_for_dag(DAG_ID)
        first, *_ = [run_day(stack, day) for day in DAYS]
        repeat_append(stack, first)
    except Exception as error:
        print(f"\nThe demo failed: {error}", file=sys.stderr)
        print(f"Service logs: {stack.logs}", file=sys.stderr)
        return 1
    finally:
        stack.stop()
    print(f"\nService logs and the metadata DB are in {HOME}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
