"""A small TCP proxy between Airflow's workers and its API server, with outages on demand.

It listens on a free loopback port and forwards every connection to the API
server. Its controls stand in for what a deploy or a load balancer does:

* :meth:`TcpProxy.cut` drops every open connection and, for some seconds, every
  new one as soon as it is accepted (an API server restarting);
* :meth:`TcpProxy.cut_on` does the same from the first connection whose first
  request is a given one (``GET /execution/``: the retry policy's clock read), so
  an outage starts exactly when the decision reads Airflow;
* :meth:`TcpProxy.bad_gateways` answers the next connections with a 502 in
  HAProxy's default shape, with or without a ``Date``.

Each connection's first request line is kept (:attr:`TcpProxy.requests`), those
dropped by a cut included; a
client opens a new connection after an answer that closes it, so with these
answers a connection is a request.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from tests.hooks.error_pages import bad_gateway

#: how long a new connection may take to send its first request line
_FIRST_LINE_TIMEOUT = 10.0


class TcpProxy:
    """Forwards loopback connections to ``127.0.0.1:upstream`` until an outage is asked for.

    :param upstream: the API server's port; may be set later, before the first
        connection.
    """

    def __init__(self, upstream: int | None = None) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._cut_until = 0.0
        self._cut_on: tuple[bytes, float] | None = None
        self._bad: list[bool] = []
        #: the first request line of every connection, with the time it came
        self.requests: list[tuple[float, str]] = []
        #: when each outage started and how long it lasts
        self.outages: list[tuple[float, float]] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- the controls ----------------------------------------------------------------------

    def cut(self, seconds: float) -> None:
        """Drop every open connection, and every new one for ``seconds``."""
        with self._lock:
            self._cut_until = time.monotonic() + seconds
            self.outages.append((time.time(), seconds))
            dropped, self._open = self._open, set()
        for sock in dropped:
            _close(sock)

    def cut_on(self, request_line: str, seconds: float) -> None:
        """:meth:`cut` for ``seconds`` when a connection's first request starts with
        ``request_line`` (e.g. ``"GET /execution/ "``); that connection is dropped too."""
        with self._lock:
            self._cut_on = (request_line.encode(), seconds)

    def bad_gateways(self, *dated: bool) -> None:
        """Answer the next connections with a 502, one per flag: with a Date when true."""
        with self._lock:
            self._bad.extend(dated)

    def close(self) -> None:
        self._closed = True
        _close(self._listener)
        with self._lock:
            dropped, self._open = self._open, set()
        for sock in dropped:
            _close(sock)

    # -- forwarding ------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        first = _first_line(client)
        line = first.split(b"\r\n", 1)[0]
        with self._lock:
            self.requests.append((time.time(), line.decode("latin-1")))
        if self._cutting():  # a request sent during a cut is dropped unanswered
            _close(client)
            return
        with self._lock:
            trigger = self._cut_on
            starts_cut = trigger is not None and line.startswith(trigger[0])
            if starts_cut:
                self._cut_on = None
            bad = self._bad.pop(0) if self._bad and not starts_cut else None
        if starts_cut and trigger is not None:
            self.cut(trigger[1])
            _close(client)
            return
        if bad is not None:
            _answer_and_close(client, bad_gateway(dated=bad))
            return
        if self.upstream is None:
            _close(client)
            return
        try:
            server = socket.create_connection(("127.0.0.1", self.upstream), timeout=10)
        except OSError:
            _close(client)
            return
        server.settimeout(None)
        with self._lock:
            self._open.update((client, server))
        try:
            server.sendall(first)
            _pump(client, server)
        except (OSError, ValueError):  # a cut closed the sockets under the pump
            pass
        finally:
            with self._lock:
                self._open.difference_update((client, server))
            _close(client)
            _close(server)

    def _cutting(self) -> bool:
        with self._lock:
            return time.monotonic() < self._cut_until


def _first_line(client: socket.socket) -> bytes:
    """What the client sent until its request line is whole (or it went quiet)."""
    client.settimeout(_FIRST_LINE_TIMEOUT)
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = client.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    client.settimeout(None)
    return data


def _pump(client: socket.socket, server: socket.socket) -> None:
    peers = {client: server, server: client}
    while True:
        readable, _, _ = select.select(list(peers), [], [], 1.0)
        for sock in readable:
            data = sock.recv(65536)
            if not data:
                return
            peers[sock].sendall(data)


def _answer_and_close(client: socket.socket, answer: bytes) -> None:
    try:
        client.sendall(answer)
        client.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    _close(client)


def _close(sock: socket.socket) -> None:
    with suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


@contextmanager
def proxy(upstream: int | None = None) -> Iterator[TcpProxy]:
    """A running :class:`TcpProxy`, closed after."""
    running = TcpProxy(upstream)
    try:
        yield running
    finally:
        running.close()
