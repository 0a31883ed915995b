"""A resumable operator over the stand-in job service (``devstack/job_service.py``).

``StandInJobOperator`` is Airflow's ``ResumableJobMixin`` as a provider would
write it: submit a job, store its id, poll it; on a retry, reconnect to the
stored job when it is still active. Everything it needs comes from the run's
conf:

* ``job_service``: the service's base URL;
* ``scenario``: the script the service plays for this run's jobs;
* ``fault``: what goes wrong on try 1, if anything. ``"kill-during-poll"``: the
  task process is SIGKILLed at the first poll that sees its job active, as when a
  worker is lost while the job runs. ``"kill-after-submit"``: it is SIGKILLed
  right after the service accepted the job and before the mixin stores the job's
  id (the window the mixin documents as its known limitation).
  ``"terminal-during-poll"``: the first poll that sees its job active raises
  ``TerminalFailure``, so the try fails for good while its job runs on;
* ``faults``: the same per try number, e.g. ``{"2": "kill-during-poll"}``.
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

from airflow.sdk import BaseOperator, ResumableJobMixin

KILL_DURING_POLL = "kill-during-poll"
KILL_AFTER_SUBMIT = "kill-after-submit"
TERMINAL_DURING_POLL = "terminal-during-poll"
NOT_FOUND = "not_found"


class StandInJobFailed(RuntimeError):
    """The stand-in job ended FAILED: an ordinary, retryable failure."""


def _conf(context: Any) -> dict[str, Any]:
    return dict(context["dag_run"].conf or {})


def _request(context: Any, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        _conf(context)["job_service"] + path,
        data,
        {"Content-Type": "application/json"},
        method=method,
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


class StandInJobOperator(ResumableJobMixin, BaseOperator):
    """Run one stand-in job to its end; reconnect to it after a lost try."""

    external_id_key = "stand_in_job_id"
    #: seconds between two status reads while the job is active
    poll_interval = 0.5

    def execute(self, context: Any) -> Any:
        return self.execute_resumable(context)

    def submit_job(self, context: Any) -> str:
        ti = context["ti"]
        job_id = f"{ti.dag_id}.try{ti.try_number}.{uuid.uuid4().hex[:8]}"
        body = {"id": job_id, "scenario": _conf(context)["scenario"], "run": _run(context)}
        _request(context, "POST", "/jobs", body)
        self.log.info("Submitted stand-in job %s", job_id)
        if self._fault(context) == KILL_AFTER_SUBMIT:
            self._die(f"job {job_id} was submitted and its id is not stored yet")
        return job_id

    def get_job_status(self, external_id: Any, context: Any) -> str:
        try:
            return str(_request(context, "GET", f"/jobs/{external_id}")["status"])
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return NOT_FOUND
            raise

    def is_job_active(self, status: str) -> bool:
        return status in ("PENDING", "RUNNING")

    def is_job_succeeded(self, status: str) -> bool:
        return status == "DONE"

    def poll_until_complete(self, external_id: Any, context: Any) -> None:
        while True:
            status = self.get_job_status(external_id, context)
            if self.is_job_succeeded(status):
                self.log.info("Stand-in job %s is DONE", external_id)
                return
            if not self.is_job_active(status):
                raise StandInJobFailed(f"stand-in job {external_id} ended {status}")
            if self._fault(context) == KILL_DURING_POLL:
                self._die(f"job {external_id} is {status}")
            if self._fault(context) == TERMINAL_DURING_POLL:
                from airflow_retrywindow import TerminalFailure

                raise TerminalFailure(f"given up on job {external_id} while it is {status}")
            time.sleep(self.poll_interval)

    def get_job_result(self, external_id: Any, context: Any) -> Any:
        return {"id": external_id, "status": self.get_job_status(external_id, context)}

    @staticmethod
    def _fault(context: Any) -> str | None:
        """The fault to inject now: ``faults`` names it per try, ``fault`` for try 1."""
        conf, try_number = _conf(context), int(context["ti"].try_number)
        fault = dict(conf.get("faults") or {}).get(str(try_number))
        if fault is None and try_number == 1:
            fault = conf.get("fault")
        return str(fault) if fault else None

    def _die(self, why: str) -> None:
        self.log.warning("Killing the task process with SIGKILL: %s", why)
        os.kill(os.getpid(), signal.SIGKILL)


def _run(context: Any) -> str:
    """What the service counts this run's submissions under."""
    ti = context["ti"]
    return f"{ti.dag_id}/{ti.run_id}"
