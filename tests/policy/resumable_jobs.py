"""A resumable-job operator over an in-memory job service, and the worker's stand-ins.

The stand-ins (the task state store, the runtime task instance) serve every
in-process test of the policy and the retry-start check.

The operator is a real Airflow ``ResumableJobMixin``; only the external job service
is made up (it is the one part we must never touch). The service counts every
call, so a test can show that the gate itself submits, cancels and polls nothing.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import DAG, BaseOperator, ResumableJobMixin

from airflow_retrywindow import Deadline, RetryWindowPolicy

START = pendulum.datetime(2026, 3, 1, tz="UTC")


@dataclass
class Jobs:
    """An in-memory job service: statuses by job id, and a count of every call."""

    statuses: dict[str, str] = field(default_factory=dict)
    calls: Counter[str] = field(default_factory=Counter)
    #: what get_job_status does instead of answering: an exception to raise, or seconds to hang
    broken: BaseException | float | None = None

    def submit(self, job_id: str) -> str:
        self.calls["submit"] += 1
        self.statuses[job_id] = "RUNNING"
        return job_id

    def status(self, job_id: str) -> str:
        self.calls["status"] += 1
        if isinstance(self.broken, BaseException):
            raise self.broken
        if isinstance(self.broken, float):
            time.sleep(self.broken)
        return self.statuses.get(job_id, "NOT_FOUND")


class JobOperator(ResumableJobMixin, BaseOperator):
    """Submits one job to :class:`Jobs` and waits for it, reconnecting on the next try."""

    external_id_key = "stand_in_job_id"
    # the service is the outside world: a copy of the operator talks to the same one
    shallow_copy_attrs = ("jobs",)

    def __init__(self, *, jobs: Jobs, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.jobs = jobs

    def execute(self, context: Any) -> Any:
        return self.execute_resumable(context)

    def submit_job(self, context: Any) -> str:
        return self.jobs.submit(f"load_a{context['ti'].try_number}")

    def get_job_status(self, external_id: Any, context: Any) -> str:
        return self.jobs.status(str(external_id))

    def is_job_active(self, status: str) -> bool:
        return status in ("PENDING", "RUNNING")

    def is_job_succeeded(self, status: str) -> bool:
        return status == "DONE"

    def poll_until_complete(self, external_id: Any, context: Any) -> None:
        self.jobs.calls["poll"] += 1

    def get_job_result(self, external_id: Any, context: Any) -> Any:
        return None

    def on_kill(self) -> None:
        self.jobs.calls["cancel"] += 1


class Store:
    """The task state store's get/set, in memory."""

    def __init__(self, broken: bool = False) -> None:
        self.values: dict[str, Any] = {}
        self.broken = broken

    def get(self, key: str, default: Any = None) -> Any:
        if self.broken:
            raise ConnectionError("task state store unreachable")
        return self.values.get(key, default)

    def set(self, key: str, value: Any) -> None:
        self.values[key] = value


class TaskInstance:
    """What the policy and the check read of Airflow's runtime task instance."""

    def __init__(
        self, try_number: int, max_tries: int, *, dag_version_id: str = "version-1"
    ) -> None:
        self.try_number = try_number
        self.max_tries = max_tries
        self.run_id = "manual__2026-03-01"
        self.task_id = "load"
        self.map_index = -1
        self.dag_version_id = dag_version_id
        self.xcom: dict[str, Any] = {}
        self.stats_tags: dict[str, str] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value


def policy(**overrides: Any) -> RetryWindowPolicy:
    values: dict[str, Any] = {
        "deadline": Deadline.after_data_interval_start(hours=6),
        "duration": timedelta(minutes=2),
        "validation": timedelta(minutes=1),
        "safe_repeat": True,
        # the in-memory service's word for a failed job, declared as an operator's must be
        "failed_statuses": ["FAILED"],
    }
    values.update(overrides)
    return RetryWindowPolicy(**values)


def job_operator(
    jobs: Jobs, gate: RetryWindowPolicy, *, retries: int = 3, retry_delay: float = 30
) -> JobOperator:
    """A gated job operator with the retry-start check installed, as the cluster policy does."""
    from airflow_retrywindow.policies.cluster_policy import task_policy

    with DAG("rw_resumable", schedule=None, start_date=START):
        task = JobOperator(
            task_id="load",
            jobs=jobs,
            retries=retries,
            retry_delay=timedelta(seconds=retry_delay),
            retry_policy=gate,
        )
    task_policy(task)
    return task


def context(task: Any, *, try_number: int, store: Store, max_tries: int = 3) -> dict[str, Any]:
    now = pendulum.now("UTC")
    return {
        "task": task,
        "ti": TaskInstance(try_number, max_tries),
        "task_state_store": store,
        "data_interval_start": now.subtract(minutes=5),
        "data_interval_end": now,
    }
