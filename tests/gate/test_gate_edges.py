"""The gate on a real DAG run at its edges: policy subclasses, API URLs with credentials."""

from __future__ import annotations

import json
from typing import Any

import pytest

from devstack.stack import free_port
from tests.gate.gate_runs import ApiServer, dags_test, decisions, gate_env, states, xcom

pytestmark = [pytest.mark.airflow, pytest.mark.slow]
DAG_ID = "rw_gate_edges"
SECRET = "secretpw"


@pytest.fixture(scope="module")
def run(api_server: ApiServer) -> tuple[str, str]:
    with_userinfo = api_server.url.replace("http://", f"http://{api_server.login}:{SECRET}@")
    closed = f"http://reader:{SECRET}@127.0.0.1:{free_port()}"
    env = gate_env(
        api_server,
        AIRFLOW_CONN_RW_GATE_USERINFO=json.dumps(
            {"conn_type": "http", "host": with_userinfo, "login": api_server.login,
             "password": api_server.password}
        ),
        AIRFLOW_CONN_RW_GATE_USERINFO_CLOSED=json.dumps(
            {"conn_type": "http", "host": closed, "login": "a", "password": "b"}
        ),
    )  # fmt: skip
    return dags_test(DAG_ID, env)


def _record(run_id: str, task_id: str) -> dict[str, Any]:
    found = xcom(DAG_ID, run_id, task_id)
    assert isinstance(found, dict), f"{task_id} pushed no decision record"
    return found


def test_a_policy_subclass_is_a_gated_target(run: tuple[str, str]) -> None:
    run_id, output = run
    record = _record(run_id, "edge_gate")
    assert decisions(record) == {
        "sub_unknown": "reconcile-remote",  # the subclass's classification, read from XCom
        "sub_silent": "reconcile-remote",  # gated, but nothing classified: unknown
    }, output[-4000:]
    rows = {row["taskId"]: row for row in record["decisions"]}
    assert rows["sub_unknown"]["classification"].endswith(
        "(XCom retry_window.failure.unknown of try 1)"
    )
    assert "recorded no classification" in rows["sub_silent"]["classification"]
    # the subclass's own settings: waits capped at 600 s, not Airflow's 24 h
    policies = {
        task_id: item["fixture"]["policy"]
        for item in record["fixtures"]
        for task_id in item["taskIds"].values()
    }
    assert policies["sub_unknown"] == {
        "maxAttempts": 3, "initialDelay": 240, "maxDelay": 600, "multiplier": 2,
    }  # fmt: skip


def test_url_credentials_are_neither_stored_nor_shown(
    run: tuple[str, str], api_server: ApiServer
) -> None:
    run_id, output = run
    found = states(DAG_ID, run_id)
    record = _record(run_id, "userinfo_gate")
    assert found["userinfo_gate"] == "success"
    assert record["api"] == api_server.url
    assert SECRET not in json.dumps(record)
    # the gate that cannot reach its API fails closed, and its message holds no credentials
    assert (found["userinfo_closed_gate"], found["guarded_closed"]) == ("failed", "upstream_failed")
    assert "could not be reached to get a token" in output
    assert SECRET not in output
