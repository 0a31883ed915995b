"""The jobs of the BigQuery stand-in: what each one is scripted to do, and how it reads.

A test scripts jobs by job id prefix (a :class:`JobScript`); :class:`JobBook` holds
the jobs inserted so far, answers for them as the BigQuery jobs API would (the
``Job`` and ``GetQueryResultsResponse`` resources) and counts the submissions:
the inserts that created a job, apart from those refused as duplicates.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import pendulum

PENDING, RUNNING, DONE = "PENDING", "RUNNING", "DONE"
#: how a job ends: DONE clean, DONE with ``status.errorResult``, DONE with only non-fatal errors
ENDINGS = ("success", "error", "warnings")
#: what the client gets back from the insert that creates the job
INSERT_RESPONSES = ("answer", "drop", "error-500")
#: what the client gets back from ``jobs.getQueryResults`` (the poll) while the job is not DONE
POLL_RESPONSES = ("answer", "drop")
DEFAULT_LOCATION = "US"
_JOB_TYPES = ("query", "load", "copy", "extract")


@dataclass(frozen=True)
class JobScript:
    """What a job does once inserted, for every job id that starts with ``prefix``.

    :param prefix: the job ids it applies to; the longest matching prefix wins, and
        ``""`` applies to any job.
    :param pending: seconds the job is PENDING after its insert.
    :param running: seconds it is RUNNING after that; ``None``: RUNNING until
        released (:meth:`JobBook.release`).
    :param ends: ``"success"``, ``"error"`` (DONE with ``status.errorResult``) or
        ``"warnings"`` (DONE with only non-fatal ``status.errors``).
    :param insert_response: ``"answer"``, or the answer to the insert that created the
        job is lost: ``"drop"`` closes the connection without an answer,
        ``"error-500"`` answers 500 ``internalError``. The job exists either way.
    :param poll_response: ``"answer"``, or ``"drop"``: ``jobs.getQueryResults`` closes the
        connection without an answer while the job is not DONE (``jobs.get`` still
        answers), as when the poll's connection is lost while the job runs on.
    :param message: the text of the error or of the warnings.
    """

    prefix: str = ""
    pending: float = 0.0
    running: float | None = 0.5
    ends: str = "success"
    insert_response: str = "answer"
    poll_response: str = "answer"
    message: str = "scripted by the test"

    def __post_init__(self) -> None:
        if self.ends not in ENDINGS:
            raise ValueError(f"ends is one of {ENDINGS}, not {self.ends!r}")
        if self.insert_response not in INSERT_RESPONSES:
            raise ValueError(
                f"insert_response is one of {INSERT_RESPONSES}, not {self.insert_response!r}"
            )
        if self.poll_response not in POLL_RESPONSES:
            raise ValueError(
                f"poll_response is one of {POLL_RESPONSES}, not {self.poll_response!r}"
            )
        if self.pending < 0 or (self.running is not None and self.running < 0):
            raise ValueError("pending and running are seconds, not negative")

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JobScript:
        """A script from its JSON form (the field names of this class)."""
        return cls(**data)

    def as_json(self) -> dict[str, Any]:
        """The JSON form :meth:`from_json` reads."""
        return asdict(self)


@dataclass
class Job:
    """One inserted job; its state follows from its script and the time since its insert."""

    project: str
    job_id: str
    location: str
    configuration: dict[str, Any]
    script: JobScript
    inserted: float = field(default_factory=time.monotonic)
    inserted_at: pendulum.DateTime = field(default_factory=lambda: pendulum.now("UTC"))
    released: float | None = None

    @property
    def running_ends(self) -> float | None:
        """The monotonic time it leaves RUNNING, ``None`` while it waits for a release."""
        if self.script.running is not None:
            return self.inserted + self.script.pending + self.script.running
        if self.released is not None:
            return max(self.released, self.inserted + self.script.pending)
        return None

    def state(self) -> str:
        """PENDING, RUNNING or DONE, right now."""
        now = time.monotonic()
        if now < self.inserted + self.script.pending:
            return PENDING
        ends = self.running_ends
        return RUNNING if ends is None or now < ends else DONE

    def status(self) -> dict[str, Any]:
        """The ``status`` field of the Job resource."""
        state = self.state()
        status: dict[str, Any] = {"state": state}
        if state != DONE or self.script.ends == "success":
            return status
        if self.script.ends == "error":
            error = {"reason": "invalidQuery", "location": "query", "message": self.script.message}
            status["errorResult"] = error
            status["errors"] = [error]
        else:
            status["errors"] = [
                {"reason": "invalid", "location": "row 2", "message": self.script.message}
            ]
        return status

    def reference(self) -> dict[str, str]:
        """The ``jobReference`` field."""
        return {"projectId": self.project, "jobId": self.job_id, "location": self.location}

    def resource(self) -> dict[str, Any]:
        """The Job resource, as ``jobs.insert`` and ``jobs.get`` answer it."""
        statistics = {"creationTime": _millis(self.inserted_at)}
        state = self.state()
        if state != PENDING:
            statistics["startTime"] = _millis(self._at(self.inserted + self.script.pending))
        ends = self.running_ends
        if state == DONE and ends is not None:
            statistics["endTime"] = _millis(self._at(ends))
        job_type = next((kind for kind in _JOB_TYPES if kind in self.configuration), "unknown")
        return {
            "kind": "bigquery#job",
            "etag": f'"{self.job_id}-{state}"',
            "id": f"{self.project}:{self.location}.{self.job_id}",
            "jobReference": self.reference(),
            "configuration": {**self.configuration, "jobType": job_type.upper()},
            "status": self.status(),
            "statistics": statistics,
            "user_email": f"standin@{self.project}.iam.gserviceaccount.com",
        }

    def query_results(self) -> dict[str, Any]:
        """The ``GetQueryResultsResponse`` of a job not ended by an error."""
        answer: dict[str, Any] = {
            "kind": "bigquery#getQueryResultsResponse",
            "jobReference": self.reference(),
            "jobComplete": self.state() == DONE,
        }
        if answer["jobComplete"]:
            answer |= {
                "schema": {"fields": []},
                "totalRows": "0",
                "totalBytesProcessed": "0",
                "cacheHit": False,
            }
        return answer

    def _at(self, monotonic: float) -> pendulum.DateTime:
        return self.inserted_at.add(microseconds=int((monotonic - self.inserted) * 1_000_000))


@dataclass(frozen=True)
class Insert:
    """One ``jobs.insert`` call that named a job: it created the job, or found it taken."""

    job_id: str
    created: bool
    at: pendulum.DateTime = field(default_factory=lambda: pendulum.now("UTC"))


class JobBook:
    """The scripts, the jobs inserted under them and the record of inserts; thread-safe.

    :param scripts: the scripts to start with.
    """

    def __init__(self, scripts: Iterable[JobScript] = ()) -> None:
        self._lock = threading.Lock()
        self._scripts: dict[str, JobScript] = {script.prefix: script for script in scripts}
        self._jobs: dict[tuple[str, str], Job] = {}
        self._inserts: list[Insert] = []

    def script(self, script: JobScript) -> None:
        """Use ``script`` for the jobs inserted from now on under its prefix."""
        with self._lock:
            self._scripts[script.prefix] = script

    def script_for(self, job_id: str) -> JobScript:
        """The script a job inserted now under ``job_id`` follows."""
        with self._lock:
            matching = [prefix for prefix in self._scripts if job_id.startswith(prefix)]
            if not matching:
                return JobScript()
            return self._scripts[max(matching, key=len)]

    def insert(
        self, project: str, job_id: str, location: str | None, configuration: dict[str, Any]
    ) -> tuple[Job, bool]:
        """The job under ``job_id``, and whether this insert created it (``False``: taken)."""
        script = self.script_for(job_id)
        with self._lock:
            job = self._jobs.get((project, job_id))
            created = job is None
            if job is None:
                job = Job(project, job_id, location or DEFAULT_LOCATION, configuration, script)
                self._jobs[(project, job_id)] = job
            self._inserts.append(Insert(job_id, created))
            return job, created

    def get(self, project: str, job_id: str, location: str | None) -> Job | None:
        """The job, or ``None``: never inserted, or asked for in another location."""
        with self._lock:
            job = self._jobs.get((project, job_id))
        if job is None or (location and location.upper() != job.location.upper()):
            return None
        return job

    def release(self, prefix: str) -> list[str]:
        """End the RUNNING of the jobs under ``prefix`` that wait for it; their ids."""
        now = time.monotonic()
        with self._lock:
            waiting = [
                job
                for job in self._jobs.values()
                if job.job_id.startswith(prefix)
                and job.script.running is None
                and job.released is None
            ]
            for job in waiting:
                job.released = now
        return [job.job_id for job in waiting]

    def submissions(self, prefix: str = "") -> dict[str, Any]:
        """The inserts under ``prefix``: the ids they created and those refused as taken."""
        with self._lock:
            inserts = [insert for insert in self._inserts if insert.job_id.startswith(prefix)]
        created = [insert.job_id for insert in inserts if insert.created]
        return {
            "prefix": prefix,
            "submissions": len(created),
            "created": created,
            "conflicts": [insert.job_id for insert in inserts if not insert.created],
        }


def _millis(moment: pendulum.DateTime) -> str:
    return str(int(moment.timestamp() * 1000))
