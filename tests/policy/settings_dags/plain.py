"""A DAG with no gated task: loads whatever the [retry_window] settings hold."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, task

with DAG("rw_settings_plain", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):

    @task(retries=2)
    def load():  # type: ignore[no-untyped-def]
        return None

    load()
