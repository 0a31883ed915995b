"""The entry point itself: help, in-process use, and what starting it imports."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

from airflow_retrywindow.cli import main
from tests.cli.cli_runner import EXAMPLES, ROOT, environment, run_cli, run_python

CASE = EXAMPLES / "case.json"


def imported_modules(*args: str, stdin: bytes = b"") -> set[str]:
    process = run_python("-X", "importtime", *args, stdin=stdin)
    assert process.returncode == 0, process.stderr.decode()[-2000:]
    lines = process.stderr.decode().splitlines()
    return {line.rsplit("|", 1)[1].strip() for line in lines if line.startswith("import time:")} - {
        "package"
    }


def heavy(modules: set[str], names: tuple[str, ...]) -> set[str]:
    return {module for module in modules if module.split(".")[0] in names}


def test_importing_the_model_imports_no_airflow() -> None:
    modules = imported_modules("-c", "import airflow_retrywindow.model")

    assert "airflow_retrywindow.model.evaluate" in modules
    assert heavy(modules, ("airflow", "pendulum", "dataclasses", "argparse")) == set()


def test_evaluating_from_the_command_line_imports_nothing_heavy() -> None:
    modules = imported_modules("-m", "airflow_retrywindow", stdin=CASE.read_bytes())

    assert heavy(modules, ("airflow", "pendulum", "dataclasses", "argparse", "inspect")) == set()


# what the console script airflow-retrywindow runs (pip's wrapper also imports re)
CONSOLE_SCRIPT = "import sys; from airflow_retrywindow.cli import main; sys.exit(main())"


@pytest.mark.parametrize(
    ("start", "not_imported"),
    [
        (("-c", "import airflow_retrywindow.model"), ("typing",)),
        (("-c", CONSOLE_SCRIPT), ("typing", "runpy", "contextlib", "importlib")),
        # python -m itself imports runpy, importlib.util and (up to 3.11) contextlib
        (("-m", "airflow_retrywindow"), ("typing",)),
    ],
    ids=["the model", "the console script", "python -m"],
)
def test_starting_imports_nothing_a_bare_script_does_without(
    start: tuple[str, ...], not_imported: tuple[str, ...]
) -> None:
    # -S: no site, so no .pth file of this environment imports anything first
    modules = imported_modules("-S", *start, stdin=CASE.read_bytes())

    assert "airflow_retrywindow.model.evaluate" in modules
    assert heavy(modules, not_imported) == set()


@pytest.mark.parametrize("command", [[], ["evaluate"], ["explain"], ["plan"]])
def test_help_explains_each_command(command: list[str]) -> None:
    process = run_cli(*command, "--help")

    assert process.returncode == 0
    text = process.stdout.decode()
    assert text.startswith("usage: airflow-retrywindow")
    assert "example" in text


def test_help_words() -> None:
    top = run_cli("--help").stdout.decode()
    plan = run_cli("plan", "--help").stdout.decode()

    assert "Invalid retry fixture" in top
    assert "max_retries=3 allows 4 runs" in plan
    for option in (
        "--airflow-retries",
        "--workflows-max-retries",
        "--max-attempts",
        "--step-functions-max-attempts",
        "--temporal-maximum-attempts",
        "--duration",
    ):
        assert option in plan


def test_unknown_command_is_a_usage_error() -> None:
    process = run_cli("frobnicate")

    assert process.returncode == 2 and "invalid choice" in process.stderr.decode()
    assert "Traceback" not in process.stderr.decode()


def test_main_in_process(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(CASE.read_text()))

    assert main([]) == 0
    assert capsys.readouterr().out.startswith('{"completionGuaranteed": false')
    assert main(["evaluate", str(CASE)]) == 0
    assert '"wait-backoff"' in capsys.readouterr().out
    assert main(["explain", str(CASE)]) == 0
    assert "Status updates:" in capsys.readouterr().out


def test_main_refuses_in_process(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("{}"))

    assert main(["evaluate", "-"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines()[0] == "Invalid retry fixture"
    assert "missing 'asOf'" in captured.err


def test_closed_output_pipe_is_not_a_traceback() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        process = subprocess.run(
            [sys.executable, "-m", "airflow_retrywindow", "evaluate", str(CASE)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=environment(),
            cwd=ROOT,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)

    assert process.returncode == 1
    assert process.stderr == b""
