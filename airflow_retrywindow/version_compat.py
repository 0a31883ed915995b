"""Which Airflow is installed, and the imports that differ between its minors.

The provider supports Airflow 3.1, 3.2 and 3.3 (``pyproject.toml``). This is the one
module that reads the installed Airflow's version, and the one place for every name
Airflow moved between those minors, imported newest first, as Airflow's own providers
keep their ``version_compat.py``. Other modules import the names from here and never
compare versions themselves.

The version comes from the installed distribution's metadata, which imports no
Airflow. The imports below do import Airflow: only modules that run inside Airflow
import this one, and those that must stay free of it (the configuration's readers,
the metrics) import it inside their functions. ``import airflow_retrywindow`` and the
command line never load it.
"""

from __future__ import annotations

import functools
from typing import Any

#: the distributions that may hold the ``airflow`` package: Airflow 3's core, whose
#: version ``apache-airflow`` pins its own to, or the meta-package alone
_DISTRIBUTIONS = ("apache-airflow-core", "apache-airflow")


@functools.cache
def installed_version() -> str:
    """The installed Airflow's version, e.g. ``"3.1.8"``; ``""`` when none is installed.

    Everything below is worked out from it: a test that fakes another Airflow
    replaces this function.
    """
    from importlib.metadata import PackageNotFoundError, version

    for distribution in _DISTRIBUTIONS:
        try:
            return version(distribution)
        except PackageNotFoundError:
            continue
    return ""


def release_of(text: str) -> tuple[int, int, int]:
    """A version's major, minor and micro numbers; ``(0, 0, 0)`` when it is not a version.

    A pre-release or a development build counts as its release, as Airflow's providers
    count them: ``3.3.0rc1`` has retry policies.
    """
    from packaging.version import InvalidVersion, Version

    try:
        parsed = Version(text)
    except InvalidVersion:
        return (0, 0, 0)
    return parsed.major, parsed.minor, parsed.micro


def missing_retry_policies() -> str | None:
    """Why this Airflow has no retry policies, or ``None`` where it has them (3.3 and later)."""
    installed = installed_version()
    if release_of(installed) >= (3, 3, 0):
        return None
    return (
        f"retry policies arrived in Airflow 3.3 (AIP-105); this Airflow is "
        f"{installed or 'not installed'}"
    )


AIRFLOW_V_3_2_PLUS: bool = release_of(installed_version()) >= (3, 2, 0)
AIRFLOW_V_3_3_PLUS: bool = release_of(installed_version()) >= (3, 3, 0)

# the Task SDK's configuration and exceptions arrived in 3.2; 3.1 keeps them in the core
if AIRFLOW_V_3_2_PLUS:
    from airflow.sdk import conf
    from airflow.sdk.exceptions import (
        AirflowFailException,
        AirflowNotFoundException,
        AirflowRescheduleException,
        AirflowSensorTimeout,
        AirflowSkipException,
        TaskDeferred,
    )
else:
    from airflow.configuration import conf  # type: ignore[no-redef,assignment]
    from airflow.exceptions import (  # type: ignore[no-redef,attr-defined]
        AirflowFailException,
        AirflowNotFoundException,
        AirflowRescheduleException,
        AirflowSensorTimeout,
        AirflowSkipException,
        TaskDeferred,
    )

if AIRFLOW_V_3_3_PLUS:
    from airflow.sdk import RetryDecision, RetryPolicy
else:
    # Retry policies arrived in 3.3. These stand-ins only let RetryWindowPolicy's module
    # import on an earlier Airflow, where building one refuses (missing_retry_policies)
    # before anything could use them.

    class RetryPolicy:  # type: ignore[no-redef]
        """Airflow 3.3's base of retry policies, which this Airflow does not have."""

    class RetryDecision:  # type: ignore[no-redef]
        """Airflow 3.3's answer of a retry policy, which this Airflow does not have."""


def airflow_stats() -> Any:
    """Airflow's ``Stats`` for code running in a task, or ``None`` outside Airflow.

    Airflow 3.3 initializes ``airflow.sdk.observability.stats`` in the task runner
    from the ``[metrics]`` settings; earlier releases only have ``airflow.stats``.
    Imported on call: only a task that counts a decision needs it.
    """
    try:
        from airflow.sdk.observability import stats
    except ImportError:
        pass
    else:
        return stats
    try:
        import warnings

        with warnings.catch_warnings():
            # deprecated in 3.3 in favour of the import above, which was tried first
            warnings.simplefilter("ignore")
            from airflow.stats import Stats
    except ImportError:
        return None
    return Stats


def xcom_key_filter(prefix: str) -> dict[str, Any]:
    """The query parameters that list the XCom keys starting with ``prefix``.

    3.2 added a prefix filter, which an index serves, and an order; 3.1 has a ``LIKE``
    pattern only, in which ``_`` matches any character: the caller keeps exact matches.
    """
    if AIRFLOW_V_3_2_PLUS:
        return {"xcom_key_prefix_pattern": prefix, "order_by": ["task_id", "key"]}
    return {"xcom_key_pattern": f"{prefix}%"}


__all__ = [
    "AIRFLOW_V_3_2_PLUS",
    "AIRFLOW_V_3_3_PLUS",
    "AirflowFailException",
    "AirflowNotFoundException",
    "AirflowRescheduleException",
    "AirflowSensorTimeout",
    "AirflowSkipException",
    "RetryDecision",
    "RetryPolicy",
    "TaskDeferred",
    "airflow_stats",
    "conf",
    "installed_version",
    "missing_retry_policies",
    "release_of",
    "xcom_key_filter",
]
