"""A pre-retry gate for Apache Airflow.

Before a task runs again, the gate builds an explicit fixture from what Airflow
knows and runs an offline decision model on it. It decides and explains; it never
submits, cancels or observes an external job.

Importing this package imports neither Airflow nor pendulum: the command line must
start like a bare script. Every public name loads on first attribute access.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The one place the version is written: pyproject.toml reads it from here when the
# package is built (setuptools reads the literal without importing the package), and
# get_provider_info and CHANGELOG.md (tests/test_packaging.py) follow it.
__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "Budget": "airflow_retrywindow.gate.budget",
    "Deadline": "airflow_retrywindow.timing.deadline",
    "OutcomeUnknown": "airflow_retrywindow.exceptions",
    "TerminalFailure": "airflow_retrywindow.exceptions",
    "Work": "airflow_retrywindow.timing.work",
    "RetryWindowPolicy": "airflow_retrywindow.policies.retry_policy",
    "check_dag": "airflow_retrywindow.policies.check",
    "RetryWindowGateOperator": "airflow_retrywindow.operators.gate",
    "RetryWindowSensor": "airflow_retrywindow.sensors.retry_window",
    "RetryWindowNotifier": "airflow_retrywindow.notifications.notifier",
    "PoolBreakerOperator": "airflow_retrywindow.operators.pool_breaker",
    "pool_breaker_dag": "airflow_retrywindow.operators.pool_breaker",
}

__all__ = [
    "Budget",
    "Deadline",
    "OutcomeUnknown",
    "PoolBreakerOperator",
    "RetryWindowGateOperator",
    "RetryWindowNotifier",
    "RetryWindowPolicy",
    "RetryWindowSensor",
    "TerminalFailure",
    "Work",
    "__version__",
    "check_dag",
    "pool_breaker_dag",
]

if TYPE_CHECKING:
    from airflow_retrywindow.exceptions import OutcomeUnknown, TerminalFailure
    from airflow_retrywindow.gate.budget import Budget
    from airflow_retrywindow.notifications.notifier import RetryWindowNotifier
    from airflow_retrywindow.operators.gate import RetryWindowGateOperator
    from airflow_retrywindow.operators.pool_breaker import PoolBreakerOperator, pool_breaker_dag
    from airflow_retrywindow.policies.check import check_dag
    from airflow_retrywindow.policies.retry_policy import RetryWindowPolicy
    from airflow_retrywindow.sensors.retry_window import RetryWindowSensor
    from airflow_retrywindow.timing.deadline import Deadline
    from airflow_retrywindow.timing.work import Work


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'airflow_retrywindow' has no attribute {name!r}")
    # imported here, not above: the console script's start would import it for nothing
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this hook
    return value


def __dir__() -> list[str]:
    return __all__
