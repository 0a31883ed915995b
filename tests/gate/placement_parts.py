"""What the DAGs in ``bad_dags/`` share: a deadline, a quick target and the task it guards.

Kept outside that folder so that the DAG parser does not take it for a DAG file;
the DAG files import it as ``tests.gate.placement_parts``, from the work tree.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import task

from airflow_retrywindow import Deadline, Work

DEADLINE = Deadline.after_data_interval_end(hours=6)
QUICK = Work(duration=timedelta(minutes=1), validation=timedelta(seconds=30), safe_repeat=True)
START = pendulum.datetime(2026, 1, 1, tz="UTC")


@task
def load() -> str:
    return "loaded"
