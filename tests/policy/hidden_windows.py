"""Retry policies that ask a ``RetryWindowPolicy`` the provider cannot see.

Airflow 3.3 calls ``evaluate`` on whatever a task's ``retry_policy`` holds, so each
holder here asks its window when a try fails, through an attribute, a bound method,
a ``functools.partial``, a closure or a settings object of its own. Only the exact
``ChainRetryPolicy`` says in which order it asks; a subclass may ask otherwise, as
:class:`LastFirst` does. The DAGs in ``chain_dags/refused/`` give one task each such
a holder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pendulum
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, RetryPolicy

from airflow_retrywindow import RetryWindowPolicy
from tests.policy.chains import chain_class
from tests.policy.test_failure_paths import policy

ChainRetryPolicy = chain_class()


def window(**overrides: Any) -> RetryWindowPolicy:
    """A window every shape below holds."""
    return policy(**overrides)


def one_task_dag(dag_id: str, retry_policy: Any) -> DAG:
    """A DAG of one task, ``load``, retried under ``retry_policy``."""
    with DAG(dag_id, schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
        EmptyOperator(task_id="load", retries=2, retry_policy=retry_policy)
    return dag


class Asking:
    """No ``RetryPolicy`` at all: an object with ``evaluate``, which is all Airflow calls."""

    def __init__(self, window: Any) -> None:
        self.window = window

    def evaluate(self, **asked: Any) -> Any:
        return self.window.evaluate(**asked)


class Delegating(RetryPolicy):  # type: ignore[misc]
    """Asks a callable it keeps: a window's bound method, a partial, a closure."""

    def __init__(self, ask: Callable[..., Any]) -> None:
        self.ask = ask

    def evaluate(self, exception: Any, try_number: int, max_tries: int, context: Any = None) -> Any:
        return self.ask(
            exception=exception, try_number=try_number, max_tries=max_tries, context=context
        )


def ask_window(window: Any, **asked: Any) -> Any:
    """Asks ``window``: given to :class:`Delegating` as a partial."""
    return window.evaluate(**asked)


def closing_over(window: Any) -> Callable[..., Any]:
    """A function that asks ``window``, which it keeps in its closure."""

    def ask(**asked: Any) -> Any:
        return window.evaluate(**asked)

    return ask


class Settings:
    """A plain object of a policy's own that keeps the window among its settings."""

    def __init__(self, window: Any) -> None:
        self.window = window


class Configured(RetryPolicy):  # type: ignore[misc]
    """Asks the window its settings object keeps."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def evaluate(self, exception: Any, try_number: int, max_tries: int, context: Any = None) -> Any:
        return self.settings.window.evaluate(exception, try_number, max_tries, context)


class LastFirst(ChainRetryPolicy):  # type: ignore[misc]
    """A chain that asks its policies last first: a rule listed after the window answers first."""

    def evaluate(self, exception: Any, try_number: int, max_tries: int, context: Any = None) -> Any:
        backwards = ChainRetryPolicy(list(reversed(self.policies)))
        return backwards.evaluate(exception, try_number, max_tries, context)
