"""A stand-in of the BigQuery jobs API on 127.0.0.1, for the real ``google-cloud-bigquery`` client.

The one part of a BigQuery test that may be fake is BigQuery itself: the
operator, the hook, the client, ``google-auth`` and the Airflow connection are
the real ones, pointed here by two environment variables (:meth:`BigQueryStandIn.environment`):

* ``BIGQUERY_EMULATOR_HOST=http://127.0.0.1:PORT``: ``google-cloud-bigquery`` uses
  the value as its API endpoint, scheme included;
* ``AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT``: a generated service-account key whose
  ``token_uri`` is this server's ``/token`` (:mod:`devstack.google_credentials`).

What it serves (every request is logged, :attr:`BigQueryStandIn.requests`):

* ``POST /token``: an access token for a signed JWT;
* ``POST /bigquery/v2/projects/{p}/jobs``: ``jobs.insert``; ``409`` "Already Exists"
  for a job id already inserted; the answer to the insert that creates a job can be
  lost (:attr:`JobScript.insert_response`), the job created all the same;
* ``GET /bigquery/v2/projects/{p}/jobs/{id}?location=``: ``jobs.get``; ``404`` for
  an unknown id;
* ``GET /bigquery/v2/projects/{p}/queries/{id}``: ``jobs.getQueryResults``, which
  waits up to ``timeoutMs`` (10 s when not given) for the job to end, as BigQuery does;
  its answer can be lost while the job runs (:attr:`JobScript.poll_response`);
* ``GET /_standin/submissions?prefix=``, ``POST /_standin/script`` (a
  :class:`JobScript` as JSON), ``POST /_standin/release?prefix=``,
  ``GET /_standin/requests``: for tests in other processes.

The jobs API answers ``401`` to a request without a token this server issued.
Run it on its own with ``python -m devstack.bigquery_standin``.
"""

from __future__ import annotations

import argparse
import json
import re
import secrets
import signal
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pendulum

from devstack import google_credentials
from devstack.bigquery_jobs import DONE, Job, JobBook, JobScript
from devstack.loopback import LoopbackServer

__all__ = ["BigQueryStandIn", "JobScript", "bigquery_standin"]

PROJECT = "standin-project"
EMULATOR_HOST_VAR = "BIGQUERY_EMULATOR_HOST"
_API = "/bigquery/v2/projects/(?P<project>[^/]+)"
_INSERT = re.compile(f"^{_API}/jobs$")
_GET = re.compile(f"^{_API}/jobs/(?P<job>[^/]+)$")
_QUERY_RESULTS = re.compile(f"^{_API}/queries/(?P<job>[^/]+)$")
_DEFAULT_WAIT = 10.0
_WAIT_STEP = 0.05


class BigQueryStandIn:
    """The jobs (a :class:`~devstack.bigquery_jobs.JobBook`) behind HTTP, with credentials for them.

    :param scripts: what the jobs do, by job id prefix.
    :param project: the project of the connection.
    """

    def __init__(self, scripts: Iterable[JobScript] = (), project: str = PROJECT) -> None:
        self.jobs = JobBook(scripts)
        self.project = project
        self.requests: list[dict[str, Any]] = []
        self.tokens: set[str] = set()
        self._lock = threading.Lock()
        self._server: LoopbackServer | None = None
        self._key: dict[str, str] | None = None

    @property
    def url(self) -> str:
        """The base URL, once serving."""
        if self._server is None:
            raise RuntimeError("the BigQuery stand-in is not serving")
        return self._server.url

    @property
    def key(self) -> dict[str, str]:
        """The service-account key whose tokens this server issues."""
        if self._key is None:
            self._key = google_credentials.service_account_key(f"{self.url}/token", self.project)
        return self._key

    def connection(self, key_path: Path | None = None) -> dict[str, Any]:
        """The Airflow connection ``google_cloud_default`` (JSON form) for this server."""
        return google_credentials.connection(self.key, self.project, key_path)

    def environment(self, key_path: Path | None = None) -> dict[str, str]:
        """The environment a process needs to reach this server through the real client."""
        return {
            EMULATOR_HOST_VAR: self.url,
            google_credentials.connection_env_var(): json.dumps(self.connection(key_path)),
        }

    def script(self, script: JobScript) -> None:
        """Use ``script`` for the jobs inserted from now on under its prefix."""
        self.jobs.script(script)

    def submissions(self, prefix: str = "") -> int:
        """How many inserts under ``prefix`` created a job."""
        return int(self.jobs.submissions(prefix)["submissions"])

    def requests_to(self, path_part: str) -> list[dict[str, Any]]:
        """The logged requests whose path contains ``path_part``."""
        with self._lock:
            return [request for request in self.requests if path_part in request["path"]]

    def log(self, request: dict[str, Any]) -> None:
        """Record one request and how it was answered."""
        with self._lock:
            self.requests.append(request)

    def issue_token(self) -> str:
        """A new access token, good for every later request."""
        token = f"standin-{secrets.token_urlsafe(16)}"
        with self._lock:
            self.tokens.add(token)
        return token

    def serve(self) -> None:
        """Serve on a free port of 127.0.0.1, from a daemon thread."""
        standin = self

        class Handler(_Handler):
            server_side = standin

        self._server = LoopbackServer(Handler)

    def close(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.close()
            self._server = None


class _Handler(BaseHTTPRequestHandler):
    """One request: logged, then answered from the stand-in's jobs."""

    protocol_version = "HTTP/1.1"
    server_side: BigQueryStandIn

    def do_POST(self) -> None:
        self._route("POST")

    def do_GET(self) -> None:
        self._route("GET")

    def _route(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {name: values[-1] for name, values in parse_qs(url.query).items()}
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        entry: dict[str, Any] = {
            "at": pendulum.now("UTC").to_iso8601_string(),
            "method": method,
            "path": url.path,
            "query": query,
        }
        try:
            status, answer = self._answer_for(method, url.path, query, body, entry)
        except (ValueError, KeyError, TypeError) as error:
            status, answer = _error(HTTPStatus.BAD_REQUEST, f"{type(error).__name__}: {error}")
        entry["status"] = int(status) if status is not None else None
        self.server_side.log(entry)
        if status is None:  # a lost answer: the connection closes, nothing is sent
            self.close_connection = True
            return
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _answer_for(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        body: bytes,
        entry: dict[str, Any],
    ) -> tuple[HTTPStatus | None, Any]:
        standin = self.server_side
        if path.startswith("/_standin/"):
            return self._control(method, path, query, body)
        if (method, path) == ("POST", "/token"):
            return HTTPStatus.OK, {
                "access_token": standin.issue_token(),
                "expires_in": 3600,
                "token_type": "Bearer",
            }
        if not self._authorized():
            message = "Request is missing a valid access token."
            return _error(HTTPStatus.UNAUTHORIZED, message, "UNAUTHENTICATED")
        if method == "POST" and (found := _INSERT.match(path)):
            return self._insert(found["project"], json.loads(body), entry)
        if method == "GET" and (found := _GET.match(path)):
            job = standin.jobs.get(found["project"], found["job"], query.get("location"))
            if job is None:
                return _not_found(found["project"], found["job"], query.get("location"))
            return HTTPStatus.OK, job.resource()
        if method == "GET" and (found := _QUERY_RESULTS.match(path)):
            job = standin.jobs.get(found["project"], found["job"], query.get("location"))
            if job is None:
                return _not_found(found["project"], found["job"], query.get("location"))
            return _query_results(job, query)
        return _error(HTTPStatus.NOT_FOUND, f"The stand-in does not serve {method} {path}.")

    def _insert(
        self, project: str, resource: dict[str, Any], entry: dict[str, Any]
    ) -> tuple[HTTPStatus | None, Any]:
        reference = resource.get("jobReference") or {}
        job_id = str(reference["jobId"])
        job, created = self.server_side.jobs.insert(
            project, job_id, reference.get("location"), dict(resource["configuration"])
        )
        entry["jobId"] = job_id
        entry["created"] = created
        if not created:
            return _error(
                HTTPStatus.CONFLICT,
                f"Already Exists: Job {project}:{job.location}.{job_id}",
                "ALREADY_EXISTS",
                reason="duplicate",
            )
        if job.script.insert_response == "drop":
            return None, None
        if job.script.insert_response == "error-500":
            return _error(
                HTTPStatus.INTERNAL_SERVER_ERROR,
                "An internal error occurred and the request could not be completed.",
                "INTERNAL",
                reason="internalError",
            )
        return HTTPStatus.OK, job.resource()

    def _control(
        self, method: str, path: str, query: Mapping[str, str], body: bytes
    ) -> tuple[HTTPStatus, Any]:
        standin = self.server_side
        prefix = query.get("prefix", "")
        if (method, path) == ("GET", "/_standin/submissions"):
            return HTTPStatus.OK, standin.jobs.submissions(prefix)
        if (method, path) == ("POST", "/_standin/script"):
            script = JobScript.from_json(json.loads(body))
            standin.script(script)
            return HTTPStatus.OK, script.as_json()
        if (method, path) == ("POST", "/_standin/release"):
            return HTTPStatus.OK, {"released": standin.jobs.release(prefix)}
        if (method, path) == ("GET", "/_standin/requests"):
            return HTTPStatus.OK, {"requests": standin.requests_to("")}
        return _error(HTTPStatus.NOT_FOUND, f"no {method} {path}")

    def _authorized(self) -> bool:
        scheme, _, token = self.headers.get("Authorization", "").partition(" ")
        return scheme == "Bearer" and token in self.server_side.tokens

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: :attr:`BigQueryStandIn.requests` is the record."""


def _query_results(job: Job, query: Mapping[str, str]) -> tuple[HTTPStatus | None, Any]:
    """``jobs.getQueryResults``: wait for the job to end, up to ``timeoutMs``.

    A job scripted ``poll_response="drop"`` gets no answer (``None``) while it is not DONE.
    """
    if job.script.poll_response == "drop" and job.state() != DONE:
        return None, None
    wait = int(query["timeoutMs"]) / 1000 if "timeoutMs" in query else _DEFAULT_WAIT
    deadline = time.monotonic() + wait
    while job.state() != DONE and time.monotonic() < deadline:
        time.sleep(_WAIT_STEP)
    error = job.status().get("errorResult")
    if error is not None:
        return _error(HTTPStatus.BAD_REQUEST, error["message"], "INVALID_ARGUMENT", error["reason"])
    return HTTPStatus.OK, job.query_results()


def _not_found(project: str, job_id: str, location: str | None) -> tuple[HTTPStatus, Any]:
    where = f"{project}:{location}.{job_id}" if location else f"{project}:{job_id}"
    return _error(HTTPStatus.NOT_FOUND, f"Not found: Job {where}", "NOT_FOUND", "notFound")


def _error(
    status: HTTPStatus, message: str, code: str = "", reason: str = "invalid"
) -> tuple[HTTPStatus, Any]:
    """An error answer in the form of Google's JSON APIs."""
    return status, {
        "error": {
            "code": int(status),
            "message": message,
            "errors": [{"message": message, "domain": "global", "reason": reason}],
            "status": code or status.name,
        }
    }


@contextmanager
def bigquery_standin(
    scripts: Iterable[JobScript] = (), project: str = PROJECT
) -> Iterator[BigQueryStandIn]:
    """A serving :class:`BigQueryStandIn`, stopped after."""
    standin = BigQueryStandIn(scripts, project)
    standin.serve()
    try:
        yield standin
    finally:
        standin.close()


def main(argv: list[str] | None = None) -> None:
    """Serve until SIGINT or SIGTERM; write the environment the Airflow services need."""
    parser = argparse.ArgumentParser(prog="python -m devstack.bigquery_standin")
    parser.add_argument("--scripts", type=Path, help="a JSON list of JobScript objects")
    parser.add_argument("--project", default=PROJECT)
    parser.add_argument("--key-path", type=Path, help="write the key here (extra key_path)")
    parser.add_argument("--env-file", type=Path, help="write NAME=VALUE lines here")
    args = parser.parse_args(argv)
    scripts = []
    if args.scripts:
        scripts = [JobScript.from_json(item) for item in json.loads(args.scripts.read_text())]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with bigquery_standin(scripts, args.project) as standin:
        lines = [f"{name}={value}" for name, value in standin.environment(args.key_path).items()]
        if args.env_file:  # whole or not at all: a reader may be waiting for it
            partial = args.env_file.with_name(args.env_file.name + ".partial")
            partial.write_text("\n".join(lines) + "\n")
            partial.replace(args.env_file)
        print("\n".join(lines), flush=True)
        with suppress(KeyboardInterrupt):
            stop.wait()


if __name__ == "__main__":
    main()
