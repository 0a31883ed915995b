"""An Airflow cluster policy, registered through the ``airflow.policy`` entry point.

It refuses, when a DAG is parsed, any task whose ``RetryWindowPolicy`` cannot
express the task's retry settings, and puts the retry-start check
(:mod:`airflow_retrywindow.policies.retry_start`) in front of every task that has one.
Airflow applies cluster policies on the DAG processor and again when the worker
parses the DAG to run a task, so the check is there in every try. Tasks without
that policy are untouched.
"""

from __future__ import annotations

from typing import Any

from airflow.exceptions import AirflowClusterPolicyViolation
from airflow.policies import hookimpl


@hookimpl
def task_policy(task: Any) -> None:
    """Refuse settings the gate cannot express; install the retry-start check on gated tasks.

    :raises AirflowClusterPolicyViolation: naming the setting the gate cannot express.
    """
    from airflow_retrywindow.policies.check import gated, task_problem

    problem = task_problem(task)
    if problem:
        raise AirflowClusterPolicyViolation(f"retry window gate: {problem}")
    if gated(task):
        from airflow_retrywindow.policies import retry_start

        retry_start.install(task)
