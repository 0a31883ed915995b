"""A gated deferrable operator whose trigger ends the task with a failure.

``ProbeOperator`` defers from ``execute`` to ``ProbeTrigger``, which fails the
task (``TaskFailedEvent``) on the tries listed in ``fail_on_tries`` and succeeds
on the others. Each run's deadline is ``run_after + conf["deadline_in"]``
seconds, and every trigger run appends a line to ``conf["counter"]``.

The policy lists the provider's ``TriggerEndedWithFailure`` (what the retry
policy sees for such a failure) as retryable explicitly, so the decisions here
do not depend on the default class for it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import DAG, BaseOperator
from rw_probe_trigger import FIRE_AFTER, ProbeTrigger

from airflow_retrywindow import Deadline, RetryWindowPolicy

START = pendulum.datetime(2026, 1, 1, tz="UTC")


def _deadline(context):  # type: ignore[no-untyped-def]
    run = context["dag_run"]
    return run.run_after + timedelta(seconds=float(run.conf["deadline_in"]))


class ProbeOperator(BaseOperator):
    """Defer to :class:`ProbeTrigger`; end with what the trigger reported.

    :param fail_on_tries: the tries whose trigger fails the task.
    :param fire_after: seconds the trigger runs before it ends the task.
    """

    def __init__(
        self, *, fail_on_tries: list[int], fire_after: float = FIRE_AFTER, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.fail_on_tries = fail_on_tries
        self.fire_after = fire_after

    def execute(self, context: Any) -> None:
        try_number = int(context["ti"].try_number)
        self.defer(
            trigger=ProbeTrigger(
                counter=context["dag_run"].conf["counter"],
                try_number=try_number,
                fail=try_number in self.fail_on_tries,
                fire_after=self.fire_after,
            ),
            method_name="execute_complete",
        )

    def execute_complete(self, context: Any, event: Any = None) -> Any:
        return event


with DAG(
    "rw_trigger_failed_event",
    schedule=None,
    start_date=START,
    catchup=False,
    tags=["retry-window-test"],
):
    ProbeOperator(
        task_id="watch_job",
        fail_on_tries=[1],
        retries=1,
        retry_delay=timedelta(seconds=1),
        retry_policy=RetryWindowPolicy(
            deadline=Deadline.computed(_deadline),
            duration=timedelta(minutes=5),
            validation=timedelta(seconds=1),
            safe_repeat=True,
            retryable=["airflow_retrywindow.triggers.gated.TriggerEndedWithFailure"],
        ),
    )


# A trigger that fires within 2 s of the deferral: Airflow 3.3.2's scheduler may fail the
# try by its race before the worker does; either way the retry is decided by the model.
with DAG(
    "rw_trigger_fires_fast",
    schedule=None,
    start_date=START,
    catchup=False,
    tags=["retry-window-test"],
):
    ProbeOperator(
        task_id="watch_job",
        fail_on_tries=[1],
        fire_after=0.5,
        # room for a try lost to the race, and one more, before the tries run out
        retries=3,
        retry_delay=timedelta(seconds=1),
        retry_policy=RetryWindowPolicy(
            deadline=Deadline.computed(_deadline),
            duration=timedelta(seconds=30),
            validation=timedelta(seconds=1),
            safe_repeat=True,
            retryable=["airflow_retrywindow.triggers.gated.TriggerEndedWithFailure"],
        ),
    )
