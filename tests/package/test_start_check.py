"""Each failed try of a gated task keeps whether its retry-start check ran; the view flags it.

The worker's copy of the task is built as the worker builds it: the DAG parsed
with the worker's ``[retry_window] policy_checks`` and the provider's cluster
policy applied. The try then runs its ``pre_execute`` hooks with the try's context
and fails; the policy decides with the same context, as Airflow's task runner
does. A real local server stands in for the execution API's clock.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pendulum
import pytest
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

from airflow_retrywindow import Deadline, RetryWindowPolicy, metrics
from airflow_retrywindow.links.addresses import ViewLinks
from airflow_retrywindow.plugins.decision_rows import policy_rows
from airflow_retrywindow.plugins.page import task_page
from airflow_retrywindow.policies.cluster_policy import task_policy
from airflow_retrywindow.records import evidence
from airflow_retrywindow.records.start_check import StartCheck
from tests.hooks.fake_api import FakeAirflowApi, serve
from tests.policy.resumable_jobs import Store, TaskInstance

START = pendulum.datetime(2026, 3, 1, tz="UTC")
LINKS = ViewLinks("/base/retry-window", "rw_start_check", "manual__1")


@pytest.fixture(autouse=True)
def execution_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for served in serve(FakeAirflowApi()):
        monkeypatch.setenv("AIRFLOW__CORE__EXECUTION_API_SERVER_URL", f"{served.url}/execution/")
        yield


@pytest.fixture
def not_run(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, str]]:
    counted: list[dict[str, str]] = []
    monkeypatch.setattr(metrics, "send", lambda found: counted.extend(
        m.tags for m in found if m.name == metrics.RETRY_START_NOT_RUN
    ))  # fmt: skip
    return counted


def worker_task(monkeypatch: pytest.MonkeyPatch, policy_checks: str) -> Any:
    """The gated task as a worker whose ``policy_checks`` is ``policy_checks`` parses it."""
    monkeypatch.setenv("AIRFLOW__RETRY_WINDOW__POLICY_CHECKS", policy_checks)
    with DAG("rw_start_check", schedule=None, start_date=START):
        task = EmptyOperator(
            task_id="load",
            retries=2,
            retry_delay=timedelta(seconds=30),
            retry_policy=RetryWindowPolicy(
                deadline=Deadline.after_data_interval_start(hours=6),
                duration=60,
                validation=10,
                safe_repeat=True,
            ),
        )
    task_policy(task)
    return task


def failed_try(task: Any) -> dict[str, Any]:
    """Try 1 runs its ``pre_execute`` hooks, then fails; the stored decision."""
    now = pendulum.now("UTC")
    store = Store()
    ti = TaskInstance(1, 2)
    ti.dag_id, ti.task_id = "rw_start_check", "load"  # type: ignore[attr-defined]
    context = {
        "task": task,
        "ti": ti,
        "task_state_store": store,
        "data_interval_start": now.subtract(minutes=5),
        "data_interval_end": now,
    }
    if task._pre_execute_hook is not None:
        task._pre_execute_hook(context)
    decision = task.retry_policy.evaluate(ConnectionError("reset"), 1, 2, context)
    assert decision.action.value == "retry"
    return store.values[evidence.EVIDENCE_KEY]


def test_a_try_whose_check_ran_records_it_and_is_not_flagged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, not_run: list[Any]
) -> None:
    task = worker_task(monkeypatch, "enforce")
    with caplog.at_level(logging.WARNING):
        stored = failed_try(task)
    assert stored["latest"]["startCheck"] == {
        "ran": True,
        "installed": True,
        "policyChecks": "enforce",
    }
    assert "retry-start check did not run" not in caplog.text
    assert not_run == []
    (row,) = policy_rows("load", -1, stored)
    assert row.start_check is None
    page = task_page(LINKS, task_id="load", map_index=-1, policy=[row], records=[])
    assert "start-check-not-run" not in page


def test_a_try_on_a_worker_with_policy_checks_off_is_flagged_logged_and_counted(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, not_run: list[Any]
) -> None:
    task = worker_task(monkeypatch, "off")
    with caplog.at_level(logging.WARNING):
        stored = failed_try(task)
    assert stored["latest"]["startCheck"] == {
        "ran": False,
        "installed": False,
        "policyChecks": "off",
    }
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("retry-start check did not run in try 1" in line for line in warned), warned
    assert any("policy_checks = 'off' there" in line for line in warned), warned
    assert not_run == [
        {"dag_id": "rw_start_check", "task_id": "load", "decided_by": "retry-policy"}
    ]
    (row,) = policy_rows("load", -1, stored)
    assert row.start_check is not None and "try 1" in row.start_check
    page = task_page(LINKS, task_id="load", map_index=-1, policy=[row], records=[])
    assert page.count('class="problem start-check-not-run"') == 2  # the table and the article
    assert "policy_checks = &#39;off&#39; there" in page


def test_a_check_installed_but_not_reached_is_told_apart() -> None:
    warning = StartCheck(ran=False, installed=True, policy_checks="enforce").warning(3)
    assert warning is not None
    assert "try 3" in warning and "failed before its pre_execute hooks ran" in warning
    assert StartCheck(ran=True, installed=True, policy_checks="enforce").warning(3) is None


@pytest.mark.parametrize(
    ("stored", "field"),
    [("yes", "startCheck"), ({"ran": "no", "installed": True}, "startCheck.ran"),
     ({"ran": True, "installed": 1}, "startCheck.installed"),
     ({"ran": True, "installed": True, "policyChecks": 3}, "startCheck.policyChecks")],
)  # fmt: skip
def test_an_unreadable_start_check_is_a_problem_naming_the_field(
    stored: object, field: str
) -> None:
    monkey = {"tryNumber": 2, "action": "fail", "reason": "gate-error: x", "startCheck": stored}
    (row,) = policy_rows("load", -1, {"latest": monkey, "decisions": [monkey]})
    assert row.problem is not None and field in row.problem
    assert row.start_check is None


def test_a_decision_stored_before_the_start_check_existed_is_not_flagged() -> None:
    entry = {"tryNumber": 2, "action": "fail", "reason": "gate-error: x"}
    (row,) = policy_rows("load", -1, {"latest": entry, "decisions": [entry]})
    assert row.start_check is None and row.problem is None
