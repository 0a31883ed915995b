"""DAGs whose tries end the ways the scheduler sees: killed, lost, timed out, failed, leaking.

Every body appends one line to ``conf["counter"]`` before anything else, so a
test counts how often the task's own code ran. Each run's deadline is
``run_after + conf["deadline_in"]`` seconds, as in the policy case DAGs.
"""

from __future__ import annotations

import json
import os
import signal
import time
from datetime import timedelta
from pathlib import Path

from airflow.sdk import task
from counted_tries import count as _count
from counted_tries import deadline_in as _deadline
from counted_tries import test_dag as _dag

from airflow_retrywindow import Deadline, RetryWindowPolicy

#: the secret the leaking task registers with the masker (set by the test, never in the DB)
SECRET_ENV = "RW_SCHEDULER_PATHS_SECRET"


def _policy():  # type: ignore[no-untyped-def]
    return RetryWindowPolicy(
        deadline=Deadline.computed(_deadline),
        duration=timedelta(seconds=1),
        validation=timedelta(seconds=1),
        safe_repeat=True,
        unknown=[TimeoutError],
    )


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()


with _dag("rw_sched_sigkill"):

    @task(retries=2, retry_delay=timedelta(seconds=1), retry_policy=_policy())
    def killed(**context):  # type: ignore[no-untyped-def]
        # the OOM killer's way: the task process dies, its supervisor reports the exit
        if _count(context) == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        return "ran again"

    killed()

with _dag("rw_sched_heartbeat"):

    @task(retries=2, retry_delay=timedelta(seconds=1), retry_policy=_policy())
    def lost(**context):  # type: ignore[no-untyped-def]
        # a lost node's way: the supervisor (the LocalExecutor worker process that
        # forked this task process) dies with the task, so nobody reports the end and
        # only the scheduler's heartbeat-timeout detection notices
        if _count(context) == 1:
            supervisor = os.getppid()
            Path(context["dag_run"].conf["pids"]).write_text(
                json.dumps(
                    {
                        "task": os.getpid(),
                        "task_pgid": os.getpgid(0),
                        "supervisor": supervisor,
                        "supervisor_cmdline": _cmdline(supervisor),
                    }
                )
            )
            os.kill(supervisor, signal.SIGKILL)
            os.kill(os.getpid(), signal.SIGKILL)
        return "ran again"

    lost()

with _dag("rw_sched_exec_timeout"):

    @task(
        retries=2,
        retry_delay=timedelta(seconds=1),
        execution_timeout=timedelta(seconds=2),
        retry_policy=_policy(),
    )
    def slow(**context):  # type: ignore[no-untyped-def]
        _count(context)
        time.sleep(30)

    slow()

with _dag("rw_sched_retry"):

    @task(
        retries=3,
        retry_delay=timedelta(seconds=1),
        retry_exponential_backoff=2,
        retry_policy=_policy(),
    )
    def flaky(**context):  # type: ignore[no-untyped-def]
        if _count(context) < 3:
            raise ConnectionError("connection reset by the warehouse")
        return "loaded"

    flaky()

with _dag("rw_sched_secret"):

    @task(retries=1, retry_delay=timedelta(seconds=1), retry_policy=_policy())
    def leaky(**context):  # type: ignore[no-untyped-def]
        # the import Airflow 3.3 documents for DAG authors (airflow.sdk exports none)
        from airflow.sdk.log import mask_secret

        secret = os.environ[SECRET_ENV]
        mask_secret(secret)
        _count(context)
        raise ConnectionError(f"GET https://api.example.test/v1?api_key={secret} failed")

    leaky()
