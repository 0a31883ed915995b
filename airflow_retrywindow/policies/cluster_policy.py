"""An Airflow cluster policy, registered through the ``airflow.policy`` entry point.

It refuses, when a DAG is parsed, any task whose ``RetryWindowPolicy`` cannot
express the task's retry settings or whose tries start in the triggerer
(``start_from_trigger=True``), and puts two ``pre_execute`` hooks in front of
every task that has one: the retry-start check
(:mod:`airflow_retrywindow.policies.retry_start`), then the hook that makes the
task defer to :class:`~airflow_retrywindow.triggers.gated.GatedTrigger`
(:mod:`airflow_retrywindow.triggers.deferral`), so a trigger's failure report is
decided by the policy too. Airflow applies cluster policies on the DAG processor
and again when the worker parses the DAG to run a task, so both are there in
every try. Tasks without that policy are untouched.
"""

from __future__ import annotations

from typing import Any

from airflow.exceptions import AirflowClusterPolicyViolation
from airflow.policies import hookimpl


@hookimpl
def task_policy(task: Any) -> None:
    """Refuse settings the gate cannot express; install the gate's hooks on gated tasks.

    :param task: an operator or mapped operator of the DAG being parsed.
    :raises AirflowClusterPolicyViolation: naming the setting the gate cannot express.
    """
    from airflow_retrywindow.policies.check import gated, task_problem

    problem = task_problem(task)
    if problem:
        raise AirflowClusterPolicyViolation(f"retry window gate: {problem}")
    if gated(task):
        from airflow_retrywindow.policies import retry_start
        from airflow_retrywindow.triggers import deferral

        # installed first so that it runs second: after the retry-start check let the try start
        deferral.install(task)
        retry_start.install(task)
