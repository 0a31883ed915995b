"""Provider metadata that Airflow reads through the ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from typing import Any

from airflow_retrywindow import __version__, configuration
from airflow_retrywindow.hooks.connection_type import connection_type_info

# The project's Documentation URL in pyproject.toml; tests/test_packaging.py keeps them equal.
DOCUMENTATION_URL = "https://github.com/airflow-retrywindow/airflow-retrywindow/tree/main/docs"


def get_provider_info() -> dict[str, Any]:
    """Describe this provider the way ``airflow providers list`` expects."""
    return {
        "package-name": "airflow-retrywindow",
        "name": "Retry Window",
        "description": "A pre-retry gate: decide and explain every retry against the delivery "
        "deadline, the attempt budget and the pool capacity.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "Retry Window",
                "external-doc-url": DOCUMENTATION_URL,
                "tags": ["software"],
            }
        ],
        "operators": [
            {
                "integration-name": "Retry Window",
                "python-modules": [
                    "airflow_retrywindow.operators.gate",
                    "airflow_retrywindow.operators.pool_breaker",
                ],
            }
        ],
        "sensors": [
            {
                "integration-name": "Retry Window",
                "python-modules": ["airflow_retrywindow.sensors.retry_window"],
            }
        ],
        "triggers": [
            {
                "integration-name": "Retry Window",
                "python-modules": [
                    "airflow_retrywindow.triggers.gated",
                    "airflow_retrywindow.triggers.pool_breaker",
                ],
            }
        ],
        "hooks": [
            {
                "integration-name": "Retry Window",
                "python-modules": ["airflow_retrywindow.hooks.airflow_api"],
            }
        ],
        "connection-types": [connection_type_info()],
        "extra-links": ["airflow_retrywindow.links.retry_window.RetryWindowLink"],
        "notifications": ["airflow_retrywindow.notifications.notifier.RetryWindowNotifier"],
        "config": {
            configuration.SECTION: {
                "description": "The retry window provider: its cluster policy, the API "
                "connection its gates and sensors read and its bounds, the clock skew "
                "tolerance, and the view's address.",
                "options": configuration.OPTIONS,
            }
        },
    }
