"""Which raw statuses of a resumable job mean what, by operator class.

An operator's ``is_job_active`` and ``is_job_succeeded`` classify its own statuses;
everything else the mixin resubmits. The gate does not: a status word means a
failure only for an operator that says so, because ``lost``, ``stopped`` or
``timeout`` mean different things to different services. The words come from the
DAG author (``failed_statuses=``, ``never_submitted_statuses=``) or from the
built-in mapping below, for operator classes whose ``get_job_status`` we have read
and tested. Pure: matched by class path, so nothing here imports a provider.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


def normal_status(status: str) -> str:
    """A status as compared: without case, surrounding blanks, ``-`` or spaces."""
    return status.strip().lower().replace("-", "_").replace(" ", "_")


@dataclass(frozen=True)
class StatusWords:
    """The statuses of one operator's jobs that the gate may act on, normalised.

    :param failed: statuses that confirm the job failed.
    :param never_submitted: statuses saying the service never received the job.
    """

    failed: frozenset[str] = frozenset()
    never_submitted: frozenset[str] = frozenset()

    @classmethod
    def of(cls, failed: Iterable[str] = (), never_submitted: Iterable[str] = ()) -> StatusWords:
        """The words as given, normalised for comparison."""
        return cls(
            frozenset(normal_status(s) for s in failed),
            frozenset(normal_status(s) for s in never_submitted),
        )

    def __or__(self, other: StatusWords) -> StatusWords:
        return StatusWords(self.failed | other.failed, self.never_submitted | other.never_submitted)


#: no words: only the operator's own predicates classify
NO_WORDS = StatusWords()

#: what the google provider's ``BigQueryInsertJobOperator.get_job_status`` returns for a
#: DONE job with an ``errorResult``; its ``not_found`` stays unknown: a job looked up in
#: another project or location is not found either
BIGQUERY_INSERT_JOB = StatusWords.of(failed=["error"])

#: built-in words by the operator class that defines ``get_job_status``
BUILT_IN: dict[str, StatusWords] = {
    "airflow.providers.google.cloud.operators.bigquery.BigQueryInsertJobOperator": (
        BIGQUERY_INSERT_JOB
    ),
}


def built_in_words(task: Any) -> StatusWords:
    """The built-in words for ``task``'s class, when the class reads statuses as one we know.

    A subclass inherits them only while it keeps the known ``get_job_status``: one
    that reads statuses its own way must declare its words.
    """
    reads = getattr(type(task), "get_job_status", None)
    for cls in type(task).__mro__:
        words = BUILT_IN.get(f"{cls.__module__}.{cls.__qualname__}")
        if words is not None and cls.__dict__.get("get_job_status") is reads:
            return words
    return NO_WORDS
