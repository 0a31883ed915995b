"""The full command line: every command, its options and its help."""

from __future__ import annotations

import argparse

from airflow_retrywindow.model.bounds import MAX_TASKS

PROG = "airflow-retrywindow"

_DESCRIPTION = """\
Decide, before a data-pipeline task is retried, whether to wait, retry now or
refuse - offline, from an explicit fixture of what is known. Nothing is ever
submitted, cancelled or observed: the answer is a decision with its reason.

With no command, reads a fixture on standard input and prints the decisions as
JSON (the same as 'evaluate')."""

_EPILOG = f"""\
examples:
  {PROG} < case.json
  {PROG} evaluate examples/case.json
  {PROG} explain examples/case.json
  {PROG} plan --airflow-retries 3 --duration 20

Invalid input exits with status 2, and standard error has two lines:
'Invalid retry fixture' and the reason."""

_FIXTURE_HELP = "the fixture, a JSON file; '-' or nothing reads standard input"

_EVALUATE = f"""\
Print the model's decisions for a fixture as one line of JSON: each task's
decision, backoff, earliest start and estimated finish (sorted by task id),
whether the deadline has passed, and the four claims the model never makes
(jobsExecuted, idempotencyProven, completionGuaranteed, productionApproval:
always false).

A fixture holds asOf, deadline and maxObservationAge (whole seconds on one
clock), a policy {{maxAttempts, initialDelay, maxDelay, multiplier}} and 1 to {MAX_TASKS}
tasks {{id, state, safeRepeat, attempts, observedAt, lastFinishedAt, duration,
validation}}. Anything invalid rejects the whole fixture."""

_EXPLAIN = """\
Show the same decisions for people: a table with each task's decision, backoff,
earliest start, estimated finish and slack to the deadline, then a one-line
status update per task (what is confirmed, what is still unknown, the next
action and when the next evidence is due), then what the model does not claim.

Times are model seconds (t=103) unless --origin gives the clock origin stored
next to the fixture in a decision record: then they are UTC wall-clock times.

FILE may also be one decision as RetryWindowPolicy stored it (an entry of
retry_window.evidence, with its fixture and origin): it is explained on its own
origin, and a status read of a resumable job stored with it (reconciliation) is
shown under the table: the job, its status, whether the request reached the
service, whether the job finished, what still needs validation and what the
next try does."""

_ORIGIN_HELP = (
    "the clock origin stored with the fixture (the record's 'origin', e.g. "
    "2026-12-01T10:00:00Z): print UTC wall-clock times instead of t=seconds"
)

_PLAN = """\
Write out the attempts a retry policy allows, with the wait before each, and
translate the budget between systems, which count differently: Airflow retries,
Cloud Workflows max_retries and AWS Step Functions MaxAttempts count retries
only; the model's maxAttempts and Temporal maximum_attempts count every run.
So max_retries=3 allows 4 runs, while maxAttempts=3 allows 3."""

_PLAN_EPILOG = f"""\
examples:
  {PROG} plan --workflows-max-retries 3     # 4 runs
  {PROG} plan --max-attempts 3              # 3 runs
  {PROG} plan --airflow-retries 2 --initial-delay 30 --max-delay 300 --duration 600"""


def build_parser() -> argparse.ArgumentParser:
    """The parser for every command, with its help texts."""
    from airflow_retrywindow.cli import plan

    parser = argparse.ArgumentParser(
        prog=PROG,
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", title="commands", metavar="COMMAND")
    for name, summary, description in (
        ("evaluate", "print the decisions as JSON (the default)", _EVALUATE),
        ("explain", "show the decisions as a table with status updates", _EXPLAIN),
    ):
        command = commands.add_parser(
            name,
            help=summary,
            description=description,
            epilog=f"example:\n  {PROG} {name} examples/case.json",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.add_argument("file", nargs="?", default="-", metavar="FILE", help=_FIXTURE_HELP)
        if name == "explain":
            command.add_argument("--origin", metavar="TIME", help=_ORIGIN_HELP)
    planner = commands.add_parser(
        "plan",
        help="lay out a retry policy's attempts and translate its budget",
        description=_PLAN,
        epilog=_PLAN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    plan.add_arguments(planner)
    # plan checks values against each other after parsing, and reports through its parser
    planner.set_defaults(command_parser=planner)
    return parser


def run_command(args: list[str]) -> int:
    """Parse ``args`` and run the command they name.

    :param args: the arguments after the program name.
    :returns: the exit status; usage errors exit with status 2 from argparse.
    """
    parser = build_parser()
    options = parser.parse_args(args)
    if options.command == "explain":
        from airflow_retrywindow.cli.explain import run as explain

        return explain(options.file, options.origin)
    if options.command == "plan":
        from airflow_retrywindow.cli import plan

        return plan.run(options, options.command_parser)
    from airflow_retrywindow.cli.evaluate import run as evaluate

    return evaluate(getattr(options, "file", "-"))
