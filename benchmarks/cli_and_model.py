"""Cold start of the command line and speed of the model, against bare stdlib code.

Run from the work tree: ``python benchmarks/cli_and_model.py [--rounds N]``.

Targets (one PASS/FAIL line each; the exit status is 1 if any fails):

- ``python -m airflow_retrywindow < examples/case.json`` starts within 1.15x of
  ``benchmarks/baseline_stdlib.py``, a bare script doing the same work;
- importing ``airflow_retrywindow`` and its model imports no ``airflow`` module.

Also printed: the floor (``python -c pass``) and the model's evaluations per
second on a 20-task fixture, against the baseline script's own evaluate.

The package's bytecode is compiled first, as an installed package has it: with
``PYTHONDONTWRITEBYTECODE`` set, every start would otherwise compile the source.
"""

from __future__ import annotations

import argparse
import compileall
import copy
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CASE = ROOT / "examples" / "case.json"
BASELINE = ROOT / "benchmarks" / "baseline_stdlib.py"
COLD_START_TARGET = 1.15


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def cold_starts(rounds: int) -> dict[str, float]:
    """Median wall time of each command in milliseconds, the commands interleaved."""
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "baseline_stdlib.py < case.json": [sys.executable, str(BASELINE)],
        "python -m airflow_retrywindow < case.json": [sys.executable, "-m", "airflow_retrywindow"],
    }
    stdin, env = CASE.read_bytes(), environment()
    outputs: dict[str, bytes] = {}
    times: dict[str, list[float]] = {name: [] for name in commands}
    for round_number in range(rounds + 2):
        names = list(commands)
        # rotate the order so no command always runs on a warmer machine
        names = names[round_number % 3 :] + names[: round_number % 3]
        for name in names:
            started = time.perf_counter()
            done = subprocess.run(
                commands[name], input=stdin, capture_output=True, env=env, check=True, cwd=ROOT
            )
            elapsed = time.perf_counter() - started
            if round_number >= 2:  # the first rounds only warm the file cache
                times[name].append(elapsed * 1000)
            outputs[name] = done.stdout
    baseline, cli = list(commands)[1:]
    if outputs[baseline] != outputs[cli]:
        raise SystemExit("the baseline and the command line disagree on case.json")
    return {name: statistics.median(values) for name, values in times.items()}


def twenty_tasks() -> dict[str, Any]:
    case = json.loads(CASE.read_text())
    tasks = []
    for number in range(20):
        task = copy.deepcopy(case["tasks"][number % len(case["tasks"])])
        task["id"] = f"{task['id']}-{number:02}"
        tasks.append(task)
    return dict(case, tasks=tasks)


def per_second(evaluate: Callable[[Any], Any], payload: dict[str, Any]) -> float:
    """Best of five one-third-second runs, in evaluations per second."""
    best = 0.0
    for _ in range(5):
        count, started = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - started) < 0.33:
            for _ in range(100):
                evaluate(payload)
            count += 100
        best = max(best, count / elapsed)
    return best


def baseline_evaluate() -> Callable[[Any], Any]:
    spec = importlib.util.spec_from_file_location("baseline_stdlib", BASELINE)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {BASELINE}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    evaluate: Callable[[Any], Any] = module.evaluate
    return evaluate


def airflow_modules() -> list[str]:
    """``airflow`` modules present after importing the package and its model."""
    code = (
        "import sys, airflow_retrywindow, airflow_retrywindow.model, airflow_retrywindow.cli\n"
        "print('\\n'.join(m for m in sys.modules if m.split('.')[0] == 'airflow'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environment(), check=True
    )
    return done.stdout.split()


def verdict(passed: bool, text: str) -> bool:
    print(f"{'PASS' if passed else 'FAIL'}  {text}")
    return passed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=40, help="runs of each command (default 40)")
    rounds = parser.parse_args().rounds

    compileall.compile_dir(ROOT / "airflow_retrywindow", quiet=1)
    sys.path.insert(0, str(ROOT))
    from airflow_retrywindow.model import evaluate

    starts = cold_starts(rounds)
    floor, baseline, cli = starts.values()
    print(f"cold start, median of {rounds} runs each")
    for name, value in starts.items():
        print(f"  {name:<44} {value:7.1f} ms")
    ratio = cli / baseline
    print(f"  command line / baseline: {ratio:.3f}x ({cli - baseline:+.1f} ms)")
    print(
        f"  over the floor: baseline {baseline - floor:.1f} ms, command line {cli - floor:.1f} ms"
    )

    payload = twenty_tasks()
    ours, bare = per_second(evaluate, payload), per_second(baseline_evaluate(), payload)
    print("model throughput on a 20-task fixture")
    print(f"  airflow_retrywindow.model.evaluate  {ours:10,.0f} evaluations/s")
    print(f"  baseline_stdlib.evaluate            {bare:10,.0f} evaluations/s")
    print(f"  model / baseline: {ours / bare:.3f}x")

    found = airflow_modules()
    results = [
        verdict(
            ratio <= COLD_START_TARGET,
            f"command line cold start {ratio:.3f}x the stdlib baseline "
            f"(target <= {COLD_START_TARGET}x)",
        ),
        verdict(
            not found, f"importing airflow_retrywindow imports no airflow module {found or ''}"
        ),
    ]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
