"""``plan`` and the retry budget translation behind it."""

from __future__ import annotations

import pytest

from airflow_retrywindow.cli.attempts import CONVENTIONS, AttemptLimit, InvalidAttemptLimit
from tests.cli.cli_runner import run_cli


def test_counting_conventions() -> None:
    assert AttemptLimit.from_workflows_max_retries(3).runs == 4
    assert AttemptLimit.from_max_attempts(3).runs == 3
    assert AttemptLimit.from_airflow_retries(0).runs == 1
    assert AttemptLimit.from_step_functions_max_attempts(3).runs == 4
    assert AttemptLimit.from_step_functions_max_attempts(0).runs == 1
    assert AttemptLimit.from_temporal_maximum_attempts(5).runs == 5


@pytest.mark.parametrize("runs", [1, 2, 4, 10, 11, 40])
def test_translation_round_trips(runs: int) -> None:
    budget = AttemptLimit(runs)

    assert budget.airflow_retries == budget.workflows_max_retries == runs - 1
    assert budget.step_functions_max_attempts == runs - 1
    assert budget.max_attempts == budget.temporal_maximum_attempts == runs
    for convention in CONVENTIONS:
        assert AttemptLimit.from_setting(convention, convention.value(runs)) == budget
    assert budget.fits_model is (runs <= 10)


@pytest.mark.parametrize(
    ("build", "fragment"),
    [
        (lambda: AttemptLimit.from_airflow_retries(-1), "Airflow retries"),
        (lambda: AttemptLimit.from_max_attempts(0), "maxAttempts"),
        (lambda: AttemptLimit.from_temporal_maximum_attempts(0), "unlimited"),
        (lambda: AttemptLimit.from_workflows_max_retries(True), "max_retries"),
        (lambda: AttemptLimit(0), "at least 1 run"),
        (lambda: AttemptLimit(11).model_max_attempts(), "at most (9 retries)"),
    ],
)
def test_bad_budgets_are_refused(build: object, fragment: str) -> None:
    with pytest.raises(
        InvalidAttemptLimit, match=rf".*{fragment.replace('(', '.').replace(')', '.')}"
    ):
        build()  # type: ignore[operator]


def test_sequence_follows_the_model_backoff() -> None:
    plain = AttemptLimit(5).sequence(initial_delay=4, max_delay=12, multiplier=2)
    timed = AttemptLimit(3).sequence(initial_delay=4, max_delay=12, multiplier=2, duration=20)

    assert [(a.number, a.wait, a.start) for a in plain] == [
        (1, 0, 0),
        (2, 4, 4),
        (3, 8, 12),
        (4, 12, 24),
        (5, 12, 36),
    ]
    assert [(a.start, a.end) for a in timed] == [(0, 20), (24, 44), (52, 72)]
    with pytest.raises(InvalidAttemptLimit, match="max delay"):
        AttemptLimit(2).sequence(initial_delay=4, max_delay=3, multiplier=2)


def attempt_rows(text: str) -> list[list[str]]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("attempt"))
    return [line.split() for line in lines[start + 1 :] if line.strip()]


def test_plan_max_retries_three_gives_four_runs() -> None:
    process = run_cli("plan", "--workflows-max-retries", "3")

    assert process.returncode == 0 and process.stderr == b""
    text = process.stdout.decode()
    assert "Retry budget: 4 runs in total, the first run and 3 retries." in text
    assert [row[0] for row in attempt_rows(text)] == ["1", "2", "3", "4"]
    table = {line.split("  ")[0]: line for line in text.splitlines()}
    assert table["Airflow"].split()[-4:] == ["retries", "3", "retries", "only"]
    assert "maxAttempts           4" in table["retry-window model"]
    assert "MaxAttempts           3" in table["AWS Step Functions"]
    assert "maximum_attempts      4" in table["Temporal"]


def test_plan_max_attempts_three_gives_three_runs_with_times() -> None:
    text = run_cli("plan", "--max-attempts", "3", "--duration", "20").stdout.decode()

    assert "Retry budget: 3 runs in total, the first run and 2 retries." in text
    assert attempt_rows(text) == [
        ["1", "-", "t=0", "t=20"],
        ["2", "4", "s", "t=24", "t=44"],
        ["3", "8", "s", "t=52", "t=72"],
    ]


def test_plan_defaults_to_the_seed_policy() -> None:
    text = run_cli("plan").stdout.decode()

    assert "4 runs in total" in text
    assert attempt_rows(text)[-1] == ["4", "12", "s", "+24", "s"]


def test_plan_marks_budgets_the_model_cannot_express() -> None:
    text = run_cli("plan", "--airflow-retries", "12").stdout.decode()

    assert "does not fit the model" in text


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--airflow-retries", "-1"], "argument --airflow-retries: Airflow retries must be"),
        (["--max-attempts", "0"], "argument --max-attempts:"),
        (["--temporal-maximum-attempts", "0"], "unlimited"),
        (["--airflow-retries", "1000"], "at most 100"),
        (["--multiplier", "1.5"], "argument --multiplier: must be a whole number, got '1.5'"),
        (["--multiplier", "6"], "argument --multiplier: must be from 1 to 5, got 6"),
        (["--max-delay", "3"], "argument --max-delay: must be from 4 (--initial-delay)"),
        (["--initial-delay", "0"], "argument --initial-delay: must be from 1"),
        (["--duration", "-5"], "argument --duration: must be from 0"),
        (["--max-attempts", "x"], "got 'x'"),
        (["--max-attempts", "3", "--airflow-retries", "2"], "not allowed with"),
    ],
)
def test_plan_errors_name_the_option_and_value(args: list[str], fragment: str) -> None:
    process = run_cli("plan", *args)

    assert process.returncode == 2 and process.stdout == b""
    assert fragment in process.stderr.decode()
    assert "Traceback" not in process.stderr.decode()
