"""The API server's clock, as a worker reads it, set by the test: a proxy that passes every
request on to the server and answers with the server's answer under a ``Date`` of the
test's choice.

A worker learns the server's clock only from the ``Date`` of its answers. With that
``Date`` fixed, and the worker's own clock fixed by ``faketime``, how long the worker's
reads take no longer moves either clock: the decision is taken at the instant the test
chose, on a machine of any speed (:func:`server_clock_stopped_at`). With it read from a
DAG run's clock (:mod:`tests.gate.run_clock`), the server keeps the run's time, stopped or
moved on (:func:`server_on`).
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import pendulum

from tests.gate.run_clock import RunClock

#: headers that belong to one connection, not to the answer; Date and Content-Length are set
#: by the proxy itself
NOT_PASSED_ON = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "host"}
    | {"proxy-connection", "date", "content-length"}
)
#: as long as a loaded API server may take to answer one request
UPSTREAM_TIMEOUT = 120


def _handler(upstream: str, date: Callable[[], str]) -> type[BaseHTTPRequestHandler]:
    target = urlsplit(upstream)
    host, port = target.hostname or "127.0.0.1", target.port or 80
    prefix = target.path.rstrip("/")

    class PassOn(BaseHTTPRequestHandler):
        def _pass_on(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in NOT_PASSED_ON}
            server = http.client.HTTPConnection(host, port, timeout=UPSTREAM_TIMEOUT)
            try:
                server.request(self.command, prefix + self.path, body, headers)
                answer = server.getresponse()
                data = answer.read()
            finally:
                server.close()
            # send_response would add this machine's Date: only the chosen one is sent
            self.send_response_only(answer.status, answer.reason)
            for name, value in answer.getheaders():
                if name.lower() not in NOT_PASSED_ON:
                    self.send_header(name, value)
            self.send_header("Date", date())
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def __getattr__(self, name: str) -> Any:
            # do_GET, do_POST and the rest: every method is passed on the same way
            if name.startswith("do_"):
                return self._pass_on
            raise AttributeError(name)

        def log_message(self, format: str, *args: object) -> None:
            """Quiet: the API server logs every request already."""

    return PassOn


@contextmanager
def server_clock_stopped_at(upstream: str, at: pendulum.DateTime) -> Iterator[str]:
    """The URL of a proxy to ``upstream`` whose every answer says the server's clock reads
    ``at`` (a whole second: the resolution of a ``Date``).

    :param upstream: the API server's base URL, ``http://host:port``.
    :param at: what every ``Date`` says.
    """
    assert at.microsecond == 0, f"a Date has whole seconds, not {at}"
    date = formatdate(at.timestamp(), usegmt=True)
    with _proxy(upstream, lambda: date) as url:
        yield url


@contextmanager
def server_on(upstream: str, clock: RunClock) -> Iterator[str]:
    """The URL of a proxy to ``upstream`` whose answers tell the time of a run's ``clock``.

    :param upstream: the API server's base URL, ``http://host:port``.
    :param clock: the clock every ``Date`` reads.
    """
    with _proxy(upstream, lambda: formatdate(clock.now(), usegmt=True)) as url:
        yield url


@contextmanager
def _proxy(upstream: str, date: Callable[[], str]) -> Iterator[str]:
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), _handler(upstream, date))
    proxy.daemon_threads = True
    serving = threading.Thread(target=proxy.serve_forever, name="dated-proxy", daemon=True)
    serving.start()
    try:
        yield f"http://127.0.0.1:{proxy.server_address[1]}"
    finally:
        proxy.shutdown()
        proxy.server_close()
        serving.join(timeout=10)
