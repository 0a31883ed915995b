"""The ``airflow-retrywindow`` command line.

``evaluate`` (the default) prints the model's JSON result for a fixture, byte for
byte like the original ``run.py``; ``explain`` shows the same decisions for
people; ``plan`` writes out a retry policy's attempts and translates its budget
between orchestrators.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run the command line and return its exit status.

    :param argv: the arguments after the program name; ``sys.argv[1:]`` by default.
    """
    args = sys.argv[1:] if argv is None else argv
    source = _plain_evaluate(args)
    if source is not None:
        # the common case skips argparse, which costs more than the evaluation
        from airflow_retrywindow.cli.evaluate import run

        return run(source)
    from airflow_retrywindow.cli.commands import run_command

    return run_command(args)


def _plain_evaluate(args: list[str]) -> str | None:
    """The input to evaluate when ``args`` is a plain evaluate call, else ``None``."""
    if not args:
        return "-"
    if args[0] != "evaluate" or len(args) > 2:
        return None
    if len(args) == 1:
        return "-"
    source = args[1]
    return source if source == "-" or not source.startswith("-") else None
