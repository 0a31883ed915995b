"""``plan``: a retry policy's attempts, and its budget in each system's terms."""

from __future__ import annotations

import argparse
import re

from airflow_retrywindow.cli.attempts import (
    AIRFLOW,
    CONVENTIONS,
    MODEL,
    STEP_FUNCTIONS,
    TEMPORAL,
    WORKFLOWS,
    AttemptLimit,
    Convention,
    PlannedAttempt,
)
from airflow_retrywindow.cli.streams import emit
from airflow_retrywindow.cli.table import render_table
from airflow_retrywindow.exceptions import InvalidAttemptLimit
from airflow_retrywindow.model.bounds import DURATION_LIMIT, MAX_MULTIPLIER

#: longest sequence the plan writes out
MAX_LISTED_RUNS = 100

# option -> the convention its number follows
_BUDGET_OPTIONS = {
    "--airflow-retries": AIRFLOW,
    "--workflows-max-retries": WORKFLOWS,
    "--max-attempts": MODEL,
    "--step-functions-max-attempts": STEP_FUNCTIONS,
    "--temporal-maximum-attempts": TEMPORAL,
}
# short enough that no value is too large to read; bounds are checked afterwards
_WHOLE = re.compile(r"[+-]?[0-9]{1,18}")
# the example case's policy: 4 attempts in total, waits of 4 s doubling up to 12 s
_DEFAULT_MAX_ATTEMPTS = 4


def whole_number(text: str) -> int:
    """Parse an option value that must be a whole number.

    :param text: the value as typed.
    """
    if _WHOLE.fullmatch(text.strip()) is not None:
        return int(text)
    raise argparse.ArgumentTypeError(f"must be a whole number, got {text[:40]!r}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``plan`` options to its parser.

    :param parser: the ``plan`` subcommand's parser.
    """
    budget = parser.add_argument_group(
        "retry budget (give one; default --max-attempts 4)"
    ).add_mutually_exclusive_group()
    for option, convention in _BUDGET_OPTIONS.items():
        counts = "every run, the first included"
        if not convention.counts_first_run:
            counts = "retries only, the first run excluded"
        note = f"; {convention.note}" if convention.note else ""
        if convention.unlimited_at_zero:
            note += ", which cannot be planned"
        budget.add_argument(
            option,
            type=whole_number,
            metavar="N",
            dest=option[2:].replace("-", "_"),
            help=f"{convention.system} {convention.setting}: counts {counts}{note}",
        )
    delays = parser.add_argument_group(
        "backoff, in whole seconds (defaults: the policy of examples/case.json)"
    )
    delays.add_argument(
        "--initial-delay",
        type=whole_number,
        default=4,
        metavar="S",
        help="wait after the first attempt (default 4)",
    )
    delays.add_argument(
        "--max-delay",
        type=whole_number,
        default=12,
        metavar="S",
        help="cap on any wait (default 12)",
    )
    delays.add_argument(
        "--multiplier",
        type=whole_number,
        default=2,
        metavar="N",
        help=f"growth of each wait over the one before, 1 to {MAX_MULTIPLIER} (default 2)",
    )
    delays.add_argument(
        "--duration",
        type=whole_number,
        metavar="S",
        help="assume each attempt runs this long, and time attempts from the first start",
    )


def run(options: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Write the plan for the parsed ``options``; usage errors exit through ``parser``.

    :param options: the parsed ``plan`` options.
    :param parser: the ``plan`` parser, to report bad values.
    """
    option, convention, value = _budget_option(options)
    try:
        budget = AttemptLimit.from_setting(convention, value)
    except InvalidAttemptLimit as error:
        parser.error(f"argument {option}: {error}")
    if budget.runs > MAX_LISTED_RUNS:
        parser.error(
            f"argument {option}: {value} means {budget.runs} runs; the plan lists at most "
            f"{MAX_LISTED_RUNS}"
        )
    initial = _bounded(parser, "--initial-delay", options.initial_delay, 1, DURATION_LIMIT)
    cap = _bounded(
        parser,
        "--max-delay",
        options.max_delay,
        initial,
        DURATION_LIMIT,
        low_name="--initial-delay",
    )
    multiplier = _bounded(parser, "--multiplier", options.multiplier, 1, MAX_MULTIPLIER)
    duration = options.duration
    if duration is not None:
        _bounded(parser, "--duration", duration, 0, DURATION_LIMIT)
    attempts = budget.sequence(
        initial_delay=initial, max_delay=cap, multiplier=multiplier, duration=duration or 0
    )
    sequence = sequence_lines(
        attempts, initial_delay=initial, max_delay=cap, multiplier=multiplier, duration=duration
    )
    lines = [*translation(budget), "", *sequence]
    return emit("\n".join(lines) + "\n")


def translation(budget: AttemptLimit) -> list[str]:
    """The budget in every system's terms, as a table.

    :param budget: the retry budget.
    """
    runs = "run" if budget.runs == 1 else "runs"
    retries = "retry" if budget.retries == 1 else "retries"
    rows = [_translation_row(convention, budget) for convention in CONVENTIONS]
    return [
        f"Retry budget: {budget.runs} {runs} in total, the first run and "
        f"{budget.retries} {retries}.",
        "",
        *render_table(["system", "setting", "value", "counts"], rows, right=frozenset({2})),
    ]


def sequence_lines(
    attempts: tuple[PlannedAttempt, ...],
    *,
    initial_delay: int,
    max_delay: int,
    multiplier: int,
    duration: int | None,
) -> list[str]:
    """The attempts one after the other, with the wait before each.

    :param attempts: the planned attempts.
    :param initial_delay: the wait after the first attempt.
    :param max_delay: the cap on any wait.
    :param multiplier: how much each wait grows.
    :param duration: the assumed length of each attempt, or ``None`` if not given.
    """
    policy = (
        f"Attempts under the model's capped exponential backoff (no jitter): first wait "
        f"{initial_delay} s, growing x{multiplier}, capped at {max_delay} s."
    )
    if duration is None:
        rows = [
            [str(a.number), _wait(a), "first run" if a.number == 1 else f"+{a.start} s"]
            for a in attempts
        ]
        return [
            policy,
            "Each attempt is taken to fail at once: start offsets count from the first "
            "attempt's failure (add --duration to count run time).",
            "",
            *render_table(["attempt", "wait before", "starts"], rows, right=frozenset({0, 1, 2})),
        ]
    rows = [[str(a.number), _wait(a), f"t={a.start}", f"t={a.end}"] for a in attempts]
    return [
        policy,
        f"Each attempt is taken to run {duration} s: times count from the first attempt's "
        "start (t=0), and validation time is not included.",
        "",
        *render_table(
            ["attempt", "wait before", "starts", "ends"], rows, right=frozenset({0, 1, 2, 3})
        ),
    ]


def _translation_row(convention: Convention, budget: AttemptLimit) -> list[str]:
    counts = "every run" if convention.counts_first_run else "retries only"
    note = convention.note
    if convention is MODEL and not budget.fits_model:
        note = f"{note}: does not fit the model"
    return [
        convention.system,
        convention.setting,
        str(convention.value(budget.runs)),
        f"{counts} ({note})" if note else counts,
    ]


def _wait(attempt: PlannedAttempt) -> str:
    return "-" if attempt.number == 1 else f"{attempt.wait} s"


def _budget_option(options: argparse.Namespace) -> tuple[str, Convention, int]:
    for option, convention in _BUDGET_OPTIONS.items():
        value = getattr(options, option[2:].replace("-", "_"))
        if value is not None:
            return option, convention, int(value)
    return "--max-attempts", MODEL, _DEFAULT_MAX_ATTEMPTS


def _bounded(
    parser: argparse.ArgumentParser,
    option: str,
    value: int,
    low: int,
    high: int,
    *,
    low_name: str = "",
) -> int:
    if low <= value <= high:
        return value
    lowest = f"{low} ({low_name})" if low_name else str(low)
    parser.error(f"argument {option}: must be from {lowest} to {high}, got {value}")
