"""What a task on a real Airflow kept: its decisions, read from the metadata DB.

Shared by the end-to-end modules of resumable jobs; ``run`` is anything with the
run's ``dag_id`` and ``run_id``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
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


def service_logs(stack: AirflowStack, run: RunOfDag) -> str:
    """The tails of the stack's service logs: what a run's failure message shows by default."""
    return stack.log_tails()


@dataclass(frozen=True)
class KeptTask:
    """The one task of every run of a module's DAGs, and what it kept.

    :param task_id: the task every DAG of the module runs.
    :param run_timeout: how long a run may take, in seconds.
    :param context: what to show when the task kept no decision: (stack, run) -> text.
    """

    task_id: str
    run_timeout: float
    context: Callable[[AirflowStack, Any], str] = service_logs

    def finished(self, stack: AirflowStack, run: RunOfDag) -> str:
        """Wait for ``run`` to end; its state."""
        return stack.wait_for_run(run.dag_id, run.run_id, timeout=self.run_timeout)

    def task_instance(self, stack: AirflowStack, run: RunOfDag) -> tuple[str | None, int]:
        """The task instance's (state, try number)."""
        return stack.task_states(run.dag_id, run.run_id)[self.task_id]

    def stored(self, stack: AirflowStack, run: RunOfDag, key: str) -> Any:
        """A value of the task's state store, or ``None``."""
        return stored(stack, run, self.task_id, key)

    def decisions(self, stack: AirflowStack, run: RunOfDag) -> list[dict[str, Any]]:
        """Every decision kept for the task, oldest first."""
        return decisions(stack, run, self.task_id, self.context(stack, run))

    def latest_evidence(self, stack: AirflowStack, run: RunOfDag) -> dict[str, Any]:
        """The decision the task pushed to XCom under ``retry_window.evidence``."""
        return latest_evidence(stack, run, self.task_id)
