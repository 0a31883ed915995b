"""What a task on a real Airflow kept: its decisions, read from the metadata DB.

Shared by the end-to-end modules of resumable jobs; ``run`` is anything with the
run's ``dag_id`` and ``run_id``.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from devstack.stack import AirflowStack

EVIDENCE_KEY = "retry_window.evidence"


class RunOfDag(Protocol):
    dag_id: str
    run_id: str


def decoded(value: Any) -> Any:
    """A stored JSON value, decoded once more when Airflow kept it as a JSON string."""
    value = json.loads(value) if isinstance(value, (str, bytes)) else value
    if isinstance(value, str) and value.startswith(("{", "[")):
        return json.loads(value)
    return value


def stored(stack: AirflowStack, run: RunOfDag, task_id: str, key: str) -> Any:
    """A value of the task's state store, or ``None``."""
    rows = stack.rows(
        "select value from task_state_store"
        " where dag_id=:d and run_id=:r and task_id=:t and key=:k",
        d=run.dag_id,
        r=run.run_id,
        t=task_id,
        k=key,
    )
    return decoded(rows[0][0]) if rows else None


def decisions(
    stack: AirflowStack, run: RunOfDag, task_id: str, context: str
) -> list[dict[str, Any]]:
    """Every decision kept for the task, oldest first (the task state store's history).

    :param context: what to show when there is none (logs).
    """
    history = stored(stack, run, task_id, EVIDENCE_KEY)
    assert history, f"no {EVIDENCE_KEY} for {run.dag_id}.{task_id}\n{context}"
    return list(history["decisions"])


def latest_evidence(stack: AirflowStack, run: RunOfDag, task_id: str) -> dict[str, Any]:
    """The decision the task pushed to XCom under ``retry_window.evidence``."""
    rows = stack.rows(
        "select value from xcom where dag_id=:d and run_id=:r and task_id=:t and key=:k",
        d=run.dag_id,
        r=run.run_id,
        t=task_id,
        k=EVIDENCE_KEY,
    )
    assert rows, f"no XCom {EVIDENCE_KEY} for {run.dag_id}.{task_id}"
    return dict(decoded(rows[0][0]))


def decision_of(entry: dict[str, Any]) -> str:
    """The model's decision in a kept decision."""
    return str(entry["result"]["tasks"][0]["decision"])
