"""An Airflow cluster policy, registered through the ``airflow.policy`` entry point.

It refuses, when a DAG is parsed, any task whose ``RetryWindowPolicy`` cannot
express the task's retry settings. Tasks without that policy are untouched.
"""

from __future__ import annotations

from typing import Any

from airflow.exceptions import AirflowClusterPolicyViolation
from airflow.policies import hookimpl


@hookimpl
def task_policy(task: Any) -> None:
    """Raise ``AirflowClusterPolicyViolation`` naming the setting the gate cannot express."""
    from airflow_retrywindow.check import task_problem

    problem = task_problem(task)
    if problem:
        raise AirflowClusterPolicyViolation(f"retry window gate: {problem}")
