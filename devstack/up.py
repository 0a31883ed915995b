"""``make up``: the example DAGs in ``airflow standalone``, with a UI on localhost:8080.

Run from the repository root as ``python -m devstack.up``, with the Python of the
virtualenv to serve: ``.venv`` (Airflow 3.3), or ``.venv-3.1`` and ``.venv-3.2``
(``make up AIRFLOW=3.1``: that minor, and the package from its wheel).

The Airflow home lives in ``.airflow/`` (``.airflow-3.1/`` for Airflow 3.1, ...;
git-ignored) and keeps its SQLite DB between runs. Stop with Ctrl-C.
"""

from __future__ import annotations

import os
import sys
from importlib.metadata import version
from pathlib import Path

from devstack.example import DAG_ID
from devstack.stack import ADMIN, ROOT, AirflowStack

PORT = 8080
#: the example with a gate and a sensor only: the one Airflow before 3.3 runs
GATE_DAG_ID = "retry_window_gate_example"


def airflow_minor() -> tuple[int, int]:
    """The installed Airflow's minor version, read without importing Airflow."""
    major, minor = version("apache-airflow").split(".")[:2]
    return int(major), int(minor)


def view_help(url: str, dag_id: str = DAG_ID) -> str:
    """Where the Retry window view is, once a run has decided something."""
    run = f"{url}/retry-window/dags/{dag_id}/runs/<run id>"
    return (
        "Retry window view: open a task instance of a run and pick its 'Retry window' tab\n"
        "(every decision of the run: the run's 'Retry window' tab; the gate and the sensor\n"
        f"link to theirs). Without the UI around it: {run}\n"
    )


def main() -> None:
    minor = airflow_minor()
    policies = minor >= (3, 3)
    # a metadata DB that a newer Airflow migrated cannot be used by an older one
    home = ROOT / (".airflow" if policies else f".airflow-{minor[0]}.{minor[1]}")
    stack = AirflowStack(home=home, database_url=f"sqlite:///{home}/airflow.db", port=PORT)
    # ``airflow standalone`` starts one API server, the execution API's too
    stack.env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] = f"{stack.url}/execution/"
    stack.prepare()
    print(f"\nAirflow UI: http://localhost:{PORT}  (login {ADMIN[0]} / password {ADMIN[1]})")
    if policies:
        print(f"The example DAGs are {DAG_ID} and {GATE_DAG_ID}; trigger one from the UI.")
    else:
        print(
            f"The example DAG is {GATE_DAG_ID}; trigger it from the UI. The examples with a\n"
            f"retry policy are import errors on Airflow {minor[0]}.{minor[1]}: retry policies"
            " arrived in Airflow 3.3."
        )
    print("Ctrl-C stops.")
    print(view_help(f"http://localhost:{PORT}", DAG_ID if policies else GATE_DAG_ID))
    airflow = str(Path(sys.executable).with_name("airflow"))
    os.execve(airflow, [airflow, "standalone"], stack.env)


if __name__ == "__main__":
    main()
