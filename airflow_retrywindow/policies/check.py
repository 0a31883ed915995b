"""DAG-integrity checks: find every gated task the gate cannot answer for.

That is a task whose retry settings the model cannot express, whose deadline
alert the DAG lacks, or whose tries start in the triggerer
(``start_from_trigger=True``), where no check can run before a retry.

Use it in a DAG-integrity test so a bad setting fails in CI, not at 3 a.m.::

    from airflow_retrywindow import check_dag

    def test_retry_windows(dagbag):
        for dag in dagbag.dags.values():
            assert check_dag(dag) == []

The provider also registers :func:`task_policy` as an Airflow cluster policy, so
the DAG processor refuses such a DAG with the same message when it parses it.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow_retrywindow.exceptions import UnsupportedRetrySettings
from airflow_retrywindow.policies.composition import composition_problem
from airflow_retrywindow.records.composition import window_of

log = logging.getLogger(__name__)


def gated(task: Any) -> bool:
    """``True`` when a ``RetryWindowPolicy`` (or a subclass) may decide the task's retries,
    wherever it is held (:mod:`~airflow_retrywindow.records.composition`)."""
    return window_of(task) is not None


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
    composed = composition_problem(task)
    if composed:
        return composed
    window = window_of(task)
    if window is None:
        return None
    found_start = starts_in_triggerer(task)
    if found_start:
        return found_start
    try:
        window.settings_of(task)
    except UnsupportedRetrySettings as error:
        return str(error)
    bound = window.classify_bound_problem()
    if bound:
        return f"task {task.task_id!r}: {bound}"
    dag = task.dag if task.has_dag() else None
    # a deadline taken from the DAG's alerts can be checked before any run
    found = window.deadline.problems_in(dag) if dag is not None else []
    if found:
        return f"task {task.task_id!r}: {'; '.join(found)}"
    note_pool_not_a_breaker(task)
    return None


#: the pools already said not to be breakers, in this process
_NOTED: set[str] = set()


def note_pool_not_a_breaker(task: Any) -> None:
    """Say, once per pool and process, that a gated task's pool is no breaker.

    Before ``[retry_window] breaker_pools``, the pool of every gated task other than
    ``default_pool`` held that task's retries while it failed. Now a pool holds only when
    the setting names it: holding a pool holds every task in it, any DAG's.
    """
    from airflow_retrywindow import configuration
    from airflow_retrywindow.breaker.settings import DEFAULT_POOL

    pool = str(getattr(task, "pool", "") or "")
    if pool in (DEFAULT_POOL, "") or pool in _NOTED:
        return
    _NOTED.add(pool)
    if configuration.breaker_pools().of(pool) is not None:
        return
    log.warning(
        "Retry window: task %r runs in pool %r, which is no breaker. A pool holds its tasks "
        "while their dependency is down only when [retry_window] breaker_pools names it "
        "(before, the pool of every gated task held that task's retries); name it there, and "
        "deploy pool_breaker_dag(), to keep that (docs/dependencies.md)",
        task.task_id,
        pool,
    )


def starts_in_triggerer(task: Any) -> str | None:
    """Why a gated task that starts its tries in the triggerer cannot be gated, or ``None``.

    With ``start_from_trigger=True`` (and ``start_trigger_args``) Airflow's
    scheduler hands every try, retries included, straight to the triggerer
    (``TaskInstance.defer_task``): no worker code runs before it, so the
    retry-start check cannot refuse a retry nobody decided. A trigger cannot do
    the check either: Airflow 3.3's triggerer answers no task state store
    requests, where the decisions are kept.
    """
    if getattr(task, "start_from_trigger", False) is not True:
        return None
    if getattr(task, "start_trigger_args", None) is None:
        return None  # Airflow starts such a task in a worker after all
    return (
        f"task {task.task_id!r}: start_from_trigger=True starts every try, retries "
        "included, in the triggerer straight from the scheduler: no worker code runs "
        "before a retry, so the retry-start check cannot refuse one nobody decided, and a "
        "trigger cannot read the task state store where the decisions are kept; set "
        "start_from_trigger=False so the operator starts in a worker and defers from "
        "execute(), where every try passes the retry-start check, or remove the "
        "RetryWindowPolicy"
    )


def check_dag(dag: Any) -> list[str]:
    """One message per gated task of ``dag`` whose retry settings the gate cannot express.

    :param dag: an Airflow DAG.
    :return: the messages, ``[]`` when every gated task is fine.
    """
    problems = (task_problem(task) for task in dag.tasks)
    return [f"{dag.dag_id}: {problem}" for problem in problems if problem]
