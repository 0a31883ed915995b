"""``make demo``: the example DAG on an embedded Airflow, end to end, headless.

Run from the repository root as ``python -m devstack.demo`` (``--verbose``: also
print the details below as they come; ``make demo VERBOSE=1``).

Starts Airflow's services natively on a SQLite metadata DB under ``.demo/``,
runs the example delivery on four days, each losing the worker that runs the
load while its job runs (the job failed and the load's repeat fits; the job runs
on and commits, so the retry reconnects to it and nothing is repeated; the
repeat's dry run exceeds the approved budget; a late day where nothing fits),
then clears ``append`` with upstream on the first day, as the runbook says, and
shows its gate holding the repeat. A last day runs ``retry_window_outage``: four
gated loads of the breaker pool ``positions_api`` against an API that is down from
their first tries until the breaker, open, has had a probe refused; the breaker holds
every load, probes, and recovers once a probe succeeds. Then it stops every
service it started.

Each day prints one screen: a table of the tasks with their outcome, the decision
taken about each and its reason in one line, then the day's lesson. Every task's
state changes and the full text of every decision (what the policy, the sensor
and the gates decided, the decision tables) go to ``.demo/details.log``.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterable, Sequence
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

from airflow_retrywindow.cli.table import render_table
from devstack import outage_day
from devstack.example import (
    AFTER_APPEND_CLEAR,
    DAG_ID,
    DAYS,
    Day,
    append_clear_problems,
    clear_append,
    decoded,
    evidence,
    load_jobs,
    load_start,
    problems,
    xcom,
)
from devstack.stack import ROOT, AirflowStack, log

HOME = ROOT / ".demo" / "airflow"
#: every task's state changes and every decision's full text, of the latest demo
DETAILS = ROOT / ".demo" / "details.log"
#: the columns of a day's table
TABLE_HEADERS = ["task", "outcome", "decision", "reason"]
#: the longest reason a day's table shows; the details file has each in full
REASON_WIDTH = 105
#: where the model's explanation lists what it does not claim: the same for every
#: decision, so the demo shows it once
CLAIMS_HEADING = "What the model does not claim:"
#: the one claim line that differs between decisions (the explanation's header says it too)
PER_DECISION_CLAIM = "deadline passed"

#: day kind -> what that day shows, once the run did what the example expects
LESSONS = {
    "on-time": (
        "A failed job is not repeated blindly: load's try 2 was refused (reconcile-effects) "
        "until reconcile_load confirmed that nothing was written; the repeat then fit the "
        "deadline and the budget, so retry_load ran it once under the next job id, and "
        "validate_load found exactly one committed job."
    ),
    "load-committed": (
        "A lost worker's job that still runs is not submitted again: load's try 2 "
        "reconnected to it (observe-running). One job in all, nothing to repeat."
    ),
    "over-budget": (
        "A repeat that fits the deadline but not the approved budget does not run: the "
        "dry run's 260 GB is over the approved 200 GB, so load_retry_window held retry_load "
        "back and communicate_impact said so, instead of raising the cap."
    ),
    "late": (
        "When the deadline leaves no room, nothing is retried: report, archive and the "
        "load's repeat are deadline-infeasible, and communicate_impact reports the impact "
        "instead."
    ),
}
EVERY_DAY = (
    "On every delivery day: report waits out its backoff while it fits, archive runs out of "
    "attempts, append's unknown outcome is looked up instead of resubmitted, monitor's "
    "stale observation must be refreshed first, and retry_gate holds the blind "
    "rerun_everything back."
)
AFTER_CLEAR = (
    "Cleared with upstream, as the runbook says for append: reconcile_append found the "
    "lost submission committed, so append_gate held the repeat and the rows were not "
    "appended twice."
)
#: the outage day's run (its own DAG: the delivery's days are about one task's failures)
OUTAGE_DAY = "outage"
#: what a task's bare number result means
_RESULT_WORDS = {"dry_run_load": "the repeat would read {} GB"}


class Details(io.TextIOBase):
    """The demo's full record: written to a file, and to the screen too when verbose.

    Also a text stream, so a service's progress printed while a run is awaited goes here.

    :param path: the file; overwritten.
    :param verbose: print everything written on the screen as well.
    """

    def __init__(self, path: Path, *, verbose: bool = False) -> None:
        super().__init__()
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.verbose = verbose
        # the screen as it is now: while a run is awaited, sys.stdout is this stream
        self.screen = sys.stdout
        self.file = path.open("w", encoding="utf-8")
        #: what the model does not claim, kept from the first explanation to show once
        self.claims: list[str] = []

    def write(self, text: str) -> int:
        self.file.write(text)
        self.file.flush()
        if self.verbose:
            self.screen.write(text)
            self.screen.flush()
        return len(text)

    def add(self, lines: Iterable[str]) -> None:
        """Write ``lines``, one a line."""
        self.write("".join(f"{line}\n" for line in lines))

    def close(self) -> None:
        self.file.close()
        super().close()

    def named(self) -> str:
        """The file's path as a person types it: relative to the checkout when inside it."""
        return (
            str(self.path.relative_to(ROOT)) if self.path.is_relative_to(ROOT) else str(self.path)
        )


# -- one line per task ----------------------------------------------------------------


def one_line(text: str, *, decision: bool = False) -> str:
    """``text`` cut to one line of the day's table: whole when it fits, else up to the
    last clause that fits (without its closing parenthesis, for a reason), else up to
    the last word, with an ellipsis.

    :param decision: ``text`` is a decision's reason: drop its leading decision word,
        which the table shows in its own column, and its closing parenthesis (the
        error or the observation it was decided from, in the details file).
    """
    text = " ".join(text.split())
    if decision:
        text = _without_closing_parenthesis(text.partition(": ")[2] or text)
    if len(text) <= REASON_WIDTH:
        return text
    for end in range(len(text) - 2, 0, -1):
        if text[end : end + 2] in ("; ", ", "):
            clause = _without_closing_parenthesis(text[:end]) if decision else text[:end]
            if len(clause) <= REASON_WIDTH:
                return clause
    return text[: REASON_WIDTH - 1].rsplit(" ", 1)[0] + "…"


def _without_closing_parenthesis(text: str) -> str:
    return text[: _closing_parenthesis(text)].rstrip() if text.endswith(")") else text


def _closing_parenthesis(text: str) -> int:
    """Where the parenthesis that closes ``text`` opens; ``len(text)`` when unbalanced."""
    depth = 0
    for index in range(len(text) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(text[index], 0)
        if depth == 0:
            return index
    return len(text)


def task_rows(stack: AirflowStack, run_id: str, tasks: Sequence[str] = ()) -> list[list[str]]:
    """The day's table: each task, in the order it started, with its outcome, the
    decision taken about it and the reason in one line.

    :param tasks: only these tasks; all of the run's when empty.
    """
    states = stack.task_states(DAG_ID, run_id)
    started = stack.rows(
        "select task_id from task_instance where dag_id=:d and run_id=:r "
        "order by start_date is null, start_date, task_id",
        d=DAG_ID,
        r=run_id,
    )
    facts = RunFacts.read(stack, run_id)
    rows = []
    for (task,) in started:
        if tasks and task not in tasks:
            continue
        state, tries = states[task]
        decision, reason = facts.about(task, state)
        rows.append([task, outcome(state, tries), decision, reason])
    return rows


def outcome(state: str | None, tries: int) -> str:
    """A task's outcome as a day's table words it: its state, and its try after the first."""
    return f"{state or 'none'}, try {tries}" if tries > 1 else state or "none"


class RunFacts:
    """What a run's tasks recorded: results, gate records, skips and policy decisions.

    :param results: task id -> its return value.
    :param skips: task id -> what it skipped (``skipped``) or followed (``followed``).
    :param decided: task id -> its RetryWindowPolicy's decisions, in order.
    """

    def __init__(
        self,
        results: dict[str, Any],
        skips: dict[str, dict[str, list[str]]],
        decided: dict[str, list[dict[str, Any]]],
    ) -> None:
        self.results = results
        self.skips = skips
        self.decided = decided
        #: gate or sensor task id -> its decision record
        self.gates = {
            task: record
            for task, record in results.items()
            if isinstance(record, dict) and record.get("gate") == task
        }

    @classmethod
    def read(cls, stack: AirflowStack, run_id: str) -> RunFacts:
        """Read a run's facts from the metadata DB."""
        rows = stack.rows(
            "select task_id, key, value from xcom where dag_id=:d and run_id=:r "
            "and key in ('return_value', 'skipmixin_key')",
            d=DAG_ID,
            r=run_id,
        )
        values = {(task, key): decoded(value) for task, key, value in rows}
        return cls(
            results={task: value for (task, key), value in values.items() if key == "return_value"},
            skips={task: value for (task, key), value in values.items() if key != "return_value"},
            decided=evidence(stack, run_id),
        )

    def about(self, task: str, state: str | None) -> tuple[str, str]:
        """The decision that settled ``task`` in this run, and its reason in one line.

        A gate's skip first (it decided last), then what the task's own gate decided,
        then its policy's latest decision, then what a gate decided about it; otherwise
        ``-`` and what the task returned or why it was skipped.
        """
        if state == "skipped":
            for skipper, skip in self.skips.items():
                if task in skip.get("skipped", []):
                    return self._held_back(task, skipper)
        if task in self.gates:
            return self._gate(self.gates[task])
        if self.decided.get(task):
            entry = self.decided[task][-1]
            return entry["result"]["tasks"][0]["decision"], one_line(entry["reason"], decision=True)
        for record in self.gates.values():
            for row in record.get("decisions", []):
                if row["taskId"] == task:
                    return row["decision"], one_line(row["reason"], decision=True)
        if state == "skipped":
            for brancher, skip in self.skips.items():
                if "followed" in skip:  # the example has one branch
                    return "-", f"{brancher} followed {', '.join(skip['followed'])}"
        if "followed" in self.skips.get(task, {}):
            return "-", f"followed {', '.join(self.skips[task]['followed'])}"
        return "-", one_line(self._result(task))

    def _held_back(self, task: str, gate: str) -> tuple[str, str]:
        for row in self.gates.get(gate, {}).get("decisions", []):
            if row["taskId"] == task:
                return row["decision"], one_line(
                    f"held back by {gate}: {one_line(row['reason'], decision=True)}"
                )
        return "-", f"held back by {gate}"

    @staticmethod
    def _gate(record: dict[str, Any]) -> tuple[str, str]:
        """What a gate or sensor decided: its refusing budget verdict, its one decision,
        or, over several targets, whom it decided about and what it held back."""
        budget = record.get("budget") or {}
        decisions = record.get("decisions") or []
        if budget and budget.get("verdict") != "within-budget":
            return budget["verdict"], one_line(budget["reason"], decision=True)
        if len(decisions) == 1:
            return decisions[0]["decision"], one_line(decisions[0]["reason"], decision=True)
        decided = ", ".join(row["taskId"] for row in decisions)
        held = ", ".join(record.get("skipped") or []) or "nothing"
        return f"{len(decisions)} decisions", one_line(
            f"decided {decided} (rows above); held back {held}"
        )

    def _result(self, task: str) -> str:
        """What a task returned, in words."""
        value = self.results.get(task)
        if value is None:
            return "returned nothing"
        if isinstance(value, (int, float)):
            return _RESULT_WORDS.get(task, "{}").format(value)
        if isinstance(value, dict):
            return ", ".join(
                f"{key}: {found.get('source') or found.get('state')}"
                if isinstance(found, dict)
                else f"{key} {found}"
                for key, found in value.items()
            )
        return str(value)


# -- the full texts, for the details file --------------------------------------------------


def policy_decisions(stack: AirflowStack, run_id: str, dag_id: str = DAG_ID) -> list[str]:
    return [
        f"  {task_id:<18} try {entry['tryNumber']}: {entry['reason']}"
        for task_id, entries in sorted(evidence(stack, run_id, dag_id=dag_id).items())
        for entry in entries
    ]


def explain(fixture: object, origin: str | None) -> tuple[list[str], list[str]]:
    """``airflow-retrywindow explain`` of a fixture: its explanation, and apart from it
    what the model does not claim (the same for every decision)."""
    wall_clock = ["--origin", origin] if origin else []
    done = subprocess.run(
        [sys.executable, "-m", "airflow_retrywindow", "explain", *wall_clock],
        input=json.dumps(fixture),
        capture_output=True,
        text=True,
        check=False,
    )
    lines = (done.stdout or done.stderr).rstrip("\n").split("\n")
    if CLAIMS_HEADING not in lines:
        return lines, []
    cut = lines.index(CLAIMS_HEADING)
    return lines[:cut], lines[cut:]


#: what a starting try did, in words
_STARTED = {"run": "ran", "fail": "was refused", "reschedule": "was rescheduled"}


def lost_worker(stack: AirflowStack, run_id: str) -> list[str]:
    """What load's try 2 read of the job its lost worker left running, and what it did."""
    lines = ["", "The load's worker was lost while its job ran (try 1 SIGKILLed):"]
    entry = load_start(stack, run_id)
    if entry is None:
        lines.append("  load try 2 was not decided when it started")
    else:
        read = entry.get("reconciliation") or {}
        lines.append(
            f"  load try 2 read:       job {read.get('externalId')}: {read.get('status')} "
            f"({read.get('outcome')}), so the try {_STARTED.get(entry['action'], entry['action'])}"
        )
        # the reason starts with the model's decision, as stored in the evidence
        lines.append(f"  decided at its start:  {entry['reason']}")
    state, tries = stack.task_states(DAG_ID, run_id).get("load", (None, 0))
    lines.append(f"  load:                  {state} after {tries} tries")
    return lines


def load_repeat(stack: AirflowStack, run_id: str) -> list[str]:
    """What the reconciliation found, and what the sensor decided about the load's repeat."""
    found = xcom(stack, run_id, "reconcile_load") or {}
    lines = [
        "",
        "The load's repeat:",
        f"  reconcile_load found:  {found.get('load', {}).get('source', 'nothing')}",
        f"  dry_run_load estimate: {xcom(stack, run_id, 'dry_run_load')} GB",
    ]
    record = xcom(stack, run_id, "load_retry_window")
    if isinstance(record, dict) and record.get("decisions"):
        lines.append(f"  load_retry_window:     {record['decisions'][0]['reason']}")
        budget = record.get("budget") or {}
        if budget:
            lines.append(f"  budget:                {budget['reason']}")
    lines.append(f"  retry_load:            {xcom(stack, run_id, 'retry_load') or 'did not run'}")
    lines.append(
        f"  validate_load:         {xcom(stack, run_id, 'validate_load') or 'did not run'}"
    )
    # the warehouse's own record, not what the tasks say of it
    jobs = load_jobs(stack, run_id)
    listed = ", ".join(f"{job_id} {status}" for job_id, status in jobs.items())
    lines.append(f"  load jobs submitted:   {len(jobs)}: {listed or 'none'}")
    return lines


def full_texts(
    stack: AirflowStack, title: str, run_id: str, state: str, details: Details
) -> list[str]:
    """Every decision of the run in full: what the policy, the sensor and the gates
    decided, and retry_gate's decision tables. Keeps what the model does not claim
    in ``details``, to be shown once.
    """
    lines = [f"===== {title}: run {run_id} ended {state}: every decision in full =====", ""]
    lines.append("Each task's outcome (state, tries):")
    for task_id, (task_state, tries) in sorted(stack.task_states(DAG_ID, run_id).items()):
        lines.append(f"  {task_id:<22} {task_state or 'none':<10} {tries}")
    lines += [
        "",
        "What RetryWindowPolicy decided at each failure, and at each undecided try start:",
    ]
    lines += policy_decisions(stack, run_id) or ["  (no failure)"]
    lines += lost_worker(stack, run_id)
    lines += load_repeat(stack, run_id)
    record = xcom(stack, run_id, "retry_gate")
    if isinstance(record, dict):
        lines += ["", "retry_gate's decision table (airflow-retrywindow explain of its fixtures):"]
        for fixture in record.get("fixtures", []):
            explained, claims = explain(fixture.get("fixture", fixture), fixture.get("origin"))
            lines += [*explained, ""]
            details.claims = details.claims or claims
    impact = xcom(stack, run_id, "communicate_impact")
    if impact:
        lines += ["", "Impact communicated instead of a retry:", f"  {impact}"]
    return lines


# -- the demo -----------------------------------------------------------------------


def show(stack: AirflowStack, day: Day, run_id: str, state: str, details: Details) -> None:
    """Write the day's full texts to ``details``; print its one-screen summary."""
    details.add(["", *full_texts(stack, f"{day.kind} day", run_id, state, details)])
    screen(
        f"{day.kind} day, business date {day.business_date}: run {run_id} ended {state}",
        task_rows(stack, run_id),
        problems(stack, run_id, day),
        lambda: LESSONS[day.kind],
    )
    print(f"State log and every decision in full: {details.named()}")


def screen(
    title: str,
    rows: list[list[str]],
    found: list[str],
    lesson: Callable[[], str],
    *,
    what: str = "run",
    notes: Sequence[str] = (),
) -> None:
    """Print one screen: the title, the table of tasks, ``notes`` below it, and what
    differs from the example's expectations, or else the lesson (worked out only then)."""
    print(f"\n===== {title}")
    print()
    print("\n".join(render_table(TABLE_HEADERS, rows, right=frozenset())))
    print()
    if notes:
        print("\n".join(notes))
        print()
    if found:
        print(f"This {what} differs from what the example expects:")
        print("\n".join(f"  {problem}" for problem in found))
    else:
        print(textwrap.fill(f"Lesson: {lesson()}", width=100))


def run_day(stack: AirflowStack, day: Day, details: Details) -> str:
    """Trigger one day's run, wait for it, and show what happened; return its run id."""
    log(f"{day.kind} day: business date {day.business_date}, deadline {day.deadline} s")
    run_id = stack.trigger(DAG_ID, conf=day.conf, logical_date=day.business_date)
    follow(stack, day, run_id, details)
    return run_id


def follow(stack: AirflowStack, day: Day, run_id: str, details: Details) -> str:
    """Wait for a day's run, its task states logged to ``details``, and show it.

    Returns the run's state.
    """
    details.add(["", f"===== {day.kind} day: run {run_id}: task states as they changed ====="])
    with redirect_stdout(details):
        state = stack.wait_for_run(DAG_ID, run_id, timeout=300)
    show(stack, day, run_id, state, details)
    return state


def repeat_append(stack: AirflowStack, run_id: str, details: Details) -> str:
    """Clear append with upstream, as an operator asking for its repeat would; show
    what append_gate decided. Returns the run's state."""
    log(f"clearing append with upstream in {run_id}: append_gate decides the repeat")
    state = clear_append(stack, run_id)
    found = xcom(stack, run_id, "reconcile_append") or {}
    record = xcom(stack, run_id, "append_gate") or {}
    details.add(
        [
            "",
            f"===== {run_id}: append cleared with upstream, run ended {state} =====",
            f"  reconcile_append found: {found.get('append', {}).get('source', 'nothing')}",
            *(f"  append_gate decided {row['reason']}" for row in record.get("decisions", [])),
        ]
    )
    screen(
        f"{run_id}: append cleared with upstream, run ended {state}",
        task_rows(stack, run_id, list(AFTER_APPEND_CLEAR)),
        append_clear_problems(stack, run_id),
        lambda: AFTER_CLEAR,
        what="clear",
    )
    return state


def outage_rows(stack: AirflowStack, outage: outage_day.Outage) -> list[list[str]]:
    """The outage day's table: each load, its outcome, the policy's latest decision about
    it, and what each of its tries met: how long the breaker held it, whether it was a
    probe, what the API answered."""
    decided = evidence(stack, outage.run_id, dag_id=outage_day.DAG_ID)
    rows = []
    for task, (state, tries) in sorted(stack.task_states(outage_day.DAG_ID, outage.run_id).items()):
        entries = decided.get(task) or []
        decision = entries[-1]["result"]["tasks"][0]["decision"] if entries else "-"
        rows.append([task, outcome(state, tries), decision, one_line(outage.told(task))])
    return rows


def run_outage_day(stack: AirflowStack, details: Details) -> str:
    """Run the outage day against a stand-in of the API, and show it; return its run id."""
    log(
        f"outage day: {outage_day.DAG_ID}, the positions API down until pool "
        f"{outage_day.POOL}'s breaker has opened and one of its probes was refused"
    )
    outage = outage_day.stage(stack, details)
    run_id, state = outage.run_id, outage.state
    details.add(
        [
            "",
            f"===== {OUTAGE_DAY} day: run {run_id} ended {state}: every decision in full =====",
            *outage_day.details(outage),
            "",
            "What RetryWindowPolicy decided at each failure, and at each undecided try start:",
            *(policy_decisions(stack, run_id, outage_day.DAG_ID) or ["  (no failure)"]),
        ]
    )
    breaker = [
        f"Pool {outage_day.POOL}'s breaker, as the pool's description said (read every "
        f"{outage_day.LOOK_EVERY:g} s):",
        *(f"  {at}  {one_line(said)}" for at, said in outage.breaker_lines()),
    ]
    finals = stack.task_states(outage_day.DAG_ID, run_id)
    screen(
        f"{OUTAGE_DAY} day, business date {outage_day.DATE}: run {run_id} ended {state}",
        outage_rows(stack, outage),
        outage_day.problems(outage, finals),
        lambda: outage_day.lesson(outage),
        notes=breaker,
    )
    print(f"State log and every decision in full: {details.named()}")
    return run_id


def play(stack: AirflowStack, details: Details) -> dict[str, str]:
    """Every day, then the clear of the first day's append, then the outage day; each
    shown on one screen, then what every day shows and what the model does not claim,
    once.

    Returns each day's run id by the day's kind.
    """
    # the outage day's pool exists from the start: the breakers' controller watches it
    outage_day.create_pool(stack)
    runs = {day.kind: run_day(stack, day, details) for day in DAYS}
    repeat_append(stack, runs[DAYS[0].kind], details)
    runs[OUTAGE_DAY] = run_outage_day(stack, details)
    print()
    print(textwrap.fill(EVERY_DAY, width=100))
    claims = [line for line in details.claims if PER_DECISION_CLAIM not in line]
    if claims:
        print(f"\n{claims[0][:-1]}, about any decision above:")
        print("\n".join(claims[1:]))
    return runs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devstack.demo", description=__doc__)
    parser.add_argument(
        "--verbose",
        action="store_true",
        help=f"also print every task's state changes and every decision in full ({DETAILS})",
    )
    verbose = parser.parse_args(argv).verbose
    shutil.rmtree(HOME, ignore_errors=True)
    stack = AirflowStack(
        home=HOME, database_url=f"sqlite:///{HOME}/airflow.db", extra_env=dict(outage_day.ENV)
    )
    stack.prepare()
    with Details(DETAILS, verbose=verbose) as details:
        try:
            stack.start("api-server", "scheduler", "dag-processor", "triggerer")
            log(f"waiting for the DAG processor to parse {DAG_ID}")
            stack.wait_for_dag(DAG_ID)
            stack.wait_for_dag(outage_day.DAG_ID)
            play(stack, details)
        except Exception as error:
            print(f"\nThe demo failed: {error}", file=sys.stderr)
            print(f"Service logs: {stack.logs}", file=sys.stderr)
            return 1
        finally:
            stack.stop()
        print(f"\nService logs and the metadata DB are in {HOME}.")
        print(f"Every task's state changes and every decision in full: {details.named()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
