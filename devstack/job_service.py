"""A stand-in remote job service: jobs that run for a scripted time, then end DONE or FAILED.

Resumable operators (Airflow's ``ResumableJobMixin``) submit a job, store its id
and poll it; what a retry must not do is submit the same work twice. This
service counts every submission, so a test or the demo can tell a reconnect from
a duplicate. It serves on 127.0.0.1 from a thread of the calling process:

* ``POST /jobs`` with ``{"id": ..., "scenario": ..., "run": ...}``: submit a job
  under a client-chosen id (``run`` groups the submissions counted together,
  the scenario's name when left out); ``201``, ``400`` for an unknown scenario or
  a bad body, ``409`` for an id already taken;
* ``GET /jobs/{id}``: ``{"id", "status", ...}``, status PENDING, RUNNING, DONE or
  FAILED; ``404`` for an id never submitted;
* ``GET /_submissions``: ``{"runs": {run: [job ids in order]}}``.

A scenario is a :class:`Script`: the n-th submission of a run follows its n-th
:class:`Step` (the last step repeats), so "fails the first time, then works" is
two steps.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any

import pendulum

from devstack.loopback import LoopbackServer

PENDING, RUNNING, DONE, FAILED = "PENDING", "RUNNING", "DONE", "FAILED"
_JOB_PATH = re.compile(r"^/jobs/(?P<id>[^/]+)$")


class DuplicateJobId(ValueError):
    """A job id submitted twice: ids are the client's, and name one job each."""


@dataclass(frozen=True)
class Step:
    """What one submitted job does.

    :param running: seconds the job is RUNNING, after ``pending``.
    :param ends: its final status, DONE or FAILED.
    :param pending: seconds the job is PENDING after its submission.
    """

    running: float
    ends: str = DONE
    pending: float = 0.2

    def __post_init__(self) -> None:
        if self.ends not in (DONE, FAILED):
            raise ValueError(f"a job ends {DONE} or {FAILED}, not {self.ends!r}")


@dataclass(frozen=True)
class Script:
    """A scenario: the n-th submission of a run follows ``steps[n]``, the last step repeats."""

    steps: tuple[Step, ...]

    def step(self, submission: int) -> Step:
        """The step of the ``submission``-th submission (0 for the first)."""
        return self.steps[min(submission, len(self.steps) - 1)]


@dataclass(frozen=True)
class Job:
    """One submitted job; its status follows from its step and the time since submission."""

    id: str
    scenario: str
    run: str
    step: Step
    submitted: float = field(default_factory=time.monotonic)
    submitted_at: pendulum.DateTime = field(default_factory=lambda: pendulum.now("UTC"))

    def status(self) -> str:
        """PENDING, RUNNING, DONE or FAILED, right now."""
        elapsed = time.monotonic() - self.submitted
        if elapsed < self.step.pending:
            return PENDING
        if elapsed < self.step.pending + self.step.running:
            return RUNNING
        return self.step.ends

    def as_json(self) -> dict[str, Any]:
        """The job as the service answers it."""
        return {
            "id": self.id,
            "status": self.status(),
            "scenario": self.scenario,
            "run": self.run,
            "submittedAt": self.submitted_at.to_iso8601_string(),
        }


class JobService:
    """The jobs and their submissions; :meth:`serve` puts them behind HTTP.

    :param scenarios: scenario name -> its script.
    """

    def __init__(self, scenarios: Mapping[str, Script]) -> None:
        self.scenarios = dict(scenarios)
        self._jobs: dict[str, Job] = {}
        self._runs: dict[str, list[str]] = {}
        self._lock = threading.Lock()
        self._server: LoopbackServer | None = None

    def submit(self, job_id: str, scenario: str, run: str | None = None) -> Job:
        """Start a job under ``job_id``.

        :raises KeyError: for an unknown scenario.
        :raises DuplicateJobId: for an id already submitted.
        """
        script = self.scenarios[scenario]
        group = run or scenario
        with self._lock:
            if job_id in self._jobs:
                raise DuplicateJobId(f"job id {job_id!r} was already submitted")
            earlier = self._runs.setdefault(group, [])
            job = Job(job_id, scenario, group, script.step(len(earlier)))
            self._jobs[job_id] = job
            earlier.append(job_id)
        return job

    def job(self, job_id: str) -> Job | None:
        """The job submitted under ``job_id``, if any."""
        with self._lock:
            return self._jobs.get(job_id)

    def submissions(self, run: str) -> list[str]:
        """The ids submitted for ``run``, in order."""
        with self._lock:
            return list(self._runs.get(run, []))

    def all_submissions(self) -> dict[str, list[str]]:
        """run -> the ids submitted for it, in order."""
        with self._lock:
            return {run: list(ids) for run, ids in self._runs.items()}

    @property
    def url(self) -> str:
        """The base URL, once serving."""
        if self._server is None:
            raise RuntimeError("the job service is not serving")
        return self._server.url

    def serve(self) -> None:
        """Serve on a free port of 127.0.0.1, from a daemon thread."""
        service = self

        class Handler(_Handler):
            jobs = service

        self._server = LoopbackServer(Handler)

    def close(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.close()
            self._server = None


class _Handler(BaseHTTPRequestHandler):
    jobs: JobService

    def do_POST(self) -> None:
        if self.path != "/jobs":
            return self._answer(HTTPStatus.NOT_FOUND, {"error": f"no {self.path}"})
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            job = self.jobs.submit(str(body["id"]), str(body["scenario"]), body.get("run"))
        except DuplicateJobId as error:
            return self._answer(HTTPStatus.CONFLICT, {"error": str(error)})
        except (ValueError, KeyError, TypeError) as error:
            return self._answer(
                HTTPStatus.BAD_REQUEST, {"error": f"{type(error).__name__}: {error}"}
            )
        return self._answer(HTTPStatus.CREATED, job.as_json())

    def do_GET(self) -> None:
        if self.path == "/_submissions":
            return self._answer(HTTPStatus.OK, {"runs": self.jobs.all_submissions()})
        found = _JOB_PATH.match(self.path)
        job = self.jobs.job(found["id"]) if found else None
        if job is None:
            return self._answer(HTTPStatus.NOT_FOUND, {"error": f"no job at {self.path}"})
        return self._answer(HTTPStatus.OK, job.as_json())

    def _answer(self, status: HTTPStatus, body: Mapping[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the submissions are the record."""


@contextmanager
def job_service(scenarios: Mapping[str, Script]) -> Iterator[JobService]:
    """A serving :class:`JobService`, stopped after."""
    service = JobService(scenarios)
    service.serve()
    try:
        yield service
    finally:
        service.close()
