"""A real ``airflow api-server`` on a free loopback port, over the test-wide metadata DB.

The server authenticates with Airflow's SimpleAuthManager: one ``viewer`` user
(read-only is all a gate needs) whose password sits in a passwords file, and
the gate's connection ``airflow_api_default`` holds that user and password; and one
``op`` user, who edits pools as the breakers' controller does, for the tests that write
a breaker pool's state.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from devstack.stack import end_group, free_port
from tests.gate.gate_runs import ApiServer, install_dags

VIEWER = "rw_gate_viewer"
#: who edits a pool (Airflow's ``op`` role may), as the breakers' controller does
OPERATOR = "rw_gate_operator"


#: the pools of this folder's DAGs: name -> slots, description
POOLS = {
    "rw_gate_positions": (2, "positions database"),  # one heavy (2) or two light (1) reads
    "rw_gate_feed": (4, "a breaker pool, its state written by the test (rw_gate_pool_open)"),
}


@pytest.fixture(scope="session")
def gate_home(airflow_db: Path) -> Path:
    """The Airflow home with this folder's DAGs and their pools (one command line call)."""
    install_dags(airflow_db)
    pools = airflow_db / "rw_gate_pools.json"
    pools.write_text(
        json.dumps(
            {
                name: {"slots": slots, "description": description, "include_deferred": False}
                for name, (slots, description) in POOLS.items()
            }
        )
    )
    airflow = Path(sys.executable).with_name("airflow")
    done = subprocess.run(
        [str(airflow), "pools", "import", str(pools)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return airflow_db


@pytest.fixture(scope="session")
def api_server(gate_home: Path) -> Iterator[ApiServer]:
    """``airflow api-server`` serving ``/api/v2`` for the tests, stopped at the end."""
    port = free_port()
    password, operator_password = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    passwords = gate_home / "rw_gate_passwords.json"
    passwords.write_text(json.dumps({VIEWER: password, OPERATOR: operator_password}))
    env = {
        **os.environ,
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{VIEWER}:viewer,{OPERATOR}:op",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
    }
    log_path = gate_home / "rw_gate_api_server.log"
    airflow = Path(sys.executable).with_name("airflow")
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [str(airflow), "api-server", "--host", "127.0.0.1", "--port", str(port),
             "--apps", "core", "--workers", "1"],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    server = ApiServer(
        url=f"http://127.0.0.1:{port}",
        login=VIEWER,
        password=password,
        operator=(OPERATOR, operator_password),
    )
    try:
        _wait_until_up(server.url, process, log_path)
        yield server
    finally:
        end_group(process)


def _wait_until_up(url: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the API server exited:\n{log_path.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/api/v2/version", timeout=2) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    raise RuntimeError(f"the API server did not answer:\n{log_path.read_text()[-3000:]}")
