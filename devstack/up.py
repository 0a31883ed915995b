"""``make up``: the example DAG in ``airflow standalone``, with a UI on localhost:8080.

Run from the repository root as ``python -m devstack.up``.

The Airflow home lives in ``.airflow/`` (git-ignored) and keeps its SQLite DB
between runs. Stop with Ctrl-C.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from devstack.example import DAG_ID
from devstack.stack import ADMIN, ROOT, AirflowStack

PORT = 8080


def view_help(url: str) -> str:
    """Where the Retry window view is, once a run has decided something."""
    run = f"{url}/retry-window/dags/{DAG_ID}/runs/<run id>"
    return (
        "Retry window view: open a task instance of a run and pick its 'Retry window' tab\n"
        "(every decision of the run: the run's 'Retry window' tab; the gate and the sensor\n"
        f"link to theirs). Without the UI around it: {run}\n"
    )


def main() -> None:
    home = ROOT / ".airflow"
    stack = AirflowStack(home=home, database_url=f"sqlite:///{home}/airflow.db", port=PORT)
    stack.prepare()
    print(f"\nAirflow UI: http://localhost:{PORT}  (login {ADMIN[0]} / password {ADMIN[1]})")
    print("The example DAG is retry_window_example; trigger it from the UI. Ctrl-C stops.")
    print(view_help(f"http://localhost:{PORT}"))
    airflow = str(Path(sys.executable).with_name("airflow"))
    os.execve(airflow, [airflow, "standalone"], stack.env)


if __name__ == "__main__":
    main()
