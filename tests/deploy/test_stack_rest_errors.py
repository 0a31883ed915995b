"""A server error of a stack's REST API says why, from the API server's own log.

The answer of a 500 is only "Internal Server Error"; the cause (a traceback) is in the
API server's log under the test's temporary folder, which CI does not keep. An answer a
test expects (a 4xx) stays an ``HTTPError`` it can look at.
"""

from __future__ import annotations

import json
import threading
import urllib.error
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from devstack.stack import AirflowStack

pytestmark = pytest.mark.airflow

CAUSE = "sqlite3.OperationalError: database is locked"


class _Answers(BaseHTTPRequestHandler):
    """A token for anyone; 500 for a run, 409 for a pool."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/auth/token":
            self._send(201, {"access_token": "t"})
        elif self.path.endswith("/dagRuns"):
            self._send(500, "Internal Server Error")
        else:
            self._send(409, {"detail": "exists"})

    def _send(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[AirflowStack]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    stack = AirflowStack(
        home=tmp_path, database_url=f"sqlite:///{tmp_path}/airflow.db", port=server.server_port
    )
    (stack.logs / "api-server.log").write_text(f"Traceback (most recent call last):\n{CAUSE}\n")
    yield stack
    server.shutdown()
    server.server_close()


def test_a_server_error_shows_the_api_servers_log(stack: AirflowStack) -> None:
    with pytest.raises(RuntimeError) as error:
        stack.api("POST", "/api/v2/dags/d/dagRuns", {"dag_run_id": "r"})
    assert "POST /api/v2/dags/d/dagRuns answered 500" in str(error.value)
    assert CAUSE in str(error.value)
    assert "api-server.log" in str(error.value)


def test_an_answer_a_test_expects_stays_an_http_error(stack: AirflowStack) -> None:
    with pytest.raises(urllib.error.HTTPError) as error:
        stack.api("POST", "/api/v2/pools", {"name": "p"})
    assert error.value.code == 409
