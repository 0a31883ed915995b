"""The schema version every stored record carries, and what a reader makes of it.

A record written by this release has ``"schemaVersion": 1``. Records of earlier
releases carry no version: they are version 0, and readers accept them. A record
whose version is newer than this release knows is reported as such ("not a
shape this release reads"), never guessed at, and never a crash.

Version 1 adds to version 0's shape only: the version itself, and in the evidence
a ``reconciliation`` of a resumable job and the ``run`` and ``reschedule``
actions of the retry-start check; a failed try's decision may also carry its
``startCheck`` (:mod:`~airflow_retrywindow.records.start_check`), which readers of
entries without it do without.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: the key that holds a record's schema version
VERSION_KEY = "schemaVersion"
#: the shape this release writes
SCHEMA_VERSION = 1
#: what an unversioned record is: written before records carried a version
UNVERSIONED = 0
#: what a stored value is called that has the shape of none of the provider's records
NOT_A_RECORD = "not a retry window record"


def stamped(record: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` with this release's schema version, first among its keys."""
    return {VERSION_KEY: SCHEMA_VERSION, **record}


def version_problem(record: Mapping[str, Any]) -> str | None:
    """Why ``record`` is not of a shape this release reads, or ``None`` when it is.

    :param record: a stored record (evidence entry or decision record).
    """
    version = record.get(VERSION_KEY, UNVERSIONED)
    if isinstance(version, bool) or not isinstance(version, int) or version < UNVERSIONED:
        return f"its {VERSION_KEY} is {version!r}, not a version number"
    if version > SCHEMA_VERSION:
        return (
            f"it has {VERSION_KEY} {version}, newer than this release reads "
            f"(up to {SCHEMA_VERSION}): upgrade airflow-retrywindow to read it"
        )
    return None
