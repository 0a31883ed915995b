"""DAG-integrity checks: find every task whose retry settings the gate cannot express.

Use it in a DAG-integrity test so a bad setting fails in CI, not at 3 a.m.::

    from airflow_retrywindow import check_dag

    def test_retry_windows(dagbag):
        for dag in dagbag.dags.values():
            assert check_dag(dag) == []

The provider also registers :func:`task_policy` as an Airflow cluster policy, so
the DAG processor refuses such a DAG with the same message when it parses it.
"""

from __future__ import annotations

from typing import Any

from airflow_retrywindow.exceptions import UnsupportedRetrySettings


def gated(task: Any) -> bool:
    """``True`` when the task's retries go through a ``RetryWindowPolicy`` (or a subclass)."""
    policy = getattr(task, "retry_policy", None)
    if policy is None:
        return False  # most tasks: no need to load the policy class
    from airflow_retrywindow.policies.retry_policy import RetryWindowPolicy

    return isinstance(policy, RetryWindowPolicy)


def task_problem(task: Any) -> str | None:
    """Why the gate cannot express this task's retry settings, or ``None``.

    A retry window gate or sensor also answers for its own configuration in its
    DAG (its targets and guarded tasks) through ``retry_window_problems()``.
    """
    own = getattr(task, "retry_window_problems", None)
    if callable(own):
        found = own()
        if found:
            return "; ".join(found)
    if not gated(task):
        return None
    try:
        task.retry_policy.settings_of(task)
    except UnsupportedRetrySettings as error:
        return str(error)
    dag = task.dag if task.has_dag() else None
    # a deadline taken from the DAG's alerts can be checked before any run
    found = task.retry_policy.deadline.problems_in(dag) if dag is not None else []
    return f"task {task.task_id!r}: {'; '.join(found)}" if found else None


def check_dag(dag: Any) -> list[str]:
    """One message per gated task of ``dag`` whose retry settings the gate cannot express.

    :param dag: an Airflow DAG.
    :return: the messages, ``[]`` when every gated task is fine.
    """
    problems = (task_problem(task) for task in dag.tasks)
    return [f"{dag.dag_id}: {problem}" for problem in problems if problem]
