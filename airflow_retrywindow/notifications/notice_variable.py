"""The Airflow Variable that says which outage of a pool was told: read and written.

See :mod:`airflow_retrywindow.notifications.outage` for what it holds and how it
keeps an outage to one notice. Every worker reads it through the task runner, as
the retry-start check reads the Variable that forces a pool's state.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from airflow_retrywindow.notifications.outage import NOTICE_VARIABLE


class NoticeStore(Protocol):
    """Where the outage told last is kept per pool, seen alike by every worker."""

    def read(self, pool: str) -> object:
        """The entry kept for ``pool``, ``None`` when there is none."""

    def write(self, pool: str, entry: dict[str, Any]) -> None:
        """Keep ``entry`` for ``pool``."""


class NoticeVariable:
    """The Airflow Variable ``retry_window_notice_<pool>``, a JSON object."""

    def read(self, pool: str) -> object:
        """The entry kept for ``pool``, ``None`` when unset; text that is not JSON as is."""
        from airflow.sdk import Variable

        value = Variable.get(NOTICE_VARIABLE.format(pool=pool), default=None)
        if not isinstance(value, str):
            return value
        try:
            return json.loads(value)
        except ValueError:
            return value

    def write(self, pool: str, entry: dict[str, Any]) -> None:
        """Keep ``entry`` for ``pool``, as JSON."""
        from airflow.sdk import Variable

        Variable.set(
            NOTICE_VARIABLE.format(pool=pool),
            json.dumps(entry, sort_keys=True),
            description="the outage of this pool last told by RetryWindowNotifier",
        )
