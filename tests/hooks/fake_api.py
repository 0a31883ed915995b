"""A small imitation of Airflow's REST API v2, served for real on 127.0.0.1.

It answers the reads the hook makes, and its change of a pool (``PATCH``), with JSON
shaped like the API server's (the reader reads every field it uses strictly), pages
listings by ``total_entries``, issues JWT-like tokens at ``POST /auth/token``, refuses
stale ones with 401, and records every request. With a TLS context it serves https.

Hostile answers, for the reader's bounds: a ``Date`` from a clock running
``clock_shift`` seconds off (or noted ``stale_by`` seconds early for the next
``stale_answers`` answers), answers sent after ``delay`` seconds, bodies padded by
``padding`` bytes, sent a byte every ``dribble`` seconds, or never ending
(``endless``).
"""

from __future__ import annotations

import email.utils
import itertools
import json
import re
import ssl
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from airflow_retrywindow.hooks.connection_type import CONN_TYPE
from tests.hooks.error_pages import bad_gateway

VERSION = "3.3.2"
START = datetime(2026, 3, 2, 5, 0, tzinfo=timezone.utc)


def stamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def task_instance(
    task_id: str, *, dag_id: str = "etl", run_id: str = "run_1", try_number: int = 1
) -> dict[str, Any]:
    """One ``TaskInstanceResponse``: a failed try of ``task_id``."""
    return {
        "id": str(uuid.uuid4()),
        "dag_id": dag_id,
        "dag_display_name": dag_id,
        "dag_run_id": run_id,
        "task_id": task_id,
        "task_display_name": task_id,
        "map_index": -1,
        "state": "failed",
        "try_number": try_number,
        "max_tries": 3,
        "start_date": stamp(START),
        "end_date": stamp(START + timedelta(minutes=4)),
        "run_after": stamp(START),
        "logical_date": stamp(START),
        "executor_config": "{}",
        "pool": "default_pool",
        "pool_slots": 1,
        "priority_weight": 1,
        "queue": "default",
    }


def xcom_entry(
    task_id: str, key: str, *, dag_id: str = "etl", run_id: str = "run_1"
) -> dict[str, Any]:
    """One ``XComResponse`` of the listing (keys only, no value)."""
    return {
        "dag_id": dag_id,
        "dag_display_name": dag_id,
        "run_id": run_id,
        "task_id": task_id,
        "task_display_name": task_id,
        "map_index": -1,
        "key": key,
        "timestamp": stamp(START + timedelta(minutes=4)),
        "run_after": stamp(START),
        "logical_date": stamp(START),
    }


def pool(
    name: str, slots: int, occupied: int = 0, deferred: int = 0, description: str | None = None
) -> dict[str, Any]:
    """One ``PoolResponse``."""
    return {
        "name": name,
        "slots": slots,
        "occupied_slots": occupied,
        "running_slots": occupied,
        "queued_slots": 0,
        "scheduled_slots": 0,
        "deferred_slots": deferred,
        "open_slots": slots - occupied if slots >= 0 else -1,
        "include_deferred": False,
        "description": description,
    }


#: the task instance listing of one DAG's runs, or every DAG's (``~``)
_LISTED_TASKS = re.compile(r"/api/v2/dags/([^/]+)/dagRuns/~/taskInstances")
#: one pool, by its name
_ONE_POOL = "/api/v2/pools/"
#: what a pool's PATCH body must hold
_WHOLE_POOL = ("name", "slots", "include_deferred")


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass(frozen=True)
class Request:
    """One request the server received."""

    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    authorization: str | None


@dataclass
class FakeAirflowApi:
    """The API server's state; :func:`serve` runs it.

    :param users: who may get a token, user -> password.
    :param task_instances: what ``taskInstances/list`` lists (filtered by task id).
    :param xcoms: what the XCom listing lists (filtered by key prefix).
    :param pools: what ``GET /pools`` lists.
    :param max_page: the server's cap on a page, like ``[api] maximum_page_limit``.
    """

    users: dict[str, str] = field(default_factory=lambda: {"reader": "reader-pw"})
    task_instances: list[dict[str, Any]] = field(default_factory=list)
    xcoms: list[dict[str, Any]] = field(default_factory=list)
    pools: list[dict[str, Any]] = field(default_factory=list)
    #: what ``GET /variables`` lists, key -> value
    variables: dict[str, str] = field(default_factory=dict)
    #: what ``GET /eventLogs`` lists (filtered by event and try number)
    event_logs: list[dict[str, Any]] = field(default_factory=list)
    max_page: int = 1000
    #: what the health check says of the triggerer: healthy, unhealthy, or None (never ran)
    triggerer_status: str | None = "healthy"
    #: tokens a read accepts; :meth:`expire_tokens` empties it
    valid_tokens: set[str] = field(default_factory=set)
    #: when set, no token is ever accepted (a server whose signing key differs)
    refuse_every_token: bool = False
    #: seconds the server's clock (its ``Date`` header) runs ahead of the real one
    clock_shift: float = 0.0
    #: seconds each answer waits before it is sent
    delay: float = 0.0
    #: bytes of padding added to each JSON answer (a field the client ignores)
    padding: int = 0
    #: seconds between the bytes of an answer's body; 0 sends it at once
    dribble: float = 0.0
    #: when set, every answer's body never ends (no Content-Length)
    endless: bool = False
    #: how many of the next answers carry a Date noted ``stale_by`` seconds early
    #: (a server whose event loop was busy, as uvicorn's Date cache can be)
    stale_answers: int = 0
    stale_by: float = 10.0
    #: the next answers, whatever was asked: ``(status, dated)``; a 502 comes in
    #: HAProxy's default shape, without a Date unless ``dated``
    error_answers: list[tuple[int, bool]] = field(default_factory=list)
    #: a ``Retry-After`` header for each error answer, if set
    retry_after: str | None = None
    received: list[Request] = field(default_factory=list)
    _numbers: Iterator[int] = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def issue_token(self) -> str:
        """A token reads accept, as if issued to a user."""
        with self._lock:
            token = f"jwt-{next(self._numbers)}"
            self.valid_tokens.add(token)
        return token

    def expire_tokens(self) -> None:
        """Every token issued so far becomes stale: reads answer 401."""
        with self._lock:
            self.valid_tokens.clear()

    def paths(self) -> list[str]:
        """The paths requested, in order."""
        return [request.path for request in self.received]

    # -- answering ----------------------------------------------------------------------

    def answer(self, request: Request) -> tuple[int, Any]:
        with self._lock:
            self.received.append(request)
        route = (request.method, request.path)
        if route == ("POST", "/auth/token"):
            return self._token(request.body)
        if route == ("GET", "/api/v2/version"):  # public, as in Airflow
            return 200, {"version": VERSION, "git_version": None}
        if route == ("GET", "/api/v2/monitor/health"):  # public too
            component = {"status": "healthy", "latest_scheduler_heartbeat": None}
            return 200, {
                "metadatabase": {"status": "healthy"},
                "scheduler": component,
                "triggerer": {"status": self.triggerer_status, "latest_triggerer_heartbeat": None},
                "dag_processor": {"status": "healthy", "latest_dag_processor_heartbeat": None},
            }
        if route == ("POST", "/api/v2/dags/~/dagRuns/~/taskInstances/list"):
            wanted = set(request.body.get("task_ids") or [])
            pools = set(request.body.get("pool") or [])  # a pool's read names no task
            rows = [
                row
                for row in self.task_instances
                if row["task_id"] in wanted or row["pool"] in pools
            ]
            offset = int(request.body.get("page_offset") or 0)
            limit = int(request.body.get("page_limit") or 100)
            listing = "task_instances"
        elif request.method == "GET" and (dag := _LISTED_TASKS.fullmatch(request.path)):
            rows = self._listed_tries(unquote(dag[1]), request.query)
            offset, limit = self._limits(request.query)
            listing = "task_instances"
        elif request.method == "GET" and request.path.endswith("/taskInstances/~/xcomEntries"):
            rows = self._listed_xcoms(request.query)
            offset, limit = self._limits(request.query)
            listing = "xcom_entries"
        elif request.method in ("GET", "PATCH") and request.path.startswith(_ONE_POOL):
            return self._one_pool(request)
        elif route == ("GET", "/api/v2/variables"):
            pattern = request.query.get("variable_key_pattern", [""])[0]
            rows = [
                {"key": key, "value": value, "description": None, "is_encrypted": False}
                for key, value in sorted(self.variables.items())
                if pattern in key  # a search, as the API's: anywhere in the key
            ]
            offset, limit = self._limits(request.query)
            listing = "variables"
        elif route == ("GET", "/api/v2/eventLogs"):
            event = request.query.get("event", [None])[0]
            tried = request.query.get("try_number", [None])[0]
            rows = [
                row
                for row in self.event_logs
                if row["event"] == event and str(row["try_number"]) == tried
            ]
            offset, limit = self._limits(request.query)
            listing = "event_logs"
        elif route == ("GET", "/api/v2/pools"):
            rows = self.pools
            offset, limit = self._limits(request.query)
            listing = "pools"
        else:
            return 404, {"detail": "Not Found"}
        if not self._authorized(request.authorization):
            return 401, {"detail": "Not authenticated"}
        size = min(limit, self.max_page)
        return 200, {listing: rows[offset : offset + size], "total_entries": len(rows)}

    def _listed_tries(self, dag_id: str, query: dict[str, list[str]]) -> list[dict[str, Any]]:
        """The task instance listing of ``dag_id`` (``~``: every DAG), filtered and ordered
        as the API server does for the filters the reader sends."""
        since = query.get("end_date_gte", [None])[0]
        rows = [
            row
            for row in self.task_instances
            if dag_id in ("~", row["dag_id"])
            and ("pool" not in query or row["pool"] in query["pool"])
            and ("task_id" not in query or row["task_id"] in query["task_id"])
            and row["state"] in query.get("state", [])
            and (not query.get("try_number") or str(row["try_number"]) in query["try_number"])
            and (since is None or (row["end_date"] is not None and _moment(row["end_date"])
                                   >= _moment(since)))
        ]  # fmt: skip
        if query.get("order_by") == ["-end_date"]:
            rows.sort(key=lambda row: _moment(row["end_date"] or stamp(START)), reverse=True)
        return rows

    def _listed_xcoms(self, query: dict[str, list[str]]) -> list[dict[str, Any]]:
        """The XCom listing: by exact key, or by key prefix; newest first when asked."""
        prefix = query.get("xcom_key_prefix_pattern", [""])[0]
        exact = query.get("xcom_key", [None])[0]
        rows = [
            row
            for row in self.xcoms
            if row["key"].startswith(prefix) and exact in (None, row["key"])
        ]
        if query.get("order_by") == ["-timestamp"]:
            rows.sort(key=lambda row: _moment(row["timestamp"]), reverse=True)
        return rows

    def _one_pool(self, request: Request) -> tuple[int, Any]:
        """``GET`` or ``PATCH /api/v2/pools/{name}``: a PATCH sets the fields its
        ``update_mask`` names, from a body that names the pool, and answers the pool."""
        if not self._authorized(request.authorization):
            return 401, {"detail": "Not authenticated"}
        name = unquote(request.path[len(_ONE_POOL) :])
        found = [row for row in self.pools if row["name"] == name]
        if not found:
            return 404, {"detail": f"The Pool with name: `{name}` was not found"}
        (row,) = found
        if request.method == "PATCH":
            if request.body.get("name") != name:
                return 400, {"detail": "pool name from request body doesn't match uri parameter"}
            # the body is checked as a whole pool, whatever the update mask names
            missing = [key for key in _WHOLE_POOL if key not in request.body]
            if missing:
                return 422, {"detail": [{"type": "missing", "loc": ["body", missing[0]]}]}
            for key in request.query.get("update_mask", []):
                row[key] = request.body[key]
            row["open_slots"] = row["slots"] - row["occupied_slots"]
        return 200, row

    def _token(self, body: Any) -> tuple[int, Any]:
        user = body.get("username") if isinstance(body, dict) else None
        if not isinstance(user, str) or self.users.get(user) != body.get("password"):
            return 401, {"detail": "Invalid username or password"}
        return 201, {"access_token": self.issue_token()}

    def _authorized(self, header: str | None) -> bool:
        if not header or not header.startswith("Bearer "):
            return False
        with self._lock:
            return not self.refuse_every_token and header[7:] in self.valid_tokens

    def _limits(self, query: dict[str, list[str]]) -> tuple[int, int]:
        return int(query.get("offset", ["0"])[0]), int(query.get("limit", ["100"])[0])


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as urllib3 expects
    server: _Server

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PATCH(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def date_time_string(self, timestamp: float | None = None) -> str:
        # the Date header, from the server's own (possibly skewed) clock
        api = self.server.api
        shifted = (time.time() if timestamp is None else timestamp) + api.clock_shift
        if api.stale_answers > 0:
            api.stale_answers -= 1
            shifted -= api.stale_by
        return email.utils.formatdate(shifted, usegmt=True)

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        parts = urlsplit(self.path)
        request = Request(
            self.command,
            parts.path,
            parse_qs(parts.query),
            body,
            self.headers.get("Authorization"),
        )
        api = self.server.api
        if api.error_answers:
            with api._lock:
                api.received.append(request)
                status, dated = api.error_answers.pop(0)
            self._send_error_answer(status, dated=dated, retry_after=api.retry_after)
            return
        status, payload = api.answer(request)
        if api.padding and isinstance(payload, dict):
            payload = {**payload, "padding": "x" * api.padding}
        data = json.dumps(payload).encode()
        time.sleep(api.delay)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if api.endless:
            self._send_forever()
            return
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            if not api.dribble:
                self.wfile.write(data)
                return
            for byte in data:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(api.dribble)
        except OSError:  # the reader hung up: what it was sent was enough
            self.close_connection = True

    def _send_error_answer(self, status: int, *, dated: bool, retry_after: str | None) -> None:
        if status == 502:
            answer = bad_gateway(dated=dated)
        else:
            self.send_response(status)  # with a Date, as every answer of the API server
            if retry_after:
                self.send_header("Retry-After", retry_after)
            self.send_header("Content-Length", "0")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            return
        if retry_after:
            answer = answer.replace(
                b"\r\n\r\n", f"\r\nretry-after: {retry_after}\r\n\r\n".encode(), 1
            )
        self.wfile.write(answer)
        self.close_connection = True

    def _send_forever(self) -> None:
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        chunk = b"[" + b" " * 65536
        try:
            while True:
                self.wfile.write(chunk)
        except OSError:  # the reader hung up, as it should
            return


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    api: FakeAirflowApi

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a reader that hangs up early (a refused body, a clock probe) is no error here
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


@dataclass
class Served:
    """A running server: its URL and its state."""

    url: str
    api: FakeAirflowApi

    def connection(self) -> str:
        """An Airflow connection to it, as a deployment's ``AIRFLOW_CONN_...`` holds it."""
        fields = {"conn_type": CONN_TYPE, "host": self.url, "login": "reader",
                  "password": "reader-pw"}  # fmt: skip
        return json.dumps(fields)


def serve(api: FakeAirflowApi, tls: ssl.SSLContext | None = None) -> Iterator[Served]:
    """Serve ``api`` on a free port of 127.0.0.1 until the generator is closed."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.api = api
    scheme = "http"
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield Served(f"{scheme}://127.0.0.1:{server.server_address[1]}", api)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
