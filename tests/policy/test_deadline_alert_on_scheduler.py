"""Airflow's deadline alerts and the retry window agree on a real scheduler; jitter reaches Airflow.

One stack (API servers, scheduler, DAG processor, triggerer; shared with the modules
configured alike, :mod:`tests.shared_stack`) and one scheduled run of
``deadline_dags/rw_deadline_alert.py``: the scheduler creates the run and its
deadline rows; the policy, the gate and the jittered retry are then compared
with what Airflow stored. The run fails on purpose (a refused alert), so Airflow
keeps the deadline rows it prunes after a successful run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import pendulum
import pytest

from airflow_retrywindow import Deadline
from airflow_retrywindow.timing.jitter import Jitter, TryKey
from devstack.stack import AirflowStack
from tests.shared_stack import SharedStacks, for_module

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

DAG_ID = "rw_deadline_alert"
EVIDENCE_KEY = "retry_window.evidence"
#: the DAG's first wait and jitter fraction (deadline_dags/rw_deadline_alert.py)
RETRY_DELAY, JITTER = 4, 0.5


@dataclass(frozen=True)
class Run:
    """The scheduler's run of the DAG, once it has ended."""

    stack: AirflowStack
    run_id: str
    state: str

    def rows(self, sql: str, **params: Any) -> list[Any]:
        return self.stack.rows(sql, d=DAG_ID, r=self.run_id, **params)

    def deadlines(self) -> dict[str, pendulum.DateTime]:
        """Alert name -> the deadline Airflow stored for this run."""
        found = self.rows(
            "select a.name, d.deadline_time from deadline d"
            " join dag_run r on d.dagrun_id = r.id"
            " join deadline_alert a on d.deadline_alert_id = a.id"
            " where r.dag_id = :d and r.run_id = :r"
        )
        return {name: _utc(when) for name, when in found}

    def evidence(self, task_id: str) -> dict[str, Any]:
        found = self.rows(
            "select value from task_state_store"
            " where dag_id=:d and run_id=:r and task_id=:t and key=:k",
            t=task_id,
            k=EVIDENCE_KEY,
        )
        assert found, f"no evidence for {task_id}\n{self.stack.log_tails()}"
        return dict(json.loads(found[0][0]))


def _utc(value: Any) -> pendulum.DateTime:
    parsed = pendulum.instance(value) if not isinstance(value, str) else pendulum.parse(value)
    assert isinstance(parsed, pendulum.DateTime)
    # SQLite hands back UtcDateTime columns without their offset: they are UTC
    return parsed.replace(tzinfo=pendulum.UTC) if parsed.tzinfo is None else parsed


@pytest.fixture(scope="module")
def run(shared_stacks: SharedStacks) -> Run:
    """The stack's one scheduled run, ended."""
    stack = for_module(shared_stacks, __file__, [DAG_ID])

    def scheduled() -> bool:
        return bool(stack.rows("select 1 from dag_run where dag_id=:d", d=DAG_ID))

    stack.wait_for(scheduled, "the scheduler to create a run", timeout=120)
    ((run_id, run_type),) = stack.rows(
        "select run_id, run_type from dag_run where dag_id=:d", d=DAG_ID
    )
    assert run_type == "scheduled"
    state = stack.wait_for_run(DAG_ID, run_id, timeout=240)
    return Run(stack, run_id, state)


def test_airflow_stored_a_deadline_per_alert(run: Run) -> None:
    assert run.state == "failed"
    assert set(run.deadlines()) == {"positions ready", "regulator cutoff", "within four hours"}


def test_the_policy_decided_on_airflows_instant(run: Run) -> None:
    first = run.evidence("load")["decisions"][0]
    airflow = run.deadlines()["positions ready"]
    assert _utc(first["deadlineAt"]) == airflow
    assert first["deadline"] == "the DAG's Airflow deadline alert 'positions ready'"
    # the fixture's deadline is that instant on the model's clock (rounded down)
    origin = pendulum.parse(first["origin"])
    assert origin.add(seconds=first["fixture"]["deadline"]) == airflow.replace(microsecond=0)
    logical = run.rows("select logical_date from dag_run where dag_id=:d and run_id=:r")[0][0]
    assert airflow == _utc(logical).add(days=2, hours=6)


def test_the_gate_decided_on_airflows_instant(run: Run) -> None:
    ((value,),) = run.rows(
        "select value from xcom where dag_id=:d and run_id=:r and task_id='gate'"
        " and key='return_value'"
    )
    record = json.loads(value)
    airflow = run.deadlines()["regulator cutoff"]
    assert airflow == pendulum.datetime(2030, 1, 2, 5, 30, tz="UTC")
    assert _utc(record["deadline"]) == airflow
    assert record["deadlineRule"].startswith("Airflow deadline alert 'regulator cutoff'")


def test_an_alert_a_task_cannot_compute_is_refused_at_parse_time() -> None:
    from airflow.sdk import DAG, task

    from airflow_retrywindow import check_dag
    from tests.policy.deadline_dags.rw_deadline_alert import QUEUED, _policy

    with DAG("rw_queued_alert", schedule=None, deadline=[QUEUED]) as dag:

        @task(retries=1, retry_policy=_policy(Deadline.dag_alert("within four hours")))
        def queued() -> None: ...

        queued()

    problems = check_dag(dag)
    assert len(problems) == 1
    assert "DeadlineReference.DAGRUN_QUEUED_AT cannot be computed" in problems[0]


def test_the_jittered_wait_is_the_one_airflow_kept(run: Run) -> None:
    decisions = run.evidence("load")["decisions"]
    assert [d["tryNumber"] for d in decisions] == [1]
    first = decisions[0]
    drawn = first["jitter"]
    assert drawn["try"] == {
        "dagId": DAG_ID,
        "taskId": "load",
        "runId": run.run_id,
        "mapIndex": -1,
        "tryNumber": 1,
    }
    key = TryKey(DAG_ID, "load", run.run_id, -1, 1)
    assert drawn["wait"] == RETRY_DELAY
    assert drawn["delay"] == Jitter(JITTER).stretch(RETRY_DELAY, longest=60, key=key)
    assert RETRY_DELAY <= drawn["delay"] <= RETRY_DELAY * 1.5
    assert first["result"]["tasks"][0]["backoff"] == drawn["delay"]
    ((delay, end),) = run.rows(
        "select retry_delay_override, end_date from task_instance_history"
        " where dag_id=:d and run_id=:r and task_id='load' and try_number=1"
    )
    assert delay == drawn["delay"]
    ((state, start),) = run.rows(
        "select state, start_date from task_instance"
        " where dag_id=:d and run_id=:r and task_id='load'"
    )
    assert state == "success"
    assert (_utc(start) - _utc(end)).total_seconds() >= drawn["delay"]


def test_the_jittered_decision_replays_byte_for_byte(run: Run) -> None:
    first = run.evidence("load")["decisions"][0]
    replay = subprocess.run(
        [sys.executable, "-m", "airflow_retrywindow", "evaluate"],
        input=json.dumps(first["fixture"]),
        capture_output=True,
        text=True,
        check=True,
    )
    assert replay.stdout == json.dumps(first["result"], sort_keys=True) + "\n"
