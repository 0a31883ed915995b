"""Which Airflow is installed, and the names that differ between its minors.

The provider supports Airflow 3.1, 3.2 and 3.3 (``pyproject.toml``). This is the one
module that reads the installed Airflow's version and decides by it: every name Airflow
moved between those minors (:data:`MOVED`, newest first, as Airflow's own providers keep
their ``version_compat.py``) and every behaviour that differs by minor. Other modules
import the names from here and never compare versions, parse one or switch on an
``ImportError`` themselves (tests/package/test_version_compat.py checks that).

The version comes from the installed distribution's metadata, which imports no Airflow,
and so does importing this module: each moved name is imported where this Airflow keeps
it on its first use. A DAG file that imports the package before Airflow would otherwise
load Airflow from here, whose start loads the provider's cluster policy, whose settings
check reads the configuration through this module while it is still half loaded.
"""

from __future__ import annotations

import functools
import importlib
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.sdk import ResumableJobMixin, RetryDecision, RetryPolicy, conf
    from airflow.sdk.exceptions import (
        AirflowFailException,
        AirflowNotFoundException,
        AirflowRescheduleException,
        AirflowSensorTimeout,
        AirflowSkipException,
        TaskDeferred,
    )
    from airflow.sdk.observability.stats import Stats

    DeadlineReference: Any  # exported by airflow.sdk, though its type stub leaves it out

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
    count them: ``3.3.0rc1`` has retry policies, and a fix released in ``3.2.2`` is taken
    to be in ``3.2.2rc1`` (the release is its last candidate).
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

#: the Task SDK's exceptions, which 3.1 keeps in the core
_EXCEPTIONS = (
    "AirflowFailException",
    "AirflowNotFoundException",
    "AirflowRescheduleException",
    "AirflowSensorTimeout",
    "AirflowSkipException",
    "TaskDeferred",
)
#: each name that moved, and where each minor keeps it: (the first minor, its module),
#: newest first. A name with no entry for the installed minor is missing there (below).
MOVED: dict[str, tuple[tuple[tuple[int, int, int], str], ...]] = {
    # the Task SDK's configuration, metrics and deadline references arrived in 3.2
    "conf": (((3, 2, 0), "airflow.sdk"), ((3, 1, 0), "airflow.configuration")),
    "Stats": (((3, 2, 0), "airflow.sdk.observability.stats"), ((3, 1, 0), "airflow.stats")),
    "DeadlineReference": (
        ((3, 2, 0), "airflow.sdk"),
        ((3, 1, 0), "airflow.sdk.definitions.deadline"),
    ),
    **{
        name: (((3, 2, 0), "airflow.sdk.exceptions"), ((3, 1, 0), "airflow.exceptions"))
        for name in _EXCEPTIONS
    },
    # retry policies (AIP-105) and resumable jobs (AIP-103) arrived in 3.3
    "RetryDecision": (((3, 3, 0), "airflow.sdk"),),
    "RetryPolicy": (((3, 3, 0), "airflow.sdk"),),
    "ResumableJobMixin": (((3, 3, 0), "airflow.sdk"),),
}


class _MissingRetryPolicy:
    """Airflow 3.3's base of retry policies, which this Airflow does not have.

    It only lets RetryWindowPolicy's module import on an earlier Airflow, where building
    one refuses (:func:`missing_retry_policies`) before anything could use it.
    """


class _MissingRetryDecision:
    """Airflow 3.3's answer of a retry policy, which this Airflow does not have."""


#: what stands in for a name this Airflow does not have yet: ``None`` says "absent"
MISSING: dict[str, Any] = {
    "RetryPolicy": _MissingRetryPolicy,
    "RetryDecision": _MissingRetryDecision,
    "ResumableJobMixin": None,  # no operator of this Airflow keeps a remote job's id
}


def module_of(name: str) -> str | None:
    """The module this Airflow keeps ``name`` in, ``None`` when it has none yet."""
    release = release_of(installed_version())
    return next((module for since, module in MOVED[name] if release >= since), None)


def __getattr__(name: str) -> Any:
    """A moved name, imported from where this Airflow keeps it on its first use."""
    if name not in MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = module_of(name)
    found = MISSING[name] if module is None else getattr(importlib.import_module(module), name)
    globals()[name] = found  # later lookups skip this hook
    return found


@functools.cache
def builtin_deadline_references() -> frozenset[type]:
    """The classes of the Task SDK's own deadline references, made through
    ``DeadlineReference``'s public names (a subclass of one is custom code)."""
    reference = __getattr__("DeadlineReference")
    made = [
        reference.DAGRUN_LOGICAL_DATE,
        reference.DAGRUN_QUEUED_AT,
        reference.FIXED_DATETIME(datetime(2000, 1, 1, tzinfo=timezone.utc)),
    ]
    if AIRFLOW_V_3_2_PLUS:  # the average runtime arrived in 3.2
        made.append(reference.AVERAGE_RUNTIME())
    return frozenset(type(built) for built in made)


def sdk_asks_lists_as_chains() -> bool:
    """Whether this Airflow's SDK has ``ChainRetryPolicy`` (3.4 on), and so asks a task's
    list of retry policies as a chain; earlier, a list is an object it calls ``evaluate`` on."""
    import airflow.sdk

    return hasattr(airflow.sdk, "ChainRetryPolicy")


def xcom_key_filter(prefix: str) -> dict[str, Any]:
    """The query parameters that list the XCom keys starting with ``prefix``.

    3.2 added a prefix filter, which an index serves, and an order; 3.1 has a ``LIKE``
    pattern only, in which ``_`` matches any character: the caller keeps exact matches.
    """
    if AIRFLOW_V_3_2_PLUS:
        return {"xcom_key_prefix_pattern": prefix, "order_by": ["task_id", "key"]}
    return {"xcom_key_pattern": f"{prefix}%"}


def scheduler_fixed(fixed_in: str, scheduler_version: str) -> bool:
    """Whether a scheduler of ``scheduler_version`` has a fix first released in ``fixed_in``;
    a version that cannot be read is taken not to have it.

    :param fixed_in: the first Airflow release with the fix, e.g. ``"3.2.2"``.
    :param scheduler_version: the scheduler's Airflow, as the API server reports it.
    """
    version = release_of(scheduler_version)
    return version != (0, 0, 0) and version >= release_of(fixed_in)


__all__ = [
    "AIRFLOW_V_3_2_PLUS",
    "AIRFLOW_V_3_3_PLUS",
    "MISSING",
    "MOVED",
    "AirflowFailException",
    "AirflowNotFoundException",
    "AirflowRescheduleException",
    "AirflowSensorTimeout",
    "AirflowSkipException",
    "DeadlineReference",
    "ResumableJobMixin",
    "RetryDecision",
    "RetryPolicy",
    "Stats",
    "TaskDeferred",
    "builtin_deadline_references",
    "conf",
    "installed_version",
    "missing_retry_policies",
    "module_of",
    "release_of",
    "scheduler_fixed",
    "xcom_key_filter",
]
