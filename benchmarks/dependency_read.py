"""What the dependency check costs a retry's start: the pool's read, its state and the admission.

Run from the work tree:
``python benchmarks/dependency_read.py [--task-instances 1000] [--rounds 40]``.

A local HTTP server of this benchmark's own stands in for Airflow's REST API: it
holds 1,000 task instances of one pool, all in the dependency's window, and the
failure classes the retry policy pushed as XCom keys, each row encoded once as the
API server shapes it (``tests/hooks/fake_api.py``), so an answer is filtered and
sent at once. The retry-start check's own read
(:func:`airflow_retrywindow.dependency.check._read`: the connection, the pool's
waiting and live task instances, its tries ended in the window, the failure XCom
keys, the forced state's Variable and :meth:`Fleet.state`) then runs in this
process, as a worker runs it, followed by
:func:`~airflow_retrywindow.dependency.admission.admit` for one held retry of the
pool. Each decision builds its own reader, as each try start does.

Cases: the pool ``open`` (an outage: 800 task instances waiting or in a retry, 200
ended, a retry held for the first time, and one held six times whose next probe
round is looked for an hour ahead), ``recovering`` (successes after the latest
failure) and ``closed``.

Targets (one PASS/FAIL line each; the exit status is 1 if any fails):

- the read makes at most 3 requests in every state, with ``dependency_pools`` naming the
  pool (the check never lists the pools: the view says a name that is no pool), counted
  by the reader (``AirflowApi.requests``) and by the server alike, with a connection that holds an
  access token; with login and password, one more (the token) is printed;
- one decision, read, state and admission, takes under 50 ms (median), the
  server's own time excluded (it is measured per request and subtracted; printed).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs, urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the REST rows' shapes, from the tests' imitation of the API

from airflow_retrywindow.records import evidence  # noqa: E402
from tests.hooks.fake_api import pool as pool_row  # noqa: E402
from tests.hooks.fake_api import stamp, task_instance, xcom_entry  # noqa: E402

POOL = "positions_api"
TOKEN = "bench-token"
USER, PASSWORD = "reader", "reader-pw"
REQUEST_TARGET = 3
DECISION_TARGET_MS = 50.0
#: the API server's default ``[api] maximum_page_limit``: a GET listing's page at most
SERVER_PAGE_CAP = 100
#: the slice of the pool's task instances in each state, per thousand (an outage)
OUTAGE = (
    ("up_for_reschedule", 2, 500),  # held retries
    ("up_for_retry", 1, 150),  # first tries failed, their retries not started
    ("running", 1, 100),  # first tries of new runs
    ("queued", 1, 50),
    ("failed", 3, 150),  # out of attempts, their failure classed retryable
    ("success", 1, 50),  # before the outage
)


# -- the pool, as the REST API lists it ------------------------------------------------


def pool_rows(
    count: int, now: datetime, *, recovered: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``count`` task instances of the pool in the window, and the failure XCom keys.

    :param recovered: successes that ended after the latest failure (the pool recovers).
    """
    rows: list[dict[str, Any]] = []
    keys: list[dict[str, Any]] = []
    slices = [(state, tried, share * count // 1000) for state, tried, share in OUTAGE]
    slices[0] = (slices[0][0], slices[0][1], slices[0][2] + count - sum(s[2] for s in slices))
    for state, tried, many in slices:
        for number in range(many):
            started = now - timedelta(seconds=200 - (number % 150))
            ended = started + timedelta(seconds=3)
            if state == "success":  # before the first failure
                started, ended = now - timedelta(seconds=250), now - timedelta(seconds=240)
            row = task_instance(
                f"load_{number % 40:02d}",
                dag_id=f"positions_{state}",
                run_id=f"scheduled__{number // 40:04d}",
                try_number=tried,
            )
            row.update(
                state=state,
                pool=POOL,
                max_tries=3,
                start_date=stamp(started),
                end_date=stamp(ended) if state in ("up_for_retry", "failed", "success") else None,
            )
            rows.append(row)
            if state == "failed":
                key = xcom_entry(
                    row["task_id"],
                    evidence.failure_key(evidence.RETRYABLE),
                    dag_id=row["dag_id"],
                    run_id=row["dag_run_id"],
                )
                key["timestamp"] = stamp(ended)
                keys.append(key)
    for row in rows[-recovered:] if recovered else []:  # the newest successes end now
        row.update(state="success", start_date=stamp(now - timedelta(seconds=2)))
        row["end_date"] = stamp(now - timedelta(seconds=1))
    return rows, keys


@dataclass
class PoolApi:
    """What the server holds, each row encoded once, and what it was asked.

    :param rows: the pool's task instances, as ``TaskInstanceResponse`` objects.
    :param keys: the failure XCom keys, as ``XComResponse`` objects.
    """

    rows: list[dict[str, Any]]
    keys: list[dict[str, Any]]
    encoded: list[bytes] = field(init=False)
    encoded_keys: list[bytes] = field(init=False)
    paths: list[str] = field(default_factory=list)
    #: seconds the server spent on each answer, from its request read to its last byte
    served: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.encoded = [json.dumps(row).encode() for row in self.rows]
        self.encoded_keys = [json.dumps(key).encode() for key in self.keys]

    def answer(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> bytes:
        """The answer's JSON body; ``b""`` for a route the pool's read never takes."""
        if (method, path) == ("POST", "/auth/token"):
            return json.dumps({"access_token": TOKEN}).encode()
        if (method, path) == ("POST", "/api/v2/dags/~/dagRuns/~/taskInstances/list"):
            return self._task_instances(body)
        if method == "GET" and path == "/api/v2/dags/~/dagRuns/~/taskInstances/~/xcomEntries":
            prefix = query.get("xcom_key_prefix_pattern", [""])[0]
            limit = min(int(query.get("limit", ["100"])[0]), SERVER_PAGE_CAP)
            # the newest first, as the read asks (order_by=-timestamp)
            wanted = sorted(
                (i for i, key in enumerate(self.keys) if key["key"].startswith(prefix)),
                key=lambda i: self.keys[i]["timestamp"],
                reverse=True,
            )
            return _listing(
                "xcom_entries", [self.encoded_keys[i] for i in wanted[:limit]], len(wanted)
            )
        if (method, path) == ("GET", "/api/v2/pools"):
            row = pool_row(POOL, 64, occupied=40)
            return _listing("pools", [json.dumps(row).encode()], 1)
        return b""

    def _task_instances(self, body: dict[str, Any]) -> bytes:
        """The batch listing, filtered by pool, state and end date as the API server does."""
        pools = set(body.get("pool") or [])
        states = set(body.get("state") or [])
        since = body.get("end_date_gte")
        since_at = datetime.fromisoformat(since.replace("Z", "+00:00")) if since else None
        offset = int(body.get("page_offset") or 0)
        limit = int(body.get("page_limit") or 100)
        wanted = [
            i
            for i, row in enumerate(self.rows)
            if (not pools or row["pool"] in pools)
            and (not states or row["state"] in states)
            and (
                since_at is None
                or (
                    row["end_date"] is not None
                    and datetime.fromisoformat(row["end_date"].replace("Z", "+00:00")) >= since_at
                )
            )
        ]
        page = [self.encoded[i] for i in wanted[offset : offset + limit]]
        return _listing("task_instances", page, len(wanted))


def _listing(name: str, rows: list[bytes], total: int) -> bytes:
    return b'{"%s": [%s], "total_entries": %d}' % (name.encode(), b", ".join(rows), total)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as urllib3 expects
    # TCP_NODELAY, as Airflow's API server (uvicorn) sets it: otherwise an answer's
    # body, written after its headers, waits for the reader's delayed ACK (about 40 ms
    # on Linux), a wait of this server's that would be counted as the decision's
    disable_nagle_algorithm = True
    server: _Server

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _serve(self) -> None:
        began = time.perf_counter()
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        api = self.server.api
        data = api.answer(
            self.command, parts.path, parse_qs(parts.query), json.loads(raw or "null")
        )
        authorized = parts.path == "/auth/token" or (
            self.headers.get("Authorization") == f"Bearer {TOKEN}"
        )
        status = 200 if data and authorized else (401 if data else 404)
        if status != 200:
            data = b'{"detail": "refused"}'
        self.send_response(201 if parts.path == "/auth/token" and status == 200 else status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
        with api.lock:
            api.paths.append(parts.path)
            api.served.append(time.perf_counter() - began)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    api: PoolApi


@contextmanager
def serving(api: PoolApi) -> Iterator[str]:
    """Serve ``api`` on a free port of 127.0.0.1; yields its base URL."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.api = api
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# -- one decision ----------------------------------------------------------------------


def connect(url: str, *, token: bool) -> None:
    """The provider's default connection to the server: an access token, or login and password."""
    conn: dict[str, Any] = {"conn_type": "http", "host": url}
    if token:
        conn["extra"] = json.dumps({"access_token": TOKEN})
    else:
        conn.update(login=USER, password=PASSWORD)
    os.environ["AIRFLOW_CONN_AIRFLOW_API_DEFAULT"] = json.dumps(conn)


class ReaderCounter:
    """Keeps each reader the check builds, to read its request count afterwards."""

    def __init__(self) -> None:
        from airflow_retrywindow.hooks.airflow_api import AirflowApiHook

        self.readers: list[Any] = []
        original = AirflowApiHook.get_conn

        def get_conn(hook: AirflowApiHook) -> Any:
            reader = original(hook)
            self.readers.append(reader)
            return reader

        AirflowApiHook.get_conn = get_conn  # type: ignore[method-assign, assignment]

    def last(self) -> int:
        return int(self.readers[-1].requests)


@dataclass(frozen=True)
class Decision:
    """One measured decision."""

    state: str
    action: str
    requests: int
    server_saw: int
    wall_ms: float
    server_ms: float
    #: this thread's CPU time: what the decision itself computed, whatever else ran
    cpu_ms: float
    #: the admission alone
    admit_ms: float


def decide(api: PoolApi, counter: ReaderCounter, *, holds: int) -> Decision:
    """One retry-start decision for a held retry of the pool: ``_read``, then ``admit``."""
    import pendulum

    from airflow_retrywindow import configuration
    from airflow_retrywindow.dependency.admission import Retry, admit
    from airflow_retrywindow.dependency.check import _read

    held = api.rows[0]  # a held retry while the pool fails (the rows start with them)
    ti = SimpleNamespace(
        dag_id=held["dag_id"], run_id=held["dag_run_id"], task_id=held["task_id"], map_index=-1
    )
    retry = Retry(
        key=(ti.dag_id, ti.run_id, ti.task_id, -1),
        try_number=2,
        attempts_left=3,
        backoff_seconds=60,
        latest_start=pendulum.now("UTC").add(hours=6),
        holds=holds,
    )
    pools = configuration.pool_settings()
    settings = pools.of(POOL)
    assert settings is not None
    with api.lock:
        seen, served = len(api.paths), len(api.served)
    began, cpu = time.perf_counter(), time.thread_time()
    state, released = _read(POOL, settings, ti)
    admitted = time.perf_counter()
    admission = admit(state, retry, settings, released)
    admit_s = time.perf_counter() - admitted
    wall, cpu = time.perf_counter() - began, time.thread_time() - cpu
    time.sleep(0.002)  # the server notes its last answer after the reader has it
    with api.lock:
        server_saw = len(api.paths) - seen
        server_time = sum(api.served[served:])
    return Decision(
        state.state,
        admission.action,
        counter.last(),
        server_saw,
        wall * 1000,
        server_time * 1000,
        cpu * 1000,
        admit_s * 1000,
    )


def measure(
    name: str, api: PoolApi, counter: ReaderCounter, rounds: int, *, holds: int = 0
) -> list[Decision]:
    """``rounds`` decisions after two to warm up (imports, the connection's first read)."""
    for _ in range(2):
        decide(api, counter, holds=holds)
    found = [decide(api, counter, holds=holds) for _ in range(rounds)]

    def median(of: Callable[[Decision], float]) -> float:
        return statistics.median(of(d) for d in found)

    first = found[0]
    print(
        f"{name:<31} {first.state:<10} {first.action:<7} {first.requests:>4} "
        f"{first.server_saw:>6} {median(lambda d: d.wall_ms):>8.1f} "
        f"{median(lambda d: d.server_ms):>7.1f} {median(lambda d: d.wall_ms - d.server_ms):>7.1f} "
        f"{min(d.wall_ms - d.server_ms for d in found):>7.1f} {median(lambda d: d.cpu_ms):>7.1f} "
        f"{median(lambda d: d.admit_ms):>7.1f}"
    )
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task-instances", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=40)
    options = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="rw-dependency-bench-"))
    os.environ.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
            # a deployment that tunes its pools by name: naming them costs no request
            "AIRFLOW__RETRY_WINDOW__DEPENDENCY_POOLS": json.dumps({POOL: {"round": 60}}),
        }
    )
    logging.disable(logging.WARNING)  # the check's log lines are not what is measured
    counter = ReaderCounter()
    count = options.task_instances
    # name, successes after the latest failure, holds of the retry decided
    cases = [
        ("open, first hold", 0, 0),
        ("open, held 6 times (1 h ahead)", 0, 6),
        ("recovering", 5, 0),
    ]
    print(f"{count} task instances of pool {POOL} in the window; {options.rounds} decisions each")
    print(
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (wall times grow with it)"
    )
    print()
    print("medians, in ms: wall = the decision; server = the server's time on its answers;")
    print("own = wall - server (own min: the least of the decisions);")
    print("cpu = this thread's CPU time; admit = the admission alone")
    print()
    print(f"{'case':<31} {'state':<10} {'action':<7} {'reqs':>4} {'server':>6} {'wall':>8} "
          f"{'server':>7} {'own':>7} {'own min':>7} {'cpu':>7} {'admit':>7}")  # fmt: skip
    results: dict[str, list[Decision]] = {}
    for name, recovered, holds in cases:
        rows, keys = pool_rows(count, datetime.now(timezone.utc), recovered=recovered)
        api = PoolApi(rows, keys)
        with serving(api) as url:
            connect(url, token=True)
            results[name] = measure(name, api, counter, options.rounds, holds=holds)
    # nothing failing: the outage's task instances as first tries and successes instead
    closed, _ = pool_rows(count, datetime.now(timezone.utc), recovered=0)
    for row in closed:
        if row["state"] == "failed":
            row.update(state="success", try_number=1)
        elif row["state"] != "success":
            row.update(state="running", try_number=1, end_date=None)
    api = PoolApi(closed, [])
    with serving(api) as url:
        connect(url, token=True)
        results["closed"] = measure("closed", api, counter, options.rounds)
        connect(url, token=False)
        with_login = decide(api, counter, holds=0)
    print()
    print(
        f"with login and password instead of an access token: {with_login.requests} requests "
        f"(the token's included), {with_login.server_saw} seen by the server"
    )
    print()
    checks = []
    expected = {name: name.split(",")[0] for name in results}
    for name, found in results.items():
        states = {d.state for d in found}
        checks.append((states == {expected[name]}, f"{name}: the read finds the pool {states}"))
        limit = REQUEST_TARGET
        requests = {d.requests for d in found} | {d.server_saw for d in found}
        own = statistics.median(d.wall_ms - d.server_ms for d in found)
        checks.append(
            (
                max(requests) <= limit,
                f"{name}: {max(requests)} requests per decision (target at most {limit})",
            )
        )
        checks.append(
            (
                own < DECISION_TARGET_MS,
                f"{name}: one decision takes {own:.1f} ms, the server's "
                f"{statistics.median(d.server_ms for d in found):.1f} ms excluded "
                f"(target < {DECISION_TARGET_MS:.0f} ms)",
            )
        )
    for passed, text in checks:
        print(f"{'PASS' if passed else 'FAIL'}  {text}")
    return 0 if all(passed for passed, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
