"""A manual clear opens a new attempt window: scheduler, DAG processor and API server for real.

On the stack it shares with the modules configured alike (:mod:`tests.shared_stack`).
"""

from __future__ import annotations

import json

import pytest

from devstack.stack import AirflowStack
from tests.shared_stack import SharedStacks, for_module

pytestmark = [pytest.mark.airflow, pytest.mark.slow]


@pytest.fixture(scope="module")
def stack(shared_stacks: SharedStacks) -> AirflowStack:
    return for_module(shared_stacks, __file__, ["rw_clear"])


def _decisions(stack: AirflowStack, run_id: str) -> list[dict[str, object]]:
    rows = stack.rows(
        "select value from task_state_store where dag_id='rw_clear' and run_id=:r and key=:k",
        r=run_id,
        k="retry_window.evidence",
    )
    return list(json.loads(rows[0][0])["decisions"])


def test_a_manual_clear_starts_a_new_attempt_window(stack: AirflowStack) -> None:
    run_id = stack.trigger("rw_clear", conf={"deadline_in": 3600}, logical_date="2026-12-01")
    assert stack.wait_for_run("rw_clear", run_id, timeout=180) == "failed"
    assert stack.task_states("rw_clear", run_id)["monitor"] == ("failed", 2)

    stack.clear("rw_clear", run_id, ["monitor"])
    stack.wait_for(
        lambda: (
            stack.task_states("rw_clear", run_id)["monitor"][1] == 4
            and stack.run_state("rw_clear", run_id) == "failed"
        ),
        "the cleared task to run its new window",
        timeout=180,
    )
    decisions = _decisions(stack, run_id)
    window = [
        (d["tryNumber"], d["fixture"]["tasks"][0]["attempts"], d["result"]["tasks"][0]["decision"])  # type: ignore[index]
        for d in decisions
    ]
    assert window == [
        (1, 1, "wait-backoff"),
        (2, 2, "attempts-exhausted"),
        (3, 1, "wait-backoff"),  # the clear opened a new window: attempt 1 again
        (4, 2, "attempts-exhausted"),
    ]
    max_tries = stack.rows("select max_tries from task_instance where dag_id='rw_clear'")
    assert max_tries[0][0] == 3  # Airflow's own bookkeeping: try 2 + retries 1
