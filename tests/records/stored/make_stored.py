"""Write the stored-shape fixtures of this folder by running the release's own code.

Run it from a clean checkout of the release whose shapes are kept (never from a
working tree with changes: the fixtures are what that release wrote)::

    git worktree add /tmp/before HEAD
    cd /tmp/before && "$REPO/.venv/bin/python" "$REPO/tests/records/stored/make_stored.py" \\
        "$REPO/tests/records/stored"
    git -C "$REPO" worktree remove /tmp/before

The policy's entries come from the real ``RetryWindowPolicy`` and retry-start check
on real Airflow operators, with the task state store and task instance replaced by
the in-memory stand-ins of ``tests/policy/resumable_jobs.py``; the gate's and the
sensor's records from the real ``RetryWindowGateOperator.execute`` and
``RetryWindowSensor`` over the in-memory REST reader of ``tests/gate/fake_reader.py``.
Every value is written as Airflow keeps it in the metadata DB: through JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

# the checkout this runs in, first: never the installed copy of the working tree
sys.path.insert(0, os.getcwd())

import pendulum

import airflow_retrywindow

if not Path(airflow_retrywindow.__file__).is_relative_to(os.getcwd()):
    raise SystemExit(f"airflow_retrywindow comes from {airflow_retrywindow.__file__}, not here")

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG, task

from airflow_retrywindow import (
    Deadline,
    OutcomeUnknown,
    RetryWindowGateOperator,
    RetryWindowPolicy,
    RetryWindowSensor,
    TerminalFailure,
    Work,
)
from airflow_retrywindow.gate import run as gate_run
from airflow_retrywindow.hooks.api_reader import (
    ApprovalRow,
    TaskInstanceRow,
    XComKey,
)
from airflow_retrywindow.policies.cluster_policy import task_policy
from airflow_retrywindow.records import evidence
from tests.gate.fake_reader import FakeReader
from tests.policy.resumable_jobs import (
    Jobs,
    Store,
    TaskInstance,
    context,
    job_operator,
    policy,
)

START = pendulum.datetime(2026, 3, 1, tz="UTC")
TRY_START_KEY = "retry_window.try_start"


def stored(value: Any) -> Any:
    """``value`` as the metadata DB gives it back: through JSON."""
    return json.loads(json.dumps(value))


def kept(store: Store, ti: TaskInstance) -> dict[str, Any]:
    """What one task instance kept: its task state store values and its XComs."""
    return {"taskStateStore": stored(store.values), "xcom": stored(ti.xcom)}


def plain_task(gate: RetryWindowPolicy, *, retries: int = 2) -> Any:
    with DAG("rw_stored", schedule=None, start_date=START):
        made = PythonOperator(
            task_id="load",
            python_callable=lambda: None,
            retries=retries,
            retry_delay=timedelta(seconds=30),
            retry_policy=gate,
        )
    task_policy(made)  # the retry-start check, as the provider's cluster policy installs it
    return made


def _raises(context: Any) -> Any:
    raise LookupError("the deadline's calendar is unreachable")


# -- the policy's evidence -----------------------------------------------------------


def decision_retry() -> dict[str, Any]:
    made = plain_task(policy(jitter=0.2))
    store = Store()
    ctx = context(made, try_number=1, store=store, max_tries=2)
    # the runtime task instance's names: jitter draws this try's wait from them
    ti = ctx["ti"]
    ti.dag_id, ti.task_id, ti.run_id, ti.map_index = "rw_stored", "load", "manual__1", -1
    made.retry_policy.evaluate(ConnectionError("connection reset by peer"), 1, 2, ctx)
    return kept(store, ti)


def decision_refused() -> dict[str, Any]:
    made = plain_task(policy())
    store = Store()
    ctx = context(made, try_number=1, store=store, max_tries=2)
    made.retry_policy.evaluate(TerminalFailure("the input file is malformed"), 1, 2, ctx)
    return kept(store, ctx["ti"])


def gate_error(on_error: str) -> Callable[[], dict[str, Any]]:
    def make() -> dict[str, Any]:
        made = plain_task(policy(deadline=Deadline.computed(_raises), on_error=on_error))
        store = Store()
        ctx = context(made, try_number=1, store=store, max_tries=2)
        made.retry_policy.evaluate(ConnectionError("connection reset by peer"), 1, 2, ctx)
        return kept(store, ctx["ti"])

    return make


def retry_start_refused() -> dict[str, Any]:
    """Try 2 starts after try 1's process was killed: nothing decided it."""
    made = plain_task(policy())
    store = Store()
    ctx = context(made, try_number=2, store=store, max_tries=2)
    try:
        made._pre_execute_hook(ctx)
    except Exception as error:  # AirflowFailException: refused before the task's code
        print(f"  retry-start refused: {error}")
    return kept(store, ctx["ti"])


def reconciled_retry() -> dict[str, Any]:
    """A lost answer while the job runs: reconnect (with the job's reconciliation)."""
    jobs, store = Jobs(), Store()
    made = job_operator(jobs, policy())
    ctx = context(made, try_number=1, store=store)
    made._pre_execute_hook(ctx)
    made.execute(ctx)
    made.retry_policy.evaluate(OutcomeUnknown("no answer after submitting"), 1, 3, ctx)
    return kept(store, ctx["ti"])


def retry_start_run() -> dict[str, Any]:
    """Try 1's worker is lost while its job runs; try 2 only reconnects: run, and the marker."""
    jobs, store = Jobs(), Store()
    made = job_operator(jobs, policy())
    first = context(made, try_number=1, store=store)
    made._pre_execute_hook(first)
    made.execute(first)
    second = context(made, try_number=2, store=store)
    made._pre_execute_hook(second)
    return kept(store, second["ti"])


# -- the gate's and the sensor's records -----------------------------------------------


class Ti:
    """The deciding task instance: its try and what it pushes to XCom."""

    def __init__(self) -> None:
        self.try_number, self.map_index, self.max_tries = 1, -1, 1
        self.xcom: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value

    def xcom_pull(self, **kwargs: Any) -> Any:
        return None


class ApprovingReader(FakeReader):
    """The in-memory reader, with the approval task's answer."""

    def __init__(self, rows: list[TaskInstanceRow], answer: ApprovalRow) -> None:
        super().__init__(rows)
        self.answer = answer

    def approval(
        self, dag_id: str, run_id: str, task_id: str, map_index: int = -1
    ) -> ApprovalRow | None:
        self._made("approval", task_id, map_index)
        return self.answer


def _failed(task_id: str, now: pendulum.DateTime, *, map_index: int = -1, tries: int = 1) -> Any:
    return TaskInstanceRow(
        task_id, map_index, "failed", tries, 2, now.subtract(minutes=3), now.subtract(minutes=2),
        "db", 1, now,
    )  # fmt: skip


def _key(task_id: str, failure: str, at: pendulum.DateTime, map_index: int = -1) -> XComKey:
    """The failure class the try's policy pushed when it failed, at ``at``."""
    return XComKey(task_id, map_index, evidence.failure_key(failure), at)


def _gate_dag(**gate_arguments: Any) -> tuple[Any, Any]:
    """``load`` (mapped, two map indexes) and ``report`` under policies, a gate guarding both."""
    override = Work.override(
        reason="INC-4211: the vendor confirmed the report replaces its rows", safe_repeat=True
    )
    gated = RetryWindowPolicy(
        deadline=Deadline.after_data_interval_start(hours=6),
        duration=timedelta(minutes=4),
        validation=timedelta(minutes=1),
        safe_repeat=False,
    )
    with DAG("rw_stored_gate", schedule=None, start_date=START) as dag:

        @task(retries=2, retry_delay=timedelta(seconds=30), retry_policy=gated)
        def load(part: str) -> str:
            return part

        @task(retries=2, retry_delay=timedelta(seconds=30), retry_policy=gated)
        def report() -> str:
            return "report"

        loads = load.expand(part=["a", "b"])
        reports = report()
        targets = gate_arguments.pop("targets", {"load": None, "report": override})
        gate = RetryWindowGateOperator(
            task_id="retry_gate",
            targets=targets,
            guard={"rerun_load": ["load"], "rerun_report": ["report"]},
            work_unit={"business_date": "2026-03-01"},
            **gate_arguments,
        )
        rerun_load = PythonOperator(task_id="rerun_load", python_callable=lambda: None)
        rerun_report = PythonOperator(task_id="rerun_report", python_callable=lambda: None)
        extra = [gate_arguments["approval"]] if "approval" in gate_arguments else []
        for task_id in extra:
            from airflow.providers.standard.operators.hitl import ApprovalOperator

            approve = ApprovalOperator(
                task_id=task_id, subject="Repeat the load?", params={"reason": ""}
            )
            gate >> approve
        [loads, reports] >> gate >> [rerun_load, rerun_report]
    return dag, gate


def _run_context(dag: Any, deciding: Any, ti: Ti, now: pendulum.DateTime) -> dict[str, Any]:
    from types import SimpleNamespace

    return {
        "dag": dag,
        "task": deciding,
        "ti": ti,
        "dag_run": SimpleNamespace(run_id="manual__2026-03-01"),
        "data_interval_start": now.subtract(minutes=30),
        "data_interval_end": now.subtract(minutes=30),
    }


def _execute(deciding: Any, dag: Any, reader: FakeReader, now: pendulum.DateTime) -> Any:
    ti = Ti()
    gate_run._client = lambda settings: reader  # type: ignore[assignment]
    try:
        deciding.execute(_run_context(dag, deciding, ti, now))
    except Exception as error:  # skipping ends the task: the record is pushed first
        print(f"  {deciding.task_id} ended with {type(error).__name__}")
    return stored(ti.xcom["return_value"])


def gate_guard() -> dict[str, Any]:
    """A guard that runs one guarded task and skips the other; estimate sources recorded."""
    now = pendulum.now("UTC")
    dag, gate = _gate_dag()
    rows = [_failed("load", now, map_index=0), _failed("load", now, map_index=1),
            _failed("report", now, tries=2)]  # fmt: skip
    ended = now.subtract(minutes=2)
    keys = [
        _key("load", "retryable", ended, 0),
        _key("load", "unknown", ended, 1),
        _key("report", "retryable", ended),
    ]
    return {"xcom": {"return_value": _execute(gate, dag, FakeReader(rows, keys=keys), now)}}


def gate_override() -> dict[str, Any]:
    """``report`` used its last try; an approval releases its repeat."""
    now = pendulum.now("UTC")
    dag, gate = _gate_dag(
        targets={"load": None, "report": None}, approval="approve_repeat",
        approval_targets=["report"],
    )  # fmt: skip
    rows = [_failed("load", now, map_index=0), _failed("load", now, map_index=1),
            _failed("report", now, tries=3)]  # fmt: skip
    answer = ApprovalRow(
        task_id="approve_repeat", map_index=-1, state="success", try_number=1,
        options=("Approve", "Reject"), chosen=("Approve",), user_id="ops_lead",
        user_name="Ops Lead", responded_at=now.subtract(minutes=1),
        params_input={"reason": "vendor re-sent the feed (OPS-4411)"},
        asked_at=now.subtract(minutes=2), observed_at=now,
    )  # fmt: skip
    reader = ApprovingReader(rows, answer)
    ended = now.subtract(minutes=2)
    reader.keys = [
        _key("load", "retryable", ended, 0),
        _key("load", "retryable", ended, 1),
        _key("report", "retryable", ended),
    ]
    return {"xcom": {"return_value": _execute(gate, dag, reader, now)}}


def sensor(action: str) -> Callable[[], dict[str, Any]]:
    """The sensor's record: the retry may run, or the sensor times out before the backoff."""

    def make() -> dict[str, Any]:
        now = pendulum.now("UTC")
        with DAG("rw_stored_sensor", schedule=None, start_date=START) as dag:
            gated = RetryWindowPolicy(
                deadline=Deadline.after_data_interval_start(hours=6),
                duration=timedelta(minutes=4),
                validation=timedelta(minutes=1),
                safe_repeat=True,
            )
            load = PythonOperator(
                task_id="load", python_callable=lambda: None, retries=3,
                retry_delay=timedelta(minutes=10 if action == "timeout" else 1),
                retry_policy=gated,
            )  # fmt: skip
            waits = RetryWindowSensor(
                task_id="wait_for_window", target="load", deferrable=True,
                timeout=60, work_unit={"business_date": "2026-03-01"},
            )  # fmt: skip
            rerun = PythonOperator(task_id="rerun_load", python_callable=lambda: None)
            load >> waits >> rerun
        ended = now.subtract(minutes=5 if action == "run" else 0, seconds=1)
        row = TaskInstanceRow(
            "load", -1, "failed", 1, 3, ended.subtract(minutes=1), ended, "default_pool", 1, now
        )
        reader = FakeReader(
            [row], keys=[_key("load", "retryable", ended)], pools={"default_pool": _pool()}
        )
        return {"xcom": {"return_value": _execute(waits, dag, reader, now)}}

    return make


def _pool() -> Any:
    from tests.gate.fake_reader import pool_row

    return pool_row("default_pool", slots=128)


KINDS: Mapping[str, tuple[str, Callable[[], dict[str, Any]]]] = {
    "policy_decision_retry": (
        "RetryWindowPolicy.evaluate on a PythonOperator (jitter 0.2) after a ConnectionError on "
        "try 1 of 2: a decision entry with its fixture, handed back to Airflow to retry",
        decision_retry,
    ),
    "policy_decision_refused": (
        "RetryWindowPolicy.evaluate after a TerminalFailure: a decision entry with its fixture, "
        "refused (repair-cause), action fail",
        decision_refused,
    ),
    "policy_gate_error": (
        "RetryWindowPolicy.evaluate whose deadline raises (on_error='fail'): a gate-error "
        "entry, no fixture, action fail",
        gate_error("fail"),
    ),
    "policy_gate_error_handed_over": (
        "the same with on_error='default': a decision entry without a fixture, handed over to "
        "Airflow's own retries (action default)",
        gate_error("default"),
    ),
    "retry_start_refused": (
        "the retry-start check (pre_execute) on try 2 of a PythonOperator whose try 1 left no "
        "decision: check retry-start, reconcile-remote, action fail",
        retry_start_refused,
    ),
    "policy_reconciliation": (
        "RetryWindowPolicy.evaluate of an OutcomeUnknown on a ResumableJobMixin operator whose "
        "job still runs: a decision entry with a reconciliation (reconnect), and the try-start "
        "marker of try 1",
        reconciled_retry,
    ),
    "retry_start_run": (
        "the retry-start check on try 2 of a resumable job whose try 1 was lost while the job "
        "ran: check retry-start, action run, with a reconciliation; and the try-start marker "
        "retry_window.try_start of try 2 (expects reconnect)",
        retry_start_run,
    ),
    "gate_record_guard": (
        "RetryWindowGateOperator.execute over a mapped target and a plain one read through the "
        "in-memory REST reader: the return_value record with guard (one run, one skipped), "
        "estimate sources (a Work.override) and the fixtures",
        gate_guard,
    ),
    "gate_record_override": (
        "RetryWindowGateOperator.execute with an approval task whose Approve releases a refused "
        "target: the return_value record with an applied override",
        gate_override,
    ),
    "sensor_record_run": (
        "RetryWindowSensor (deferrable) whose target's backoff is over: the return_value record, "
        "action run",
        sensor("run"),
    ),
    "sensor_record_timeout": (
        "RetryWindowSensor whose target's backoff ends after the sensor's timeout: the "
        "return_value record with action timeout (the sensor then fails)",
        sensor("timeout"),
    ),
}


def main(folder: Path) -> None:
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain"], capture_output=True, text=True, check=True
    ).stdout.strip()
    if dirty:
        raise SystemExit("the checkout has changes: make the fixtures from a clean commit")
    for name, (about, make) in KINDS.items():
        print(name)
        value = {"about": about, "madeBy": f"tests/records/stored/make_stored.py at {commit}"}
        value.update(make())
        path = folder / f"{name}.json"
        path.write_text(json.dumps(value, indent=2, sort_keys=False) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
