"""Each try records whether its retry-start check ran, on a real scheduler and worker.

The DAG processor runs with ``[retry_window] policy_checks = enforce``. The
scheduler, and so the LocalExecutor's workers it starts, runs first with ``off``,
then, restarted, with ``enforce``: the tries of the first run have no check, and
the Retry window view flags them; those of the second have it, unflagged.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from devstack.stack import ADMIN, AirflowStack, sqlite_stack

pytestmark = [pytest.mark.airflow, pytest.mark.slow(minutes=1.7)]
DAGS = Path(__file__).with_name("start_check_dags")
DAG_ID = "rw_start_check"
POLICY_CHECKS = "AIRFLOW__RETRY_WINDOW__POLICY_CHECKS"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowStack]:
    home = tmp_path_factory.mktemp("start-check-stack")
    services = ["api-server", "scheduler", "dag-processor"]
    with sqlite_stack(
        home, services, [DAG_ID], dags_folder=DAGS, extra_env={POLICY_CHECKS: "enforce"}
    ) as running:
        yield running


def _run(stack: AirflowStack, worker_policy_checks: str, day: str) -> str:
    stack.service_env["scheduler"] = {POLICY_CHECKS: worker_policy_checks}
    stack.restart("scheduler")
    run_id = stack.trigger(DAG_ID, conf={}, logical_date=day)
    assert stack.wait_for_run(DAG_ID, run_id, timeout=240) == "failed"
    return run_id


def _decisions(stack: AirflowStack, run_id: str) -> list[dict[str, Any]]:
    (row,) = stack.rows(
        "select value from task_state_store where dag_id=:d and run_id=:r and key=:k",
        d=DAG_ID,
        r=run_id,
        k="retry_window.evidence",
    )
    return list(json.loads(row[0])["decisions"])


def _view(stack: AirflowStack, run_id: str) -> str:
    body = json.dumps({"username": ADMIN[0], "password": ADMIN[1]}).encode()
    asked = urllib.request.Request(
        f"{stack.url}/auth/token", body, {"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(asked, timeout=30) as answer:
        token = json.loads(answer.read())["access_token"]
    page = f"{stack.url}/retry-window/dags/{DAG_ID}/runs/{quote(run_id, safe='')}/tasks/load"
    asked = urllib.request.Request(page, headers={"Cookie": f"_token={token}"})
    with urllib.request.urlopen(asked, timeout=30) as answer:
        return str(answer.read().decode())


def test_tries_on_a_worker_with_policy_checks_off_are_recorded_and_flagged(
    stack: AirflowStack,
) -> None:
    unchecked = _run(stack, "off", "2026-12-01")
    checked = _run(stack, "enforce", "2026-12-02")

    off = _decisions(stack, unchecked)
    assert [d["tryNumber"] for d in off] == [1, 2]
    for decision in off:
        assert decision["startCheck"] == {"ran": False, "installed": False, "policyChecks": "off"}
    on = _decisions(stack, checked)
    assert [d["tryNumber"] for d in on] == [1, 2]
    for decision in on:
        assert decision["startCheck"] == {"ran": True, "installed": True, "policyChecks": "enforce"}

    flagged = _view(stack, unchecked)
    assert "start-check-not-run" in flagged
    assert "The retry-start check did not run in try 1" in flagged
    assert "start-check-not-run" not in _view(stack, checked)
