"""The state of a task's latest attempt, as its state source reported it."""

from __future__ import annotations

# an Enum for the reasons Decision is one (model/decisions.py)
from enum import Enum


class TaskState(str, Enum):
    """What the state source last said about a task's latest attempt.

    ``unknown`` is not a failure: a lost response or a timeout after submission
    leaves the remote outcome open, so it has to be reconciled before anything else.
    """

    RUNNING = "running"
    UNKNOWN = "unknown"
    SUCCEEDED = "succeeded"
    RETRYABLE = "retryable"
    TERMINAL = "terminal"

    def __str__(self) -> str:
        return self.value

    @property
    def completion_confirmed(self) -> bool:
        """Whether the latest attempt has a confirmed end (``lastFinishedAt``)."""
        return self is not TaskState.RUNNING and self is not TaskState.UNKNOWN
