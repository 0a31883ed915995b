"""Start check: whether a failed try's retry-start check ran, kept with the policy's decision.

The retry-start check (:mod:`airflow_retrywindow.policies.retry_start`) is what
refuses a retry nobody decided. The cluster policy installs it where it parses
the DAG; on a worker whose ``[retry_window] policy_checks`` is ``off`` (or that
does not load the provider's cluster policy) it is missing, while the DAG
processor, set to ``enforce``, still checked the DAG. Each decision the policy
takes when a try fails therefore keeps, under :data:`KEY`, whether that try's
check ran, whether it was installed, and the worker's ``policy_checks``: the view
flags a try whose check did not run, so a setting that differs between
components is visible, not silent.

Entries stored before this record existed have no ``startCheck``: nothing is
known of them and nothing is flagged. Nothing here imports Airflow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_retrywindow.exceptions import RecordError

#: the evidence entry's key
KEY = "startCheck"


@dataclass(frozen=True)
class StartCheck:
    """Whether one try's retry-start check ran.

    :param ran: it ran before the try's code (it let the try run).
    :param installed: the worker's copy of the task carries it.
    :param policy_checks: the worker's ``[retry_window] policy_checks``, as it read it.
    """

    ran: bool
    installed: bool
    policy_checks: str | None

    def as_dict(self) -> dict[str, Any]:
        """The entry as stored."""
        return {"ran": self.ran, "installed": self.installed, "policyChecks": self.policy_checks}

    @classmethod
    def of(cls, stored: object) -> StartCheck:
        """The entry read back.

        :raises RecordError: naming the field and the value when it cannot be read.
        """
        if not isinstance(stored, Mapping):
            raise RecordError(KEY, stored, "must be an object")
        ran, installed = stored.get("ran"), stored.get("installed")
        mode = stored.get("policyChecks")
        if not isinstance(ran, bool):
            raise RecordError(f"{KEY}.ran", ran, "must be true or false")
        if not isinstance(installed, bool):
            raise RecordError(f"{KEY}.installed", installed, "must be true or false")
        if mode is not None and not isinstance(mode, str):
            raise RecordError(f"{KEY}.policyChecks", mode, "must be text")
        return cls(ran=ran, installed=installed, policy_checks=mode)

    def warning(self, try_number: object) -> str | None:
        """Why the try ran without the check, in one sentence; ``None`` when it ran."""
        if self.ran:
            return None
        if not self.installed:
            why = (
                "the worker that ran it has no retry-start check installed "
                f"([retry_window] policy_checks = {self.policy_checks!r} there, or the "
                "provider's cluster policy is not loaded)"
            )
        else:
            why = "the try failed before its pre_execute hooks ran"
        return (
            f"The retry-start check did not run in try {try_number}: {why}. A retry that "
            "Airflow starts on its own (a killed process, a lost heartbeat) then runs "
            "undecided; set [retry_window] policy_checks alike on every component."
        )


def start_check_of(entry: Mapping[str, Any]) -> StartCheck | None:
    """The ``startCheck`` of a stored decision; ``None`` when it has none.

    :raises RecordError: naming the field and the value when it cannot be read.
    """
    if KEY not in entry:
        return None
    return StartCheck.of(entry[KEY])
