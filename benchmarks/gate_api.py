"""The retry window gate over 200 targets and over 1,000 map indexes, against a real
Airflow API server.

Run from the work tree:
``python benchmarks/gate_api.py [--targets 200] [--map-indexes 1000] [--rounds 5]``.

It builds a throwaway Airflow (SQLite metadata DB, ``airflow api-server`` on a
free loopback port, a viewer user), runs a DAG whose 200 targets really
succeed, fail, or lose their outcome under a ``RetryWindowPolicy``
(``airflow dags test``), then decides that run the way the gate does, for
growing numbers of targets and two page sizes. For each it prints the requests
the gate made (counted by the client and, independently, in the API server's
access log) and the wall time of one whole decision, API reads included.

Then it runs a second DAG, one task mapped over 1,000 map indexes under a
``RetryWindowPolicy`` (every 50th loses its outcome), and decides that one
target, every map index on its own, at the default page size and at 100.

Target (PASS/FAIL; the exit status is 1 if it fails): the requests follow the
pages, ``1 token + ceil(task instances / page) + ceil(XCom keys / page) +
ceil(pools / page)``, and never the number of targets nor of map indexes (the
XCom key and pool listings are GET requests, whose pages the server caps at its
``[api] maximum_page_limit``, 100 by default; the task instance listing is not
capped); and the gate over 1,000 map indexes, at the default page size, makes at
most a dozen requests.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.error
import urllib.request
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

DAG_ID = "rw_gate_bench"
MAPPED_DAG_ID = "rw_gate_bench_mapped"
VIEWER = "rw_bench_viewer"
#: the server's default ``[api] maximum_page_limit``: the most rows a GET listing returns
SERVER_PAGE_CAP = 100
#: the most requests the gate may make over 1,000 map indexes at the default page size
MAPPED_REQUEST_LIMIT = 12

DAG_FILE = textwrap.dedent(
    '''
    """{targets} targets for the gate benchmark: most succeed, some fail, some lose the outcome."""

    from datetime import timedelta

    import pendulum
    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.sdk import DAG, task
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_retrywindow import (
        Deadline, OutcomeUnknown, RetryWindowGateOperator, RetryWindowPolicy, Work,
    )

    DEADLINE = Deadline.after_data_interval_end(hours=6)
    POLICY = RetryWindowPolicy(deadline=DEADLINE, duration=60, validation=30, safe_repeat=True)
    WORK = Work(duration=60, validation=30, safe_repeat=True)

    with DAG("{dag_id}", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
        targets = []
        for index in range({targets}):
            kind = index % 5
            if kind == 0:

                @task(task_id=f"lost_{{index:03d}}", retries=2, retry_policy=POLICY)
                def lost():
                    raise OutcomeUnknown("response lost after submission")

                targets.append(lost())
            elif kind == 1:

                @task(task_id=f"failed_{{index:03d}}", retries=2, retry_delay=timedelta(seconds=1))
                def failed():
                    raise AirflowFailException("failed")

                targets.append(failed())
            else:
                targets.append(EmptyOperator(task_id=f"done_{{index:03d}}"))
        gate = RetryWindowGateOperator(
            task_id="gate",
            targets={{t.operator.task_id if hasattr(t, "operator") else t.task_id: WORK
                     for t in targets}},
            deadline=DEADLINE,
            guard=[],
            trigger_rule="all_done",
        )
        targets >> gate
    '''
)

MAPPED_DAG_FILE = textwrap.dedent(
    '''
    """One load mapped over {map_indexes} map indexes for the gate benchmark."""

    import pendulum
    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.sdk import DAG, task

    from airflow_retrywindow import Deadline, OutcomeUnknown, RetryWindowPolicy

    DEADLINE = Deadline.after_data_interval_end(hours=6)
    POLICY = RetryWindowPolicy(deadline=DEADLINE, duration=60, validation=30, safe_repeat=True)

    with DAG("{dag_id}", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):

        @task(retries=2, retry_policy=POLICY)
        def load(index):
            if index % 50 == 7:
                raise OutcomeUnknown("response lost after submission")
            return index

        # the run succeeds whatever the loads did: "airflow dags test" then exits 0
        load.expand(index=list(range({map_indexes}))) >> EmptyOperator(
            task_id="done", trigger_rule="all_done"
        )
    '''
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def airflow(*args: str, env: dict[str, str]) -> str:
    binary = Path(sys.executable).with_name("airflow")
    done = subprocess.run(
        [str(binary), *args], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(
            f"airflow {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    return done.stdout + done.stderr


def start_api_server(home: Path, env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    binary = Path(sys.executable).with_name("airflow")
    env = {**env, "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO"}  # one access log line per request
    out = (home / "api-server.log").open("ab")
    process = subprocess.Popen(
        [str(binary), "api-server", "--host", "127.0.0.1", "--port", str(port),
         "--apps", "core", "--workers", "1"],
        env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit((home / "api-server.log").read_text()[-3000:])
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/version", timeout=2):
                return process
        except (urllib.error.URLError, OSError):
            time.sleep(0.5)
    raise SystemExit("the API server did not start")


def access_log_requests(home: Path) -> int:
    """Requests the API server logged for the gate's paths (token included)."""
    text = (home / "api-server.log").read_text(errors="replace")
    paths = ("/auth/token", "/taskInstances/list", "/xcomEntries", "/tries", "/api/v2/pools")
    return sum(
        1
        for line in text.splitlines()
        if "request finished" in line
        and any(f"path={path}" in line or f"{path} " in line for path in paths)
    )


def decide_once(
    dag: Any, run: Any, targets: list[str], page_size: int
) -> tuple[int, float, dict[str, int]]:
    from airflow_retrywindow import Deadline, Work
    from airflow_retrywindow.gate.run import GateSettings, decide_run

    work = Work(duration=timedelta(minutes=1), validation=timedelta(seconds=30), safe_repeat=True)
    settings = GateSettings(
        targets={task_id: work for task_id in targets},
        deadline=Deadline.after_data_interval_end(hours=6),
        max_observation_age=60,
        conn_id="airflow_api_default",
        page_size=page_size,
        timeout=30.0,
    )
    context = {
        "dag": dag,
        "dag_run": run,
        "data_interval_start": run.data_interval_start,
        "data_interval_end": run.data_interval_end,
    }
    began = time.perf_counter()
    result = decide_run(settings, context)
    elapsed = time.perf_counter() - began
    counts: dict[str, int] = {}
    for row in result.table.decisions:
        counts[row.decision] = counts.get(row.decision, 0) + 1
    return result.requests, elapsed, counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--targets", type=int, default=200)
    parser.add_argument("--map-indexes", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="rw-gate-bench-"))
    (home / "dags").mkdir()
    password = secrets.token_urlsafe(16)
    (home / "passwords.json").write_text(json.dumps({VIEWER: password}))
    port = free_port()
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{VIEWER}:viewer",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
        "AIRFLOW_CONN_AIRFLOW_API_DEFAULT": json.dumps(
            {
                "conn_type": "http",
                "host": f"http://127.0.0.1:{port}",
                "login": VIEWER,
                "password": password,
            }
        ),
    }
    os.environ.update(env)  # this process reads the same DB and connection
    (home / "dags" / f"{DAG_ID}.py").write_text(
        DAG_FILE.format(targets=options.targets, dag_id=DAG_ID)
    )
    (home / "dags" / f"{MAPPED_DAG_ID}.py").write_text(
        MAPPED_DAG_FILE.format(map_indexes=options.map_indexes, dag_id=MAPPED_DAG_ID)
    )
    log(f"Airflow home {home}")
    airflow("db", "migrate", env=env)
    server = start_api_server(home, env, port)
    try:
        log(f"API server on 127.0.0.1:{port}; running {DAG_ID} with {options.targets} targets")
        began = time.monotonic()
        airflow("dags", "test", DAG_ID, env=env)
        log(f"run finished in {time.monotonic() - began:.0f} s")
        ok = measure(home, options.targets, options.rounds)
        log(f"running {MAPPED_DAG_ID}: one load over {options.map_indexes} map indexes")
        began = time.monotonic()
        airflow("dags", "test", MAPPED_DAG_ID, env=env)
        log(f"run finished in {time.monotonic() - began:.0f} s")
        ok &= measure_mapped(home, options.map_indexes, options.rounds)
        return 0 if ok else 1
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=20)


def measure(home: Path, total: int, rounds: int) -> bool:
    dag, run = _finished_run(home, DAG_ID)
    # in DAG order (lost, failed, done, done, done, ...): every prefix is a fair mix
    keys = _policy_keys(DAG_ID, run.run_id)
    all_targets = sorted(
        (task_id for task_id in dag.task_dict if task_id != "gate"),
        key=lambda task_id: task_id.rsplit("_", 1)[1],
    )
    recorded = json.loads(json.dumps(_gate_record(DAG_ID, run.run_id)))
    print()
    print(f"the gate task in the run: {recorded['requests']} requests for {total} targets")
    print(f"retry-window XCom keys in the run: {keys}")
    print()
    print(f"{'targets':>8} {'page':>5} {'requests':>9} {'server saw':>11} {'expected':>9} "
          f"{'median s':>9} {'max s':>7}  decisions")  # fmt: skip
    ok = True
    for page_size in (100, 50):
        for count in sorted({20, 50, 100, total}):
            if count > total:
                continue
            targets = all_targets[:count]
            failing = [t for t in targets if not t.startswith("done_")]
            # the XCom keys are listed for the whole run (two per policy failure: the
            # evidence and its class), once any target failed; pools: default_pool only
            key_pages = _key_pages(keys, page_size) if failing else 0
            expected = 1 + math.ceil(count / page_size) + key_pages + 1
            requests, seen, times, counts = _rounds(
                home, dag, run, targets, page_size=page_size, rounds=rounds
            )
            fine = set(requests) == {expected} and set(seen) == {expected}
            ok &= fine
            print(
                f"{count:>8} {page_size:>5} {requests[0]:>9} {seen[0]:>11} {expected:>9} "
                f"{statistics.median(times):>9.3f} {max(times):>7.3f}  "
                + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            )
    print()
    print(
        ("PASS" if ok else "FAIL")
        + ": requests follow the pages (token + task-instance pages + XCom-key pages + pool "
        "pages), not the targets"
    )
    return ok


def measure_mapped(home: Path, total: int, rounds: int) -> bool:
    """Decide the one mapped target of the mapped run: every map index, by pages."""
    from airflow_retrywindow.hooks.api_reader import DEFAULT_PAGE_SIZE

    dag, run = _finished_run(home, MAPPED_DAG_ID)
    keys = _policy_keys(MAPPED_DAG_ID, run.run_id)
    print()
    print(f"one target mapped over {total} map indexes; retry-window XCom keys in the run: {keys}")
    print()
    print(f"{'page':>5} {'requests':>9} {'server saw':>11} {'expected':>9} "
          f"{'median s':>9} {'max s':>7}  decisions")  # fmt: skip
    ok = True
    for page_size in (DEFAULT_PAGE_SIZE, 100):
        expected = 1 + math.ceil(total / page_size) + _key_pages(keys, page_size) + 1
        requests, seen, times, counts = _rounds(
            home, dag, run, ["load"], page_size=page_size, rounds=rounds
        )
        fine = set(requests) == {expected} and set(seen) == {expected}
        fine &= sum(counts.values()) == total  # every map index decided
        if page_size == DEFAULT_PAGE_SIZE:
            fine &= max(requests) <= MAPPED_REQUEST_LIMIT
        ok &= fine
        print(
            f"{page_size:>5} {requests[0]:>9} {seen[0]:>11} {expected:>9} "
            f"{statistics.median(times):>9.3f} {max(times):>7.3f}  "
            + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        )
    print()
    print(
        ("PASS" if ok else "FAIL")
        + f": {total} map indexes, each decided, in at most {MAPPED_REQUEST_LIMIT} requests at "
        "the default page size; the requests follow the pages, not the map indexes"
    )
    return ok


def _finished_run(home: Path, dag_id: str) -> tuple[Any, Any]:
    """The DAG and the one finished run of ``dag_id``, as the gate's context holds them."""
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models.dagrun import DagRun

    dag = DagBag(dag_folder=str(home / "dags")).get_dag(dag_id)
    found = DagRun.find(dag_id=dag_id)[0]
    run = SimpleNamespace(
        run_id=found.run_id,
        data_interval_start=found.data_interval_start,
        data_interval_end=found.data_interval_end,
    )
    return dag, run


def _rounds(
    home: Path, dag: Any, run: Any, targets: list[str], *, page_size: int, rounds: int
) -> tuple[list[int], list[int], list[float], dict[str, int]]:
    """Decide ``rounds`` times: requests made, requests the server saw, seconds, decisions."""
    requests, seen, times = [], [], []
    counts: dict[str, int] = {}
    for _ in range(rounds):
        before = access_log_requests(home)
        made, elapsed, counts = decide_once(dag, run, targets, page_size)
        time.sleep(0.2)  # let the access log flush
        seen.append(access_log_requests(home) - before)
        requests.append(made)
        times.append(elapsed)
    return requests, seen, times, counts


def _key_pages(keys: int, page_size: int) -> int:
    """Pages of the XCom key listing: a GET, whose page the server caps."""
    return max(1, math.ceil(keys / min(page_size, SERVER_PAGE_CAP)))


def _policy_keys(dag_id: str, run_id: str) -> int:
    import sqlite3

    with sqlite3.connect(Path(os.environ["AIRFLOW_HOME"]) / "airflow.db") as db:
        return int(
            db.execute(
                "select count(*) from xcom where dag_id=? and run_id=? "
                "and key like 'retry_window.%'",
                (dag_id, run_id),
            ).fetchone()[0]
        )


def _gate_record(dag_id: str, run_id: str) -> dict[str, Any]:
    import sqlite3

    with sqlite3.connect(Path(os.environ["AIRFLOW_HOME"]) / "airflow.db") as db:
        value = db.execute(
            "select value from xcom where dag_id=? and run_id=? and task_id='gate' "
            "and key='return_value'",
            (dag_id, run_id),
        ).fetchone()[0]
    decoded = json.loads(value)
    return json.loads(decoded) if isinstance(decoded, str) else decoded  # type: ignore[no-any-return]


if __name__ == "__main__":
    sys.exit(main())
