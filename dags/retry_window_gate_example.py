"""Daily fund-positions delivery, its retries decided by a gate and a sensor alone.

The shape that needs no retry policy, so it runs on every Airflow the package supports
(3.1 and later); ``retry_window_example`` shows the retry policy of Airflow 3.3. Each
decision is a record in the deciding task's XCom, which the "Retry window" view shows.

* ``extract_positions`` succeeds: its output still needs validation;
* ``load`` fails with a retryable error. ``load_retry_window``, a deferrable sensor,
  waits out its 40 s backoff in the triggerer, then lets ``retry_load`` run;
* ``archive`` runs out of attempts; ``transform`` would take seven hours, more than the
  six from the run's trigger to its deadline;
* ``retry_gate``, once ``retry_load`` ran, publishes the decision table for the run and
  short-circuits ``rerun_everything``: the request to "just re-run everything". Its
  ``RetryWindowNotifier`` writes the table's summary to the task log.

The estimates are the gate's and the sensor's own ``Work``: where no retry policy
supplies them, they are stated where the decision is taken.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import DAG, task

from airflow_retrywindow import (
    Deadline,
    RetryWindowGateOperator,
    RetryWindowNotifier,
    RetryWindowSensor,
    Work,
)
from airflow_retrywindow.notifications.message import Message

try:
    from airflow.sdk.exceptions import AirflowFailException
except ImportError:  # Airflow 3.1 keeps it in airflow.exceptions only
    from airflow.exceptions import AirflowFailException

DAG_ID = "retry_window_gate_example"


def delivery_deadline(context: Any) -> pendulum.DateTime:
    """Six hours after the run was triggered: a run triggered by hand has no data interval.

    In production it would be a business time such as
    ``Deadline.daily_at("06:00", tz="Europe/Lisbon")``.
    """
    return pendulum.instance(context["dag_run"].run_after).add(hours=6)


DEADLINE = Deadline.computed(delivery_deadline)
QUICK = Work(duration=timedelta(minutes=1), validation=timedelta(seconds=30), safe_repeat=True)
#: load's backoff: what is left of it when the sensor starts, even 30 s late on a busy
#: machine, is longer than the wait a sensor sleeps in its worker ([retry_window]
#: sensor_short_wait, 10 s), so the sensor defers it to the triggerer
LOAD_BACKOFF = timedelta(seconds=40)


def tell(message: Message, context: Any) -> None:
    """The notifier's channel here: the task log. A team hands it ``SmtpNotifier``, Slack's..."""
    context["ti"].log.info("%s\n%s", message.subject, message.text)


with DAG(
    DAG_ID,
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    doc_md=__doc__,
    tags=["retry-window", "example"],
):

    @task
    def extract_positions() -> str:
        return "positions extracted"

    # AirflowFailException ends the try for good: the retry is retry_load's to run, once
    # the sensor let it through
    @task(retries=1, retry_delay=LOAD_BACKOFF)
    def load() -> None:
        raise AirflowFailException("the warehouse dropped the connection; retry after the backoff")

    @task(retries=0)
    def archive() -> None:
        raise RuntimeError("archive bucket unavailable")

    @task(retries=1, retry_delay=timedelta(seconds=1))
    def transform() -> None:
        raise AirflowFailException("transform failed; it takes seven hours to run again")

    load_retry_window = RetryWindowSensor(
        task_id="load_retry_window",
        target="load",
        work=QUICK,
        deadline=DEADLINE,
        deferrable=True,
        timeout=300,
        trigger_rule="all_done",
    )

    @task
    def retry_load() -> str:
        return "positions loaded"

    retry_gate = RetryWindowGateOperator(
        task_id="retry_gate",
        targets={
            "extract_positions": QUICK,
            "load": QUICK,
            "archive": QUICK,
            "transform": Work(duration=timedelta(hours=7), validation=60, safe_repeat=True),
        },
        deadline=DEADLINE,
        guard={"rerun_everything": "archive"},
        # from run_after: a run triggered without a logical date has no ``ds``
        work_unit={
            "business_date": "{{ dag_run.run_after.strftime('%Y-%m-%d') }}",
            "destination": "warehouse.fund_positions",
        },
        on_success_callback=RetryWindowNotifier(tell),
        trigger_rule="all_done",
    )

    @task
    def rerun_everything() -> str:
        return "never: archive has no attempt left"

    retried = retry_load()
    extract_positions() >> load() >> load_retry_window >> retried
    # after the retry the sensor let through: load's backoff is over when the gate decides
    [retried, archive(), transform()] >> retry_gate >> rerun_everything()
