"""The API server's clock, as the retry policy measures it in the worker.

The policy decides in the task's own process, which talks to Airflow only
through its supervisor and sees none of the supervisor's HTTP answers. So it
asks the execution API server once itself (``[core] execution_api_server_url``)
and takes the ``Date`` of whatever it answers (a 404 or a 405 carries one too),
within a short timeout (:data:`~airflow_retrywindow.configuration.SERVER_CLOCK_TIMEOUT`).
TLS is set up as the task SDK sets up its own client: ``[api] ssl_ca_file``,
``[api] ssl_cert``, ``[api] client_ssl_cert``/``client_ssl_key``.

Two cases need no request:

* a task run by ``dag.test()`` talks to an execution API served in its own
  process (the task SDK's ``InProcessSupervisorComms``): the server's clock is
  this process's;
* the policy called outside any task run (no supervisor at all: a test, a
  replay) with no ``[core] execution_api_server_url`` set: there is no server to
  ask, and this process's clock is taken as the only one.

A server may send a ``Date`` noted a moment before it answers (uvicorn renews it
once a second from its event loop, later when the loop is busy), which makes this
worker's clock look ahead. So before that verdict stands, the server is asked
again, after a pause, up to :data:`~airflow_retrywindow.timing.skew.CONFIRMATIONS`
times, and the answers are taken together
(:func:`~airflow_retrywindow.timing.skew.confirmed_ahead`).

Each request rides out what Airflow's own client rides out
(:class:`~airflow_retrywindow.read_retry.ReadRetry`): a connection error, a
timeout or an answer 5xx or 429 is tried again, with jittered exponential
waits, within ``[retry_window] clock_read_limit`` seconds for the whole
measurement, below what the supervisor's heartbeat tolerates. Only answers that
succeeded are measured: an error answer, with or without a ``Date``, is tried again.

When that bound is spent, or the read fails otherwise, it raises
:class:`~airflow_retrywindow.exceptions.ClockError` naming the URL, the cause and
how many tries were made over how long (:attr:`ClockError.read`): the policy then
cannot evaluate, and refuses (``on_error="fail"``) with that in its evidence.
"""

from __future__ import annotations

import ssl
import time
from datetime import timedelta

import pendulum

from airflow_retrywindow import airflow_internals
from airflow_retrywindow.configuration import SERVER_CLOCK_TIMEOUT, clock_read_limit
from airflow_retrywindow.exceptions import ClockError
from airflow_retrywindow.read_retry import ErrorAnswer, ReadRetry, ReadTally, retried_status
from airflow_retrywindow.redaction import describe_exception, safe_text, without_userinfo
from airflow_retrywindow.timing.skew import ClockOffset, confirmed_ahead, server_date

#: what a measurement of the in-process execution API is called in the evidence
IN_PROCESS = "the execution API in this process (dag.test)"
#: what it is called when the policy runs outside any task run
NO_SERVER = "this process's clock (no task runner, no [core] execution_api_server_url)"


def server_clock(
    tolerance: timedelta,
    timeout: float = SERVER_CLOCK_TIMEOUT,
    *,
    retry: ReadRetry | None = None,
    bound: float | None = None,
    tally: ReadTally | None = None,
) -> ClockOffset:
    """How far the execution API server's clock is from this worker's.

    :param tolerance: how far the clocks may disagree; a measurement that finds this
        worker's clock ahead by more is confirmed before it is returned.
    :param timeout: seconds to wait for each answer of the server.
    :param retry: how a failed request is tried again (default: the settings').
    :param bound: seconds the whole measurement may take, every try and wait
        included (default: ``[retry_window] clock_read_limit``).
    :param tally: where the tries are counted.
    :raises ClockError: when the server's clock cannot be read.
    """
    comms = airflow_internals.supervisor_comms()
    if airflow_internals.in_process_supervisor(comms):
        return ClockOffset.same_clock(IN_PROCESS)
    url = execution_api_url(in_task_run=comms is not None)
    if url is None:
        return ClockOffset.same_clock(NO_SERVER)
    retry = ReadRetry.from_settings() if retry is None else retry
    limit = clock_read_limit() if bound is None else bound
    tally = ReadTally() if tally is None else tally
    started = time.monotonic()

    def left() -> float:
        return limit - (time.monotonic() - started)

    def again() -> ClockOffset:
        return measure(url, timeout, retry=retry, bound=left(), tally=tally)

    return confirmed_ahead(again(), again, tolerance, left)


def measure(
    url: str,
    timeout: float,
    *,
    retry: ReadRetry | None = None,
    bound: float | None = None,
    tally: ReadTally | None = None,
) -> ClockOffset:
    """The offset one answer of ``url`` bounds; its body is never read.

    An error answer or a failed request is tried again (``retry``) within ``bound``.

    :param url: any address of the server; every answer carries its ``Date``.
    :param timeout: seconds to wait for each answer.
    :param retry: how a failed request is tried again (default: the settings').
    :param bound: seconds every try and wait may take together (default: ``timeout``).
    :param tally: where the tries are counted.
    :raises ClockError: when no answer came or it carried no usable ``Date``.
    """
    import httpx

    retry = ReadRetry.from_settings() if retry is None else retry
    tally = ReadTally() if tally is None else tally
    shown = safe_text(without_userinfo(url), limit=200)
    source = f"the Airflow API server at {shown}"

    def once(left: float) -> tuple[pendulum.DateTime, pendulum.DateTime, str | None]:
        wait = max(0.001, min(timeout, left))
        with httpx.Client(verify=_tls(), cert=_client_cert(), timeout=wait) as client:
            sent = _now()
            with client.stream("GET", url, follow_redirects=False) as answer:
                received = _now()
                if retried_status(answer.status_code):
                    # an error answer is no clock reading, Date or not: try again
                    raise ErrorAnswer(
                        answer.status_code,
                        answer.headers.get("Retry-After"),
                        answer.reason_phrase,
                    )
                return sent, received, answer.headers.get("Date")

    try:
        sent, received, date = retry.call(
            once, bound=timeout if bound is None else bound, tally=tally
        )
    except Exception as error:
        count = tally.last
        tried = f" after {count.describe()} ([retry_window] clock_read_limit)" if count else ""
        failed = ClockError(
            f"the API server's clock could not be read at {shown} ({describe_exception(error)})"
            f"{tried}, so this worker's clock cannot be checked against it; check [core] "
            "execution_api_server_url and that the server is reachable"
        )
        failed.read = count
        raise failed from error
    return ClockOffset.measured(sent, received, server_date(date, source), source)


def execution_api_url(*, in_task_run: bool) -> str | None:
    """The execution API server's URL, as the executors resolve it.

    ``[core] execution_api_server_url``, else ``[api] base_url`` + ``/execution/``
    (``http://localhost:8080`` when that is unset or a path). Outside a task run,
    only an explicit ``execution_api_server_url`` counts (``None`` otherwise).

    :param in_task_run: whether a task runner's supervisor is running this task.
    """
    from airflow_retrywindow.version_compat import conf

    explicit = conf.get("core", "execution_api_server_url", fallback=None)
    if explicit:
        return str(explicit)
    if not in_task_run:
        return None
    base = str(conf.get("api", "base_url", fallback="/") or "/")
    if base.startswith("/"):
        base = f"http://localhost:8080{base}"
    return f"{base.rstrip('/')}/execution/"


def _tls() -> ssl.SSLContext:
    from airflow_retrywindow.version_compat import conf

    context = ssl.create_default_context(cafile=conf.get("api", "ssl_ca_file", fallback=None))
    extra = conf.get("api", "ssl_cert", fallback=None)
    if extra:
        context.load_verify_locations(extra)
    return context


def _client_cert() -> tuple[str, str] | None:
    from airflow_retrywindow.version_compat import conf

    cert = conf.get("api", "client_ssl_cert", fallback=None)
    key = conf.get("api", "client_ssl_key", fallback=None)
    return (str(cert), str(key)) if cert and key else None


def _now() -> pendulum.DateTime:
    return pendulum.now("UTC")
