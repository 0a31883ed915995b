"""``make up``: the example DAG in ``airflow standalone``, with a UI on localhost:8080.

Run from the repository root as ``python -m devstack.up``.

The Airflow home lives in ``.airflow/`` (git-ignored) and keeps its SQLite DB
between runs. Stop with Ctrl-C.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from devstack.stack import ADMIN, ROOT, AirflowStack

PORT = 8080


def main() -> None:
    home = ROOT / ".airflow"
    stack = AirflowStack(home=home, database_url=f"sqlite:///{home}/airflow.db", port=PORT)
    stack.prepare()
    print(f"\nAirflow UI: http://localhost:{PORT}  (login {ADMIN[0]} / password {ADMIN[1]})")
    print("The example DAG is retry_window_example; trigger it from the UI. Ctrl-C stops.\n")
    airflow = str(Path(sys.executable).with_name("airflow"))
    os.execve(airflow, [airflow, "standalone"], stack.env)


if __name__ == "__main__":
    main()
