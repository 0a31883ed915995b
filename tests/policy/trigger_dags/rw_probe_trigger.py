"""A trigger that ends its task itself, and counts how often it ran.

It lives outside the DAG file so the triggerer imports it without parsing a DAG:
the test puts the DAG folder on ``PYTHONPATH`` of every service, so its
classpath is ``rw_probe_trigger.ProbeTrigger`` everywhere.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TaskFailedEvent, TaskSuccessEvent, TriggerEvent

#: seconds a trigger runs before it ends its task: Airflow 3.3.2 fails a task whose trigger
#: fires before the scheduler has taken in the exit of the try that deferred, which took
#: up to 6 s on a loaded machine ("finished with state success, but ... queued")
FIRE_AFTER = 15


class ProbeTrigger(BaseTrigger):
    """Append one line to ``counter``, then end the task: failed or successful.

    :param counter: the file each run appends a line to.
    :param try_number: the try that deferred, written in the line.
    :param fail: end the task with ``TaskFailedEvent`` (else ``TaskSuccessEvent``).
    :param fire_after: seconds before it ends the task.
    """

    def __init__(
        self, counter: str, try_number: int, fail: bool, fire_after: float = FIRE_AFTER
    ) -> None:
        super().__init__()
        self.counter = counter
        self.try_number = try_number
        self.fail = fail
        self.fire_after = fire_after

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "rw_probe_trigger.ProbeTrigger",
            {
                "counter": self.counter,
                "try_number": self.try_number,
                "fail": self.fail,
                "fire_after": self.fire_after,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        with open(self.counter, "a") as out:
            out.write(f"trigger try {self.try_number} fail {self.fail}\n")
        await asyncio.sleep(self.fire_after)
        if self.fail:
            # as end_from_trigger triggers report a remote job that failed
            yield TaskFailedEvent(xcoms={"probe_job_state": "FAILED"})
        else:
            yield TaskSuccessEvent()
