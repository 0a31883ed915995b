"""The Airflow-backed tests on the other supported Pythons.

`make test` runs the whole suite on Python 3.11, the interpreter constraints.txt was
resolved on. The ``airflow`` sessions here run, on another Python each, the tests
that put the policy, the gate, the Retry window view and the example DAG on a real
Airflow 3.3.2 (``SUBSET``), in a virtualenv of their own installed with
constraints.txt by uv (the dev group's). CI runs every other declared Python: 3.10, 3.12 and 3.13.

    nox                                # what CI runs: airflow-3.10, -3.12, then -3.13
    nox -s airflow-3.12                # one Python
    nox -s airflow-3.13 -- -k gate     # what follows -- goes to pytest

The virtualenvs (``.nox/``) are kept and reused, so a second run installs nothing
new (a fresh clone, as in CI, creates them). pyenv's interpreters are found without
activating them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
CONSTRAINTS = ROOT / "constraints.txt"
PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")

#: every Python the package declares (pyproject.toml's classifiers; tests/test_packaging.py)
PYTHONS = ["3.10", "3.11", "3.12", "3.13"]
#: what CI runs here: every declared Python but 3.11, which has the whole suite in `make test`
CI_PYTHONS = ["3.10", "3.12", "3.13"]

#: The policy, the gate, the view and the example DAG on a real Airflow, chosen to
#: run in a few minutes per Python (each module's stack or run starts once); `make test` runs
#: all of them. The example DAG runs on a real scheduler in the view's module (its late day:
#: the policy, the gate and the sensor refuse); its every day (the demo, five minutes of a
#: stack) runs in `make test` and, on Celery, in `make test-distributed`.
SUBSET = [
    # the policy: a decided retry after exactly the model's backoff, a refused unknown
    # outcome, and the retry-start check before every try of mapped tasks
    "tests/policy/test_policy_on_airflow.py::test_retryable_failure_waits_exactly_the_model_backoff",
    "tests/policy/test_policy_on_airflow.py::test_refused_after_one_try[rw_unknown-append-reconcile-remote]",
    "tests/policy/test_policy_on_airflow.py::test_mapped_instances_retry_through_the_start_check",
    # Airflow lists the provider
    "tests/policy/test_provider.py::test_airflow_lists_the_provider",
    # the gate: every test of its run on a real scheduler and API server
    "tests/gate/test_gate_run.py",
    "--deselect=tests/gate/test_gate_run.py::test_a_gate_that_cannot_decide_fails_closed",
    # the Retry window view served by the API server (the browser test runs in `make test`)
    "tests/ui/test_view_on_airflow.py",
    "--deselect=tests/ui/test_view_on_airflow.py::test_refused_task_shows_its_decision_and_timeline_in_a_browser",
    # the example DAG: every DAG file parses
    "tests/example/test_example_dag.py::test_every_dag_file_parses_without_cycles_and_passes_check_dag",
]

nox.options.sessions = [f"airflow-{python}" for python in CI_PYTHONS]
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
        link = links / name
        link.unlink(missing_ok=True)
        link.symlink_to(candidates[-1])
    if links.is_dir():
        os.environ["PATH"] = os.pathsep.join([str(links), os.environ.get("PATH", "")])


_find_pyenv_interpreters()


@nox.session(python=PYTHONS)
def airflow(session: nox.Session) -> None:
    """The Airflow-backed subset on one Python, installed with constraints.txt."""
    session.install(
        "--constraint",
        str(CONSTRAINTS),
        "--editable",
        str(ROOT),
        *nox.project.dependency_groups(PYPROJECT, "test"),
    )
    session.run("python", "-m", "pytest", "-p", "no:cacheprovider", *SUBSET, *session.posargs)
