"""A real Airflow, started natively: the same services docker-compose.yaml runs.

Used by the demo, the end-to-end tests and the distributed path. Every process
runs in its own process group with its log in ``<home>/service-logs``, and
:meth:`AirflowStack.stop` ends every one it started, by pid.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pendulum
import sqlalchemy

ROOT = Path(__file__).resolve().parent.parent
ADMIN = ("admin", "admin")
POOL = ("positions_db", 2, "Positions database: one heavy or two light extractions at once")
API_CONNECTION = "airflow_api_default"
#: every stack's key, so that a copied metadata DB's encrypted connection still reads
FERNET_KEY = "cmV0cnktd2luZG93LWxvY2FsLWZlcm5ldC1rZXktMDA="
SERVICES = {
    # the REST API, the UI and the plugins' apps; the execution API runs apart (see
    # AirflowStack.start), each on its own port (AirflowStack.service_ports)
    "api-server": ["api-server", "--apps", "core"],
    "execution-api": ["api-server", "--apps", "execution"],
    "scheduler": ["scheduler"],
    "dag-processor": ["dag-processor"],
    "triggerer": ["triggerer"],
    "worker": ["celery", "worker", "--concurrency", "4"],
    # a second Celery worker, for the distributed path's two workers deciding at once
    "worker-2": ["celery", "worker", "--concurrency", "4", "--celery-hostname", "second@%h"],
}


#: the lowest port a service is started on
LOWEST_SERVICE_PORT = 10000
#: the ports this process handed out: a port found free stays free until its service binds
#: it, so two asked for before either is bound (a stack's two API servers) could be one
_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A loopback TCP port nobody listens on right now, below the kernel's ephemeral range.

    The kernel hands ports of that range (32768 to 60999 by default) to every outgoing
    connection, and to a bind to port 0: a port found free there was, on a busy machine,
    taken by a connection in the seconds before the service started on it bound it. That
    API server could not start, and the wait for it was answered by another stack's.
    No port is handed out twice by one process.
    """
    below = _ephemeral_ports().start
    if below - LOWEST_SERVICE_PORT < 1000:  # no room below it: let the kernel choose
        candidates = [0] * 100
    else:
        candidates = random.sample(range(LOWEST_SERVICE_PORT, below), 100)
    for candidate in candidates:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", candidate))
            except OSError:
                continue
            port = int(probe.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port
    raise RuntimeError(f"no free port among 100 tried between {LOWEST_SERVICE_PORT} and {below}")


def _ephemeral_ports() -> range:
    """The ports the kernel chooses from for outgoing connections (Linux's setting)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    except (OSError, ValueError):
        return range(32768, 61000)  # Linux's default
    return range(int(low), int(high) + 1)


#: seconds a stack's DAG processor may take to parse one DAG file
PARSE_LIMIT = 300
#: seconds a stack's scheduler may go without its own heartbeat before it takes itself
#: for dead (Airflow's default: 30)
STALL_ALLOWED = 180
#: seconds a task's supervisor waits for one answer of the execution API (Airflow's: 5)
ANSWER_ALLOWED = 30
#: seconds a writer waits for SQLite's lock (its default: 5): on two loaded cores another
#: service's transaction can hold it for seconds
SQLITE_LOCK_WAIT = 30
#: seconds the tests wait for one answer of the REST API: a write there may first wait out
#: SQLite's lock, so that the server answers (with an error, where the wait ran out) before
#: the test gives up on it
REST_ANSWER_ALLOWED = 3 * SQLITE_LOCK_WAIT
#: lines of each service's log a server error (5xx) of the REST API shows: the API server's
#: traceback, and what the other services did meanwhile
SERVER_ERROR_LOG_LINES = 80
#: Supervisors that heartbeat every 2 s (Airflow's default: 5), far inside a short
#: heartbeat timeout, for the stacks that time a lost worker. Six failed heartbeats in a row
#: (Airflow's default: 3) keep what a supervisor tolerates of an unreachable API server at
#: 10 s, as with Airflow's defaults: with three, the retry-start check had 3 s to read
#: Airflow, and on two loaded cores the API server took longer to tell its clock, so a
#: retry was refused as undecidable (fail closed) where the test expected a decision.
FREQUENT_HEARTBEATS = {
    "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "2",
    "AIRFLOW__WORKERS__MAX_FAILED_HEARTBEATS": "6",
}


def log(message: str) -> None:
    """Progress for the person waiting."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def end_group(process: subprocess.Popen[bytes]) -> None:
    """End a process started in its own process group, and whatever it started.

    :param process: a process started with ``start_new_session=True``.
    """
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@dataclass
class AirflowStack:
    """An Airflow home, its metadata DB and the services running on it.

    :param home: the AIRFLOW_HOME folder (created).
    :param database_url: the metadata DB's SQLAlchemy URL.
    :param dags_folder: the DAG bundle folder the services parse.
    :param executor: ``LocalExecutor`` or ``CeleryExecutor``.
    :param extra_env: more ``AIRFLOW__...`` settings (broker URL, ...).
    :param service_env: per service name, settings for that service alone (its
        workers too, where it starts them), read when it is (re)started.
    """

    home: Path
    database_url: str
    dags_folder: Path = ROOT / "dags"
    executor: str = "LocalExecutor"
    extra_env: dict[str, str] = field(default_factory=dict)
    service_env: dict[str, dict[str, str]] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    execution_port: int = field(default_factory=free_port)
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self.logs = self.home / "service-logs"
        self.logs.mkdir(exist_ok=True)
        passwords = self.home / "passwords.json"
        passwords.write_text(json.dumps({ADMIN[0]: ADMIN[1]}))
        bin_folder = str(Path(sys.executable).parent)
        self.env = {
            **os.environ,
            # services that start their own ``airflow`` processes look it up on PATH
            "PATH": os.pathsep.join([bin_folder, os.environ.get("PATH", "")]),
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.database_url,
            "AIRFLOW__CORE__EXECUTOR": self.executor,
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__PARALLELISM": "8",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN[0]}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.execution_url}/execution/",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__BASE_URL": self.url,
            "AIRFLOW__API_AUTH__JWT_SECRET": "retry-window-local-secret",
            "AIRFLOW__CORE__FERNET_KEY": FERNET_KEY,
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            # a DAG file is parsed when it is new or changed (every 5 s the DAG processor
            # looks), not again every 30 s (Airflow's default): the example's folder parsed
            # that often took 2.5 CPU s a minute of an idle DAG processor, 0.5 without
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "600",
            # a DAG file's parse, a process that imports Airflow and the provider, took
            # over 50 s (Airflow's limit) when five stacks booted at once on two busy
            # cores: it was killed and the DAG never came. Allow minutes.
            "AIRFLOW__DAG_PROCESSOR__DAG_FILE_PROCESSOR_TIMEOUT": str(PARSE_LIMIT),
            "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": str(PARSE_LIMIT - 30),
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
            # a scheduler whose own heartbeat is older than this takes itself for dead
            # and resets its running tries (Airflow's orphan adoption): on two busy cores
            # its SQLite writes once stalled 30 s, Airflow's default, and a try that
            # succeeded was reset and decided as an unknown outcome
            "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD": str(STALL_ALLOWED),
            "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT": "300",
            # a task's supervisor waits this long for each answer of the execution API
            # (Airflow's default: 5 s): on a starved machine the API server took longer to
            # answer a try's start, and the supervisor killed a try that had not begun
            "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": str(ANSWER_ALLOWED),
            "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "1",
            **self.extra_env,
        }
        self.engine = sqlalchemy.create_engine(self.database_url)

    @property
    def url(self) -> str:
        """The API server's base URL: the REST API, the UI and the plugins' apps."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def execution_url(self) -> str:
        """The base URL of the API server that serves the execution API to tasks."""
        return f"http://127.0.0.1:{self.execution_port}"

    @property
    def service_ports(self) -> dict[str, int]:
        """The port each API server listens on, by service name."""
        return {"api-server": self.port, "execution-api": self.execution_port}

    def airflow(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run the ``airflow`` command line against this home."""
        binary = Path(sys.executable).with_name("airflow")
        done = subprocess.run(
            [str(binary), *args], env=self.env, capture_output=True, text=True, check=False
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"airflow {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
        return done

    def prepare(self) -> None:
        """Migrate the DB; create the pool and the connection the gate reads the API with.

        One command line call: each boots Airflow, seconds of a core, so the pool and the
        connection are written with SQL after the migration, as ``airflow pools set`` and
        ``airflow connections add`` would (the local admin password kept unencrypted).
        """
        log(f"migrating the metadata DB ({self.database_url.split('://')[0]})")
        self.airflow("db", "migrate")
        if self.database_url.startswith("sqlite"):
            self.write_ahead()
        name, slots, description = POOL
        with self.engine.begin() as db:
            db.execute(sqlalchemy.text("delete from slot_pool where pool=:p"), {"p": name})
            db.execute(
                sqlalchemy.text(
                    "insert into slot_pool (pool, slots, description, include_deferred) "
                    "values (:p, :s, :d, :deferred)"
                ),
                {"p": name, "s": slots, "d": description, "deferred": True},
            )
            db.execute(
                sqlalchemy.text("delete from connection where conn_id=:c"), {"c": API_CONNECTION}
            )
            db.execute(
                sqlalchemy.text(
                    "insert into connection (conn_id, conn_type, host, login, password, "
                    "is_encrypted, is_extra_encrypted) values (:c, 'http', :h, :l, :pw, :no, :no)"
                ),
                {"c": API_CONNECTION, "h": self.url, "l": ADMIN[0], "pw": ADMIN[1], "no": False},
            )

    def write_ahead(self) -> None:
        """Switch a SQLite DB to write-ahead logging; the file keeps it, and so do copies.

        In SQLite's default mode a reader's lock keeps a writer from committing. With a
        scheduler, a DAG processor, a triggerer and an API server serving several tasks'
        reads at once, two such waits met: every service stalled for the 30 s lock
        timeout, the scheduler then took its own tasks for orphans and reset them. With
        write-ahead logging, reads never wait for a write, nor a write for reads.
        """
        with self.engine.connect() as db:
            mode = db.exec_driver_sql("PRAGMA journal_mode=WAL").scalar()
        if str(mode).lower() != "wal":
            raise RuntimeError(f"SQLite kept journal_mode={mode!r} for {self.database_url}")

    def prepare_from(self, template: Path) -> None:
        """Start from a copy of a prepared SQLite DB, its API connection pointed at this stack.

        :param template: the ``airflow.db`` of a stack that ran :meth:`prepare`.
        """
        shutil.copyfile(template, self.home / "airflow.db")
        with self.engine.begin() as db:
            db.execute(
                sqlalchemy.text("update connection set host=:host where conn_id=:conn_id"),
                {"host": self.url, "conn_id": API_CONNECTION},
            )

    def start(self, *names: str) -> None:
        """Start services in the background, each in its own process group.

        ``api-server`` starts two API servers, one for the REST API and one for the
        execution API, as a deployment may. On SQLite, one server serving both can stand
        still: the REST API logs a write (an audit log row) with a commit on its event
        loop, which then waits for SQLite's lock. When an execution API request held it,
        its own commit waited for that loop: in CI the whole stack stood still for the
        lock timeout (30 s), and the REST request failed with 500. Apart, the lock passes
        from one process to the other as it should.

        They go first and are waited for: a scheduler that queues a task before the
        execution API answers sees the task fail.
        """
        if "api-server" in names:
            self._launch("execution-api")
            self._launch("api-server")
            self.wait_for(self.api_ready, "the API servers", timeout=120)
        for name in names:
            if name != "api-server":
                self._launch(name)

    def _launch(self, name: str) -> None:
        binary = Path(sys.executable).with_name("airflow")
        out = (self.logs / f"{name}.log").open("ab")
        self.processes[name] = subprocess.Popen(
            [str(binary), *SERVICES[name], *self._port_arguments(name)],
            env={**self.env, **self.service_env.get(name, {})},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log(f"started {name} (pid {self.processes[name].pid})")

    def _port_arguments(self, name: str) -> list[str]:
        port = self.service_ports.get(name)
        return [] if port is None else ["--port", str(port)]

    def restart(self, name: str) -> None:
        """Stop one service and start it again."""
        self._stop_one(name)
        self.start(name)

    def stop(self) -> None:
        """Stop every service this stack started."""
        for name in list(self.processes):
            self._stop_one(name)
        self.engine.dispose()

    def _stop_one(self, name: str) -> None:
        process = self.processes.pop(name)
        end_group(process)
        log(f"stopped {name} (pid {process.pid})")

    def api_ready(self) -> bool:
        """``True`` once both API servers answer."""
        healths = (f"{self.url}/api/v2/monitor/health", f"{self.execution_url}/execution/health")
        for health in healths:
            try:
                with urllib.request.urlopen(health, timeout=2):
                    pass
            except (urllib.error.URLError, OSError):
                return False
        return True

    def wait_for(self, ready: Callable[[], bool], what: str, *, timeout: float) -> None:
        """Poll ``ready`` until it holds; fail with the service logs' tails."""
        deadline = time.monotonic() + timeout
        while not ready():
            dead = [n for n, p in self.processes.items() if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise RuntimeError(f"waiting for {what} failed (dead: {dead})\n{self.log_tails()}")
            time.sleep(1)

    def log_tails(self, lines: int = 15) -> str:
        """The last lines of every service log, for failure messages."""
        parts = []
        for path in sorted(self.logs.glob("*.log")):
            tail = path.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {path} ---\n" + "\n".join(tail))
        return "\n".join(parts)

    def rows(self, sql: str, **params: Any) -> list[Any]:
        """Rows from the metadata DB."""
        with self.engine.connect() as db:
            return list(db.execute(sqlalchemy.text(sql), params))

    def wait_for_dag(
        self, dag_id: str, timeout: float = PARSE_LIMIT + 60, *, folder: str = ""
    ) -> None:
        """Wait until the DAG processor has parsed and stored the DAG.

        :param folder: where in the DAG folder an import error fails the wait (``name/``);
            by default anywhere.
        """

        def parsed() -> bool:
            errors = self.rows(
                "select filename, stacktrace from import_error where filename like :f",
                f=f"{folder}%",
            )
            if errors:
                raise RuntimeError(
                    f"the DAG processor could not import {errors[0][0]}:\n{errors[0][1]}"
                )
            return bool(self.rows("select 1 from serialized_dag where dag_id=:d", d=dag_id))

        self.wait_for(parsed, f"the DAG {dag_id} to be parsed", timeout=timeout)

    def trigger(self, dag_id: str, *, conf: dict[str, Any], logical_date: str) -> str:
        """Trigger a run of an unscheduled DAG through the REST API; return its run id.

        The run is what ``airflow dags trigger`` makes of a DAG without a schedule: its
        data interval is the moment of the trigger, whatever the logical date (the REST
        API alone would derive it from the logical date). The command line is not used
        because each call boots Airflow, about 3 s of a core on a loaded 2-core machine.

        :param logical_date: a date or a date and time; a date is midnight UTC.
        """
        run_id = f"manual__{logical_date}"
        when = pendulum.parse(logical_date, tz="UTC")
        if not isinstance(when, pendulum.DateTime):
            raise ValueError(f"logical_date {logical_date!r} is not a date or a date and time")
        now = pendulum.now("UTC").isoformat()
        self.api(
            "POST",
            f"/api/v2/dags/{dag_id}/dagRuns",
            {"dag_run_id": run_id, "logical_date": when.isoformat(), "conf": conf,
             "run_after": now, "data_interval_start": now, "data_interval_end": now},
        )  # fmt: skip
        return run_id

    def api(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """Call the REST API as the admin user."""
        token = self._request("POST", "/auth/token", {"username": ADMIN[0], "password": ADMIN[1]})
        return self._request(method, path, body, token=token["access_token"])

    def _request(
        self, method: str, path: str, body: dict[str, Any] | None, token: str | None = None
    ) -> Any:
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data, headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=REST_ANSWER_ALLOWED) as answer:
                return json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as error:
            if error.code < 500:
                raise  # an answer some tests expect (403, 404, 409)
            # the server's own log holds the cause (its traceback), which the answer does not
            raise RuntimeError(
                f"{method} {path} answered {error.code} {error.read()[:500]!r}\n"
                f"{self.log_tails(lines=SERVER_ERROR_LOG_LINES)}"
            ) from error

    def clear(
        self, dag_id: str, run_id: str, task_ids: list[str], *, upstream: bool = False
    ) -> None:
        """Clear task instances the way the UI does: a person asking for a re-run.

        :param upstream: clear every task upstream of them too ("with Upstream").
        """
        self.api(
            "POST",
            f"/api/v2/dags/{dag_id}/clearTaskInstances",
            {"dry_run": False, "dag_run_id": run_id, "task_ids": task_ids,
             "include_upstream": upstream, "only_failed": False, "reset_dag_runs": True},
        )  # fmt: skip

    def wait_for_clear(self, dag_id: str, run_id: str, *, cleared: int, timeout: float) -> str:
        """Wait until the run has ended after its ``cleared``-th clear; return its state."""

        def ended() -> bool:
            rows = self.rows(
                "select 1 from dag_run where dag_id=:d and run_id=:r and clear_number>=:c "
                "and state in ('success', 'failed')",
                d=dag_id,
                r=run_id,
                c=cleared,
            )
            return bool(rows)

        self.wait_for(ended, f"run {run_id} to end after clear {cleared}", timeout=timeout)
        return str(self.run_state(dag_id, run_id))

    def run_state(self, dag_id: str, run_id: str) -> str | None:
        """The state of a DAG run."""
        found = self.rows(
            "select state from dag_run where dag_id=:d and run_id=:r", d=dag_id, r=run_id
        )
        return str(found[0][0]) if found else None

    def task_states(self, dag_id: str, run_id: str) -> dict[str, tuple[str | None, int]]:
        """task id -> (state, try number) of a run."""
        found = self.rows(
            "select task_id, state, try_number from task_instance where dag_id=:d and run_id=:r",
            d=dag_id,
            r=run_id,
        )
        return {task: (state, int(tries)) for task, state, tries in found}

    def wait_for_run(
        self, dag_id: str, run_id: str, *, timeout: float, quiet: Iterable[str] = ()
    ) -> str:
        """Wait for the run to end, printing task states as they change."""
        deadline, seen = time.monotonic() + timeout, {}
        while True:
            states = self.task_states(dag_id, run_id)
            for task, (state, tries) in sorted(states.items()):
                if seen.get(task) != (state, tries) and task not in quiet:
                    log(f"  {task:<22} {state or 'none':<16} try {tries}")
            seen = dict(states)
            state = self.run_state(dag_id, run_id)
            if state in ("success", "failed"):
                return state
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"run {run_id} still {state} after {timeout} s\n{self.log_tails()}"
                )
            time.sleep(1)


@contextmanager
def sqlite_stack(
    home: Path,
    services: Sequence[str],
    dag_ids: Sequence[str],
    *,
    dags_folder: Path = ROOT / "dags",
    extra_env: dict[str, str] | None = None,
) -> Iterator[AirflowStack]:
    """A stack on a SQLite DB in ``home``, its services up and its DAGs parsed; stopped after.

    :param home: the AIRFLOW_HOME folder.
    :param services: the services to start (names of ``SERVICES``).
    :param dag_ids: the DAGs to wait for before the stack is handed out.
    :param dags_folder: the DAG bundle folder the services parse.
    :param extra_env: more ``AIRFLOW__...`` settings for every service.
    """
    stack = AirflowStack(
        home=home,
        database_url=f"sqlite:///{home}/airflow.db?timeout={SQLITE_LOCK_WAIT}",
        dags_folder=dags_folder,
        extra_env=dict(extra_env or {}),
    )
    stack.prepare_from(prepared_sqlite_db())
    try:
        stack.start(*services)
        for dag_id in dag_ids:
            stack.wait_for_dag(dag_id)
        yield stack
    finally:
        stack.stop()


#: the prepared SQLite DB of this process, once found or made: migrating costs about 5 s of
#: a core, copying the file a few milliseconds
_PREPARED: list[Path] = []
#: a folder the processes of one test run share their prepared DB in (tests/conftest.py)
PREPARED_FOLDER_ENV = "RW_PREPARED_DB_FOLDER"


def prepared_sqlite_db() -> Path:
    """A migrated SQLite metadata DB with the pool and the API connection, made once.

    Once per process; or, where ``RW_PREPARED_DB_FOLDER`` names a folder, once for every
    process that names it (a test run's workers): they take turns with a file lock, and
    the first makes it.
    """
    if not _PREPARED:
        shared = os.environ.get(PREPARED_FOLDER_ENV)
        folder = Path(shared or tempfile.mkdtemp(prefix="retrywindow-prepared-"))
        folder.mkdir(parents=True, exist_ok=True)
        template = folder / "airflow.db"
        with (folder / "lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not template.exists():
                _prepare_template(folder / "home", template)
        _PREPARED.append(template)
    return _PREPARED[0]


def _prepare_template(home: Path, template: Path) -> None:
    """Prepare a stack's DB in ``home``, then move it to ``template`` whole (a process that
    died halfway leaves no template behind)."""
    stack = AirflowStack(home=home, database_url=f"sqlite:///{home}/airflow.db")
    stack.prepare()
    # every write in the file itself, none left in the write-ahead log a copy misses
    with stack.engine.connect() as db:
        db.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    stack.engine.dispose()
    os.replace(home / "airflow.db", template)
