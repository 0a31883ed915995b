"""Cold start of the installed command line and speed of the model, against bare stdlib code.

Run from the work tree: ``python benchmarks/cli_and_model.py [--rounds N]``.

The command line is timed as a user runs it: the wheel is built from the work
tree (from its sdist, as ``python -m build`` does) and pip installs it, compiling
its bytecode, into a throwaway virtualenv in a temporary folder. Every command
runs in that folder, with no ``PYTHON*`` variable set, so nothing of the checkout
is on the path.

Targets (one PASS/FAIL line each; the exit status is 1 if any fails):

- ``python -m airflow_retrywindow < case.json`` starts within 1.20x of
  ``benchmarks/baseline_stdlib.py``, a bare script doing the same work, run by the
  same interpreter;
- so does the ``airflow-retrywindow`` console script;
- importing ``airflow_retrywindow`` and its model imports no ``airflow`` module (in
  the project's virtualenv, where Airflow is installed).

Also printed: the floor (``python -c pass``) and the model's evaluations per
second on a 20-task fixture, against the baseline script's own evaluate.

``python -m`` costs more than a script before any of the package runs: the
interpreter imports ``runpy``, and with it ``importlib.util`` (and ``contextlib``
up to Python 3.11). The console script does without them.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CASE = ROOT / "examples" / "case.json"
BASELINE = ROOT / "benchmarks" / "baseline_stdlib.py"
COLD_START_TARGET = 1.20
FLOOR = "python -c pass"
BARE = "python baseline_stdlib.py"
MODULE = "python -m airflow_retrywindow"
SCRIPT = "airflow-retrywindow"


def environment() -> dict[str, str]:
    """The project's environment with the work tree importable first."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def user_environment() -> dict[str, str]:
    """The environment without any ``PYTHON*`` variable, as a user's shell has it."""
    return {name: value for name, value in os.environ.items() if not name.startswith("PYTHON")}


def run_quietly(args: list[str]) -> None:
    """Run ``args``; stop the benchmark with what it printed if it fails."""
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(
            f"`{' '.join(args)}` exited {done.returncode}:\n{done.stdout}{done.stderr}"
        )


def install(folder: Path) -> Path:
    """Build the wheel and install it into a new virtualenv in ``folder``; its bin folder."""
    if folder.resolve().is_relative_to(ROOT):
        raise SystemExit(f"{folder} is inside the checkout; set TMPDIR to a folder outside it")
    dist = folder / "dist"
    # from the sdist, so that no stale build/ folder of the checkout ends up in the wheel
    run_quietly([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(ROOT)])
    (wheel,) = dist.glob("*.whl")
    venv.EnvBuilder(with_pip=False).create(folder / "venv")
    bin_folder = folder / "venv" / "bin"
    pip = [sys.executable, "-m", "pip", "--python", str(bin_folder / "python")]
    run_quietly([*pip, "install", "--no-deps", "--no-index", "--quiet", str(wheel)])
    return bin_folder


def cpu_seconds() -> float:
    """User and system time of the finished child processes so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def installed_commands(folder: Path, bin_folder: Path) -> dict[str, list[str]]:
    """The commands to time, each run in ``folder`` by the virtualenv's interpreter."""
    python = str(bin_folder / "python")
    shutil.copy(BASELINE, folder / BASELINE.name)
    return {
        FLOOR: [python, "-c", "pass"],
        BARE: [python, BASELINE.name],
        MODULE: [python, "-m", "airflow_retrywindow"],
        SCRIPT: [str(bin_folder / "airflow-retrywindow")],
    }


def cold_starts(
    commands: dict[str, list[str]], folder: Path, rounds: int
) -> tuple[dict[str, float], dict[str, float]]:
    """Median wall and CPU time of each command in milliseconds, the commands interleaved.

    The targets are on wall time; CPU time, which leaves out the waits of a busy
    machine, tells a slower start from a noisier machine.
    """
    stdin, env = CASE.read_bytes(), user_environment()
    outputs: dict[str, bytes] = {}
    times: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    for round_number in range(rounds + 2):
        names = list(commands)
        # rotate the order so no command always runs on a warmer machine
        turn = round_number % len(names)
        for name in names[turn:] + names[:turn]:
            started, used = time.perf_counter(), cpu_seconds()
            done = subprocess.run(
                commands[name], input=stdin, capture_output=True, env=env, check=True, cwd=folder
            )
            elapsed, used = time.perf_counter() - started, cpu_seconds() - used
            if round_number >= 2:  # the first rounds only warm the file cache
                times[name].append(elapsed * 1000)
                cpu[name].append(used * 1000)
            outputs[name] = done.stdout
    for name in (MODULE, SCRIPT):
        if outputs[name] != outputs[BARE]:
            raise SystemExit(f"the baseline and {name} disagree on case.json")
    return median(times), median(cpu)


def median(values: dict[str, list[float]]) -> dict[str, float]:
    return {name: statistics.median(each) for name, each in values.items()}


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


def report_starts(starts: dict[str, float], cpu: dict[str, float]) -> dict[str, float]:
    """Print the cold starts; the command line's wall time over the baseline's, by command."""
    print(f"  {'':<32} {'wall':>7}    {'cpu':>7}")
    for command, value in starts.items():
        print(f"  {command:<32} {value:7.1f} ms {cpu[command]:7.1f} ms")
    baseline = starts[BARE]
    print(f"  over the floor: baseline {baseline - starts[FLOOR]:.1f} ms")
    ratios = {command: starts[command] / baseline for command in (MODULE, SCRIPT)}
    for command, ratio in ratios.items():
        extra, cpu_ratio = starts[command] - baseline, cpu[command] / cpu[BARE]
        print(f"  {command} / baseline: {ratio:.3f}x ({extra:+.1f} ms), cpu {cpu_ratio:.3f}x")
    return ratios


def verdict(passed: bool, text: str) -> bool:
    print(f"{'PASS' if passed else 'FAIL'}  {text}")
    return passed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--rounds", type=int, default=100, help="runs of each command (default 100)"
    )
    rounds = parser.parse_args().rounds

    sys.path.insert(0, str(ROOT))
    from airflow_retrywindow.model import evaluate

    with tempfile.TemporaryDirectory(prefix="retrywindow-bench-") as name:
        folder = Path(name)
        starts, cpu = cold_starts(installed_commands(folder, install(folder)), folder, rounds)
    print(f"cold start of the installed wheel on case.json, median of {rounds} runs each")
    ratios = report_starts(starts, cpu)

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
            f"{command} cold start {ratio:.3f}x the stdlib baseline "
            f"(target <= {COLD_START_TARGET}x)",
        )
        for command, ratio in ratios.items()
    ]
    results.append(
        verdict(not found, f"importing airflow_retrywindow imports no airflow module {found or ''}")
    )
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
