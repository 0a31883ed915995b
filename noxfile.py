"""Each supported Airflow minor, on a Python of its own.

`make test` runs the whole suite on Python 3.11 and Airflow 3.3 (constraints.txt). Here
each older Airflow minor runs the tests that put the gate, the sensor (poke and
deferrable), the Retry window view and the notifier on a real Airflow (``SUBSET``), and
Airflow 3.3, whose every test runs in `make test`, runs on the Python left what differs by
Python rather than by Airflow (``PYTHON_SUBSET``): each minor paired with one of the other
declared Pythons rather than multiplied by them, in a virtualenv of its own installed by
uv (the dev group's) with that minor's constraints file:

    airflow-3.1   Python 3.10   constraints-3.1.txt   SUBSET
    airflow-3.2   Python 3.12   constraints-3.2.txt   SUBSET
    airflow-3.3   Python 3.13   constraints.txt       PYTHON_SUBSET

    nox                                # every session, one after another
    nox -s airflow-3.1                 # one minor
    nox -s airflow-3.2 -- -k sensor    # what follows -- goes to pytest

Tests that need Airflow 3.3 (``requires_airflow_3_3``) skip on older minors with the
reason; a session in which no test passed (every one skipped) fails. Each session prints
one line, ``Airflow 3.1.8 on Python 3.10: N passed ... in S s``, and appends it to
``.test-runs/airflow-versions.txt``, which CI (``.ci/run``) prints.

Beside the suite in CI each older minor's session takes 5 to 7 minutes, most of it
waiting out the sensors' backoffs; Airflow 3.3's, which ran the same subset and the policy
on a real Airflow until the suite had it all, about one. One after the other they took as
long as the suite, so CI (.ci/run) runs 3.1's beside 3.2's, then 3.3's, all beside the
suite: two nox processes at once.

The virtualenvs (``.nox/``) are kept and reused, so a second run installs nothing
new (a fresh clone, as in CI, creates them). pyenv's interpreters are found without
activating them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")
#: where each session's line goes, for CI to print (.ci/run)
VERSIONS = ROOT / ".test-runs" / "airflow-versions.txt"

#: every Python the package declares (pyproject.toml's classifiers; tests/test_packaging.py)
PYTHONS = ["3.10", "3.11", "3.12", "3.13"]


@dataclass(frozen=True)
class Minor:
    """One Airflow minor: the Python it is tested on and the constraints it installs with."""

    airflow: str
    python: str
    constraints: str


#: every supported minor, each on another Python; 3.11 has the whole suite in `make test`
MINORS = [
    Minor("3.1", "3.10", "constraints-3.1.txt"),
    Minor("3.2", "3.12", "constraints-3.2.txt"),
    Minor("3.3", "3.13", "constraints.txt"),
]

#: The gate, the sensor, the view and the notifier on a real Airflow, for the minors before
#: 3.3, chosen to run in a few minutes per minor (each module's stack or run starts once);
#: `make test` runs all of them on 3.3. The view's module runs the gate example on a real
#: scheduler (its notifier writes to the task log) and checks that the DAG processor refuses
#: only the DAG files with a retry policy. The example DAG's every day (the demo, five
#: minutes of a stack) runs in `make test`, and its on-time day, on Celery, in
#: `make test-distributed`.
SUBSET = [
    # Airflow lists the provider; every module imports, every Airflow name it uses exists
    "tests/policy/test_provider.py::test_airflow_lists_the_provider",
    "tests/package/test_version_compat.py",
    # each private name of Airflow the package still uses, in one guarded module, checked
    "tests/package/test_airflow_internals.py",
    # a DAG with a RetryWindowPolicy is refused before 3.3, with the reason; nothing else is
    "tests/policy/test_policy_before_3_3.py",
    # the gate: every test of its run by `airflow dags test`, reading a real API server
    "tests/gate/test_gate_run.py",
    # the sensor: deferrable, poke and reschedule, skips and timeouts
    "tests/gate/test_sensor_run.py",
    # with no retry policy to trip it, the gate and the sensor still hold on an open breaker
    "tests/gate/test_pool_open_run.py",
    "tests/ui/test_breaker_rows.py",
    # the Retry window view served by the API server (the browser test runs in `make test`)
    "tests/ui/test_view_on_airflow.py",
    "--deselect=tests/ui/test_view_on_airflow.py::test_refused_task_shows_its_decision_and_timeline_in_a_browser",
    # the gate's and the sensor's metrics reach a StatsD listener from a real scheduler's tasks
    "tests/metrics/test_metrics_on_airflow.py",
    # the example DAGs: every DAG file parses (before 3.3, those with a retry policy do not)
    "tests/example/test_example_dag.py::test_every_dag_file_parses_without_cycles_and_passes_check_dag",
]
#: What differs by Python rather than by Airflow, for Airflow 3.3 on Python 3.13 (the suite,
#: in `make test`, runs every test of 3.3 on 3.11): every module imports and every Airflow
#: name it uses exists, the private names' shapes, the settings, the layers, the decision
#: model (its properties and the differential against the reference) and the command line.
PYTHON_SUBSET = ["tests/package", "tests/model", "tests/cli"]

nox.options.sessions = [f"airflow-{minor.airflow}" for minor in MINORS]
nox.options.reuse_venv = "yes"
# uv, from the dev group: a session's Airflow installs in seconds instead of minutes of pip
nox.options.default_venv_backend = "uv"
nox.options.error_on_missing_interpreters = True


def _works(interpreter: str) -> bool:
    found = shutil.which(interpreter)
    if found is None:
        return False
    done = subprocess.run([found, "-c", ""], capture_output=True, check=False)
    return done.returncode == 0  # a pyenv shim of an inactive version exits 127


def _find_pyenv_interpreters() -> None:
    """Put pyenv's ``pythonX.Y`` on PATH for each version the shims do not answer for.

    The links go to ``.nox/.interpreters``, first on PATH for this nox process only,
    so nothing else of pyenv's is shadowed.
    """
    versions = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    links = ROOT / ".nox" / ".interpreters"
    for python in PYTHONS:
        name = f"python{python}"
        if _works(name):
            continue
        candidates = sorted(
            versions.glob(f"{python}.*/bin/{name}"),
            key=lambda path: [int(part) for part in path.parts[-3].split(".") if part.isdigit()],
        )
        if not candidates:
            continue
        links.mkdir(parents=True, exist_ok=True)
        # made beside and renamed over: CI runs two nox processes at once
        made = links / f".{name}.{os.getpid()}"
        made.unlink(missing_ok=True)
        made.symlink_to(candidates[-1])
        os.replace(made, links / name)
    if links.is_dir():
        os.environ["PATH"] = os.pathsep.join([str(links), os.environ.get("PATH", "")])


_find_pyenv_interpreters()


def _subset(minor: Minor) -> list[str]:
    return PYTHON_SUBSET if minor.airflow == "3.3" else SUBSET


def _counts(results: Path) -> dict[str, int] | None:
    """pytest's counts from its report (``passed`` worked out), ``None`` without a report."""
    if not results.is_file():
        return None
    suite = ET.parse(results).getroot()
    suite = suite if suite.tag == "testsuite" else suite[0]
    counts = {
        name: int(suite.get(name, "0")) for name in ("tests", "failures", "errors", "skipped")
    }
    counts["passed"] = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    return counts


def nothing_ran(counts: dict[str, int] | None) -> str | None:
    """Why a session whose pytest exited with success proves nothing, or ``None``: not one
    test passed (every one skipped, or none was selected)."""
    if counts is None or counts["passed"] > 0:
        return None
    return (
        f"no test passed ({counts['skipped']} of {counts['tests']} skipped): the session "
        "proves nothing about this minor; see each skip's reason above"
    )


def _line(session: nox.Session, minor: Minor, counts: dict[str, int] | None, seconds: float) -> str:
    """``Airflow 3.1.8 on Python 3.10: 30 passed, 6 skipped in 412 s``, from pytest's report."""
    version = session.run(
        "python", "-c", "from importlib.metadata import version; print(version('apache-airflow'))",
        silent=True,
    )  # fmt: skip
    airflow = str(version).strip() if version else minor.airflow
    if counts is None:
        return f"Airflow {airflow} on Python {minor.python}: no test report, pytest did not finish"
    words = [f"{counts['passed']} passed"]
    words += [
        f"{counts[name]} {name}" for name in ("failures", "errors", "skipped") if counts[name]
    ]
    return f"Airflow {airflow} on Python {minor.python}: {', '.join(words)} in {seconds:.0f} s"


def _session(minor: Minor) -> None:
    @nox.session(name=f"airflow-{minor.airflow}", python=minor.python)
    def airflow(session: nox.Session) -> None:
        session.install(
            "--constraint",
            str(ROOT / minor.constraints),
            "--editable",
            str(ROOT),
            *nox.project.dependency_groups(PYPROJECT, "test"),
        )
        results = ROOT / ".test-runs" / f"nox-airflow-{minor.airflow}.xml"
        results.parent.mkdir(exist_ok=True)
        results.unlink(missing_ok=True)
        began = time.monotonic()
        try:
            session.run(
                "python", "-m", "pytest", "-p", "no:cacheprovider", f"--junitxml={results}",
                *_subset(minor), *session.posargs,
            )  # fmt: skip
        finally:
            counts = _counts(results)
            line = _line(session, minor, counts, time.monotonic() - began)
            session.log(line)
            with VERSIONS.open("a") as versions:
                versions.write(line + "\n")
        problem = nothing_ran(counts)
        if problem:
            session.error(problem)

    airflow.__doc__ = (
        f"The subset on Airflow {minor.airflow} and Python {minor.python} ({minor.constraints})."
    )


for _minor in MINORS:
    _session(_minor)
