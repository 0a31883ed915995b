"""Run the gate's test DAGs with ``airflow dags test`` and read the results from the DB."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pendulum

from tests.gate.frozen_server_clock import server_on
from tests.gate.run_clock import RunClock

DAGS = Path(__file__).with_name("dags")
#: the repository, on a DAG run's import path: its process imports tests.gate.run_clock
ROOT = Path(__file__).resolve().parents[2]
#: the longest a test DAG's run may take: its process is then ended
RUN_LIMIT = 300

#: installed as ``sitecustomize`` in an audited process: logs every socket it opens
AUDIT_HOOK = textwrap.dedent(
    """
    import os
    import sys

    _PATH = os.environ["RW_SOCKET_AUDIT"]

    def _audit(event, args):
        if event in ("socket.connect", "socket.getaddrinfo"):
            target = args[1] if event == "socket.connect" else args[:2]
            with open(_PATH, "a") as out:
                out.write(f"{event} {target!r}\\n")

    sys.addaudithook(_audit)
    """
)


#: ``airflow dags test DAG_ID``, run as ``python -c DAGS_TEST dags test DAG_ID``, with the
#: in-process execution API built once, as Airflow 3.3 builds it. Before 3.3, ``dags test``
#: builds it again for every task it runs (cadwyn generates its versioned routes, about
#: 3 s of a core each): on 3.2 that was 55 of the 70 CPU s of the gate's table DAG, and
#: most of the sensor DAG's. Airflow 3.3 wraps ``in_process_api_server`` in
#: ``functools.lru_cache``; this does the same where it is not. Nothing else changes: each
#: task still gets its DAG bag and client. A run given a clock (``tests/gate/run_clock.py``)
#: follows it from the start.
DAGS_TEST = textwrap.dedent(
    """
    import functools
    import sys

    from tests.gate import run_clock

    run_clock.follow()  # the test's clock, when it gives the run one

    from airflow.sdk.execution_time import supervisor

    if not hasattr(supervisor.in_process_api_server, "cache_info"):
        supervisor.in_process_api_server = functools.lru_cache(maxsize=1)(
            supervisor.in_process_api_server
        )

    from airflow.__main__ import main

    sys.exit(main())
    """
)


@dataclass(frozen=True)
class ApiServer:
    """A running API server, the viewer allowed to read it, and a user allowed to edit
    its pools (login, password)."""

    url: str
    login: str
    password: str
    operator: tuple[str, str] = ("", "")

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def connection(self) -> str:
        """The ``airflow_api_default`` connection, as an ``AIRFLOW_CONN_...`` value."""
        return json.dumps(
            {"conn_type": "http", "host": self.url, "login": self.login, "password": self.password}
        )


@contextmanager
def on_run_clock(server: ApiServer, folder: Path) -> Iterator[tuple[RunClock, ApiServer]]:
    """A clock for a DAG run (its environment: :meth:`RunClock.env`), and ``server`` as the
    run reads it: behind a proxy whose ``Date`` tells the run's time.

    :param folder: where the clock's file is kept.
    """
    clock = RunClock.started(folder / "run-clock")
    with server_on(server.url, clock) as url:
        yield clock, replace(server, url=url)


#: a sensor's line that says until when it waits: ISO 8601 when it defers or sleeps,
#: pendulum's own form ("2026-12-07 02:29:36+00:00") when it pokes or reschedules
WAITS_UNTIL = re.compile(
    r"(?:deferring until|waiting here until|poking again at) "
    r"(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d))"
)
#: how often a rescheduled sensor's reschedule is looked for
WATCH_EVERY = 0.02


class WaitsEnd:
    """Sets a DAG run's stopped clock running from the end of a wait the run announced, so
    the wait is over when the sensor looks again: a sensor's line that says until when it
    waits (it defers, or sleeps in the worker), or, for a sensor in ``reschedule`` mode,
    its reschedule once recorded (the record's time is the clock's, so it comes first).

    :param clock: the run's clock.
    :param dag_id: the run's DAG.
    :param rescheduled: the task ids of the DAG's sensors in ``reschedule`` mode.
    """

    def __init__(self, clock: RunClock, dag_id: str, rescheduled: Collection[str]) -> None:
        self.clock, self.dag_id, self.rescheduled = clock, dag_id, frozenset(rescheduled)
        self.ended = threading.Event()
        threading.Thread(target=self._watch, name="reschedules", daemon=True).start()

    def line(self, line: str) -> None:
        """Act on one line of the run's output."""
        found = WAITS_UNTIL.search(line)
        if found and self.clock.stopped() and not self._rescheduling():
            self._run_from(pendulum.parse(found.group(1).replace(" ", "T"), tz="UTC"))

    def _rescheduling(self) -> bool:
        running = query(
            "select task_id from task_instance where dag_id=? and state='running'", self.dag_id
        )
        return any(task_id in self.rescheduled for (task_id,) in running)

    def _watch(self) -> None:
        while not self.ended.wait(WATCH_EVERY):
            if not self.clock.stopped():
                continue
            try:
                rows = query(
                    "select max(r.reschedule_date) from task_reschedule r join task_instance t "
                    "on r.ti_id = t.id where t.dag_id=? and t.state='up_for_reschedule'",
                    self.dag_id,
                )
            except sqlite3.OperationalError:  # the run holds the DB's lock: look again
                continue
            if rows and rows[0][0]:
                self._run_from(pendulum.parse(str(rows[0][0]), tz="UTC"))

    def _run_from(self, until: object) -> None:
        assert isinstance(until, pendulum.DateTime), until
        self.clock.run_from(max(until, pendulum.from_timestamp(self.clock.now(), tz="UTC")))


def install_dags(home: Path) -> None:
    """Copy this folder's test DAGs into the Airflow home's DAG bundle."""
    target = home / "dags"
    target.mkdir(exist_ok=True)
    for source in DAGS.glob("*.py"):
        shutil.copy(source, target / source.name)


def gate_env(server: ApiServer, **extra: str) -> dict[str, str]:
    """The environment of a DAG run whose gates read ``server``."""
    return {
        **os.environ,
        "AIRFLOW_CONN_AIRFLOW_API_DEFAULT": server.connection(),
        **extra,
    }


def dags_test(
    dag_id: str,
    env: dict[str, str],
    *,
    audit: Path | None = None,
    clock: RunClock | None = None,
    rescheduled: Collection[str] = (),
) -> tuple[str, str]:
    """Run one DAG run to its end in-process (``airflow dags test``); return run id and output.

    :param audit: when given, every socket the process opens is logged to this file.
    :param clock: the run's clock (:func:`on_run_clock`): a task may stop it, and the end of
        a wait the run announced sets it running (:class:`WaitsEnd`).
    :param rescheduled: the DAG's sensors in ``reschedule`` mode, on a clock.
    """
    if clock is not None:
        env = {**env, **clock.env()}
    env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))}
    if audit is not None:
        hook_dir = audit.parent / "audit_site"
        hook_dir.mkdir(exist_ok=True)
        (hook_dir / "sitecustomize.py").write_text(AUDIT_HOOK)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(hook_dir), env.get("PYTHONPATH")]))
        env["RW_SOCKET_AUDIT"] = str(audit)
    process = subprocess.Popen(
        [sys.executable, "-c", DAGS_TEST, "dags", "test", dag_id],
        env={**env, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    ended = threading.Timer(RUN_LIMIT, process.kill)  # a run that hangs fails its test
    ended.start()
    waits = WaitsEnd(clock, dag_id, rescheduled) if clock is not None else None
    lines = []
    try:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if waits is not None:
                waits.line(line)
        process.wait()
    finally:
        ended.cancel()
        process.kill()
        if waits is not None:
            waits.ended.set()
    output = "".join(lines)
    rows = query("select run_id from dag_run where dag_id=? order by id desc limit 1", dag_id)
    assert rows, f"no run of {dag_id} was recorded:\n{output[-5000:]}"
    return str(rows[0][0]), output


def query(sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Rows from the metadata DB."""
    with sqlite3.connect(Path(os.environ["AIRFLOW_HOME"]) / "airflow.db") as db:
        return db.execute(sql, params).fetchall()


def states(dag_id: str, run_id: str) -> dict[str, str | None]:
    """task id -> state of every task instance of the run."""
    rows = query(
        "select task_id, state from task_instance where dag_id=? and run_id=?", dag_id, run_id
    )
    return {task_id: state for task_id, state in rows}


def xcom(
    dag_id: str, run_id: str, task_id: str, key: str = "return_value", *, map_index: int = -1
) -> Any:
    """An XCom value of the run, decoded; ``None`` when there is none."""
    rows = query(
        "select value from xcom where dag_id=? and run_id=? and task_id=? and key=? "
        "and map_index=?",
        dag_id, run_id, task_id, key, map_index,
    )  # fmt: skip
    if not rows:
        return None
    value = rows[0][0]
    decoded = json.loads(value) if isinstance(value, (str, bytes)) else value
    return json.loads(decoded) if isinstance(decoded, str) else decoded


def decisions(record: dict[str, Any]) -> dict[str, str]:
    """task id -> decision, from a gate's decision record."""
    return {row["taskId"]: row["decision"] for row in record["decisions"]}
