"""The REST reader: a DAG run's task instances, XCom keys and pools through Airflow's API.

In Airflow 3 a task cannot query the metadata database; the public REST API
(``/api/v2``) is the supported way to see other task instances.
:class:`AirflowApi` handles URLs, tokens, pages and TLS with urllib3, and reads
each answer as Airflow's OpenAPI document describes it
(:mod:`~airflow_retrywindow.hooks.api_answer`); it returns plain rows
(:class:`TaskInstanceRow`, :class:`XComKey`, :class:`PoolRow`, :class:`ApprovalRow`)
and knows nothing of the gate. :class:`~airflow_retrywindow.hooks.airflow_api.AirflowApiHook`
builds one from an Airflow connection (default id ``airflow_api_default``). Importing
this module imports neither Airflow nor urllib3, so the gate's stages can use its rows
without Airflow.

The connection (type ``retrywindow_airflow_api``; ``http`` connections are read
the same way):

* ``host`` - the API server's base URL, e.g. ``http://airflow-apiserver:8080``
  (a bare host name gets ``schema`` or ``http`` and ``port``); credentials in it
  (``user:password@``) are dropped, never sent nor shown: use login and password;
* ``login`` and ``password`` - exchanged for a JWT at ``POST /auth/token``; when a
  read is answered 401 (the token expired), one fresh token is fetched and the
  read repeated once;
* or ``extra`` ``{"access_token": "..."}`` - a JWT used as given (never renewed
  unless login and password are given too);
* optional ``extra`` ``{"verify_ssl": false}`` or ``{"ssl_ca_cert": "/path/ca.pem"}``.

Requests grow with pages, not with targets nor map indexes: the task instances
of all targets, every map index of a mapped one included, come from one paged
``POST .../taskInstances/list`` with a ``task_ids`` filter (that listing takes
pages of up to 1000 rows whatever ``[api] maximum_page_limit`` says), the
failure classes of every task instance from one paged XCom key listing, the
pools from one paged ``GET /pools``. A pool read as a dependency takes one
``GET .../taskInstances`` per count, each a page of at most 100 rows whatever the
pool holds (:meth:`AirflowApi.pool_listing`). Only a task instance reset since its last
try (a manual clear) costs one more request, for its earlier tries: Airflow's
REST API lists the earlier tries of one task instance at a time. A gate with an
approval task reads that task's human-in-the-loop request and answer in one more
request (:meth:`AirflowApi.approval`).

Every request rides out what Airflow's own client rides out
(:class:`~airflow_retrywindow.read_retry.ReadRetry`): a connection error, a timeout
or an answer 5xx or 429 is tried again with jittered exponential waits, within
the decision's time limit (``gate_timeout``). Each try counts as a request
(:attr:`AirflowApi.requests`), and :attr:`AirflowApi.reads` tells how many were
tries again. Every other failure, and one that outlasts the tries, raises
:class:`AirflowApiError` naming the request, the cause and the tries, so a gate
can refuse to decide (fail closed) and say why.

What it reads is bounded: no answer body larger than ``max_response_bytes`` is
read (the cap is enforced while the body arrives, never after), and with a
:class:`~airflow_retrywindow.timing.time_limit.TimeLimit` every request waits at
most the time the whole decision has left. Each answer's ``Date`` bounds how far
the API server's clock is from this worker's (:attr:`AirflowApi.clock_offset`,
see :mod:`~airflow_retrywindow.timing.skew`).
"""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote, urlencode, urlsplit

import pendulum

# at most 1000 rows per page are asked for: the task instance listing (a POST) returns
# as many; the GET listings (XCom keys, pools) are capped by the server's
# ``[api] maximum_page_limit`` (100 by default), and the reader follows the rows it gets
from airflow_retrywindow.configuration import (
    DEFAULT_CONN_ID,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_PAGE_SIZE,
    DEFAULT_TIMEOUT,
    checked_max_response_bytes,
    checked_page_size,
    checked_timeout,
)
from airflow_retrywindow.exceptions import AirflowApiError, ClockError
from airflow_retrywindow.hooks.api_answer import AnswerObject, RefusedAnswer
from airflow_retrywindow.labels import label
from airflow_retrywindow.read_retry import (
    ErrorAnswer,
    ReadRetry,
    ReadTally,
    causes,
    retried_status,
    tls_error,
)
from airflow_retrywindow.redaction import safe_text, without_userinfo
from airflow_retrywindow.timing.skew import ClockOffset, server_date
from airflow_retrywindow.timing.time_limit import TimeLimit

if TYPE_CHECKING:
    import urllib3
    from urllib3 import BaseHTTPResponse

__all__ = [
    "DEFAULT_CONN_ID",
    "DEFAULT_PAGE_SIZE",
    "DEFAULT_TIMEOUT",
    "AirflowApi",
    "AirflowApiError",
    "ApprovalRow",
    "PoolRow",
    "TaskInstanceRow",
    "XComKey",
    "connection_url",
]

#: Airflow's marker for a pool without a limit
UNLIMITED = -1
#: bytes read from an answer body at a time, so the size cap and the time limit
#: are checked while it arrives
_CHUNK = 64 * 1024
T = TypeVar("T")


@dataclass(frozen=True)
class TaskInstanceRow:
    """One try of a task instance, as the API reported it: the REST transport row.

    It keeps Airflow's own words and is not a task as observed: what its state
    means to the model (``failed`` may be an unknown outcome, ``skipped`` a reset
    after an earlier try) needs the failure class the task's policy pushed to
    XCom and whether the target is gated, which only the gate knows. The gate turns
    it into the one observed-task type,
    :class:`~airflow_retrywindow.timing.fixtures.TaskFacts`, in one place
    (:func:`airflow_retrywindow.gate.observe.observe`); before that it only picks
    which row of a task instance counts (:mod:`airflow_retrywindow.gate.read`).

    :param task_id: the task id.
    :param map_index: ``-1`` unless the task is mapped.
    :param state: Airflow's state name, ``None`` when the row has none.
    :param try_number: Airflow's try number (0 before the first try).
    :param max_tries: Airflow's ``max_tries`` when the row was written.
    :param start_date: when the try started.
    :param end_date: when the try ended.
    :param pool: the pool the task runs in.
    :param pool_slots: the slots one try holds.
    :param observed_at: when the API answered with this row.
    """

    task_id: str
    map_index: int
    state: str | None
    try_number: int
    max_tries: int
    start_date: pendulum.DateTime | None
    end_date: pendulum.DateTime | None
    pool: str
    pool_slots: int
    observed_at: pendulum.DateTime


@dataclass(frozen=True)
class XComKey:
    """One XCom entry's key, as the API lists it (the listing carries no values).

    :param task_id: the task that pushed it.
    :param map_index: the pushing task's map index.
    :param key: the XCom key.
    :param timestamp: when it was pushed.
    :param dag_id: its DAG, when read across DAGs.
    :param run_id: its run, when read across runs.
    """

    task_id: str
    map_index: int
    key: str
    timestamp: pendulum.DateTime
    dag_id: str | None = None
    run_id: str | None = None


@dataclass(frozen=True)
class PoolRow:
    """A pool as the API reported it, and the slots it has free for the gate.

    :param name: the pool's name.
    :param slots: its size, ``-1`` for unlimited.
    :param occupied: slots held by running and queued tasks (and deferred ones
        when ``include_deferred``).
    :param deferred: slots held by deferred tasks.
    :param open: slots free now, as Airflow computes them (``-1`` when unlimited).
    :param include_deferred: whether deferred tasks hold their slots.
    :param description: the pool's description, a breaker's state line included.
    """

    name: str
    slots: int
    occupied: int
    deferred: int
    open: int
    include_deferred: bool
    description: str | None = None

    def open_slots(self) -> int | None:
        """Slots free now, ``None`` when the pool is unlimited.

        Recomputed from ``slots`` and ``occupied`` and checked against the
        reported ``open``: the smaller wins, so a stale or odd report can only
        make the verdict more careful.
        """
        if self.slots == UNLIMITED:
            return None
        computed = self.slots - self.occupied
        return min(computed, self.open) if self.open >= 0 else computed

    def as_dict(self) -> dict[str, Any]:
        """The pool's numbers for the decision record."""
        return {
            "pool": self.name,
            "slots": self.slots,
            "occupied": self.occupied,
            "deferred": self.deferred,
            "open": self.open,
            "includeDeferred": self.include_deferred,
        }


@dataclass(frozen=True)
class ApprovalRow:
    """A human-in-the-loop task's request and its answer, as the API reported them.

    :param task_id: the human-in-the-loop task.
    :param map_index: its map index, ``-1`` when not mapped.
    :param state: the task instance's state now, ``None`` when it has none (cleared).
    :param try_number: the task instance's try number now.
    :param options: the options the request offered.
    :param chosen: the options chosen; empty while unanswered.
    :param user_id: who answered; ``None`` while unanswered, and when Airflow chose
        the request's defaults because nobody answered in time.
    :param user_name: that person's name.
    :param responded_at: when the answer was recorded.
    :param params_input: the form values given with the answer.
    :param asked_at: when the request was written.
    :param observed_at: when the API answered with this row.
    """

    task_id: str
    map_index: int
    state: str | None
    try_number: int
    options: tuple[str, ...]
    chosen: tuple[str, ...]
    user_id: str | None
    user_name: str | None
    responded_at: pendulum.DateTime | None
    params_input: dict[str, Any]
    asked_at: pendulum.DateTime
    observed_at: pendulum.DateTime


@dataclass(frozen=True)
class PoolTry:
    """The current try of one task instance of a pool, as the task instance listing shows it.

    :param dag_id: its DAG.
    :param run_id: its DAG run.
    :param task_id: its task.
    :param map_index: ``-1`` unless the task is mapped.
    :param state: Airflow's state name, ``None`` when it has none.
    :param try_number: Airflow's try number (for ``up_for_retry``, the try that failed).
    :param max_tries: Airflow's ``max_tries``.
    :param start_date: when the try started.
    :param end_date: when it ended.
    """

    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    state: str | None
    try_number: int
    max_tries: int
    start_date: pendulum.DateTime | None
    end_date: pendulum.DateTime | None

    @property
    def seconds(self) -> float:
        """How long the try ran, 0 when it has not both started and ended."""
        if self.start_date is None or self.end_date is None:
            return 0.0
        return max(0.0, (self.end_date - self.start_date).total_seconds())


@dataclass(frozen=True)
class PoolListing:
    """One answer of the task instance listing: the rows of its one page and how many matched.

    :param rows: the rows asked for (none for a count).
    :param total: every task instance the filters matched.
    """

    rows: tuple[PoolTry, ...]
    total: int


class AirflowApi:
    """A reader of Airflow's REST API that counts its requests.

    Tokens: with ``login`` (and ``password``) the reader gets a JWT at
    ``POST /auth/token`` before its first read; ``access_token`` is used as given
    instead. When a read is answered 401 Unauthorized (the token expired, or the
    API server's signing key changed) and ``login`` is given, the reader fetches one
    fresh token and repeats that read once; a second 401 raises
    :class:`AirflowApiError`. Without ``login`` a 401 raises at once.

    :param base_url: the API server's base URL, without ``/api/v2``; credentials in
        it (``user:password@``) are dropped, so no message or record shows them.
    :param login: the user to exchange for a JWT with ``password``.
    :param password: that user's password.
    :param access_token: a JWT to use as given, instead of ``login``/``password``.
    :param verify_ssl: whether to verify the server's TLS certificate.
    :param ssl_ca_cert: a CA bundle for the server's certificate.
    :param page_size: rows asked for per page (1 to 1000).
    :param timeout: seconds to wait for each request.
    :param max_response_bytes: the largest answer body read; a larger one is refused
        while it arrives.
    :param time_limit: the time the whole decision may take; each request waits at
        most the time left, and none is made once it has run out. It bounds the tries
        again of a failed request too; without it they take at most ``timeout``.
    :param retry: how a failed request is tried again (default: ``[retry_window]
        api_retries``, ``api_retry_wait_min`` and ``_max``).
    """

    def __init__(
        self,
        base_url: str,
        *,
        login: str | None = None,
        password: str | None = None,
        access_token: str | None = None,
        verify_ssl: bool = True,
        ssl_ca_cert: str | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        timeout: float = DEFAULT_TIMEOUT,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        time_limit: TimeLimit | None = None,
        retry: ReadRetry | None = None,
    ) -> None:
        try:
            parts = urlsplit(base_url) if isinstance(base_url, str) else None
        except ValueError:  # e.g. an unclosed IPv6 bracket
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise AirflowApiError(
                f"the API base URL must look like http://host:port, got {safe_text(repr(base_url))}"
            )
        check_reading_settings(page_size, timeout)
        checked_max_response_bytes(max_response_bytes)
        # URL credentials are never sent; kept, they would reach every message
        self.base_url = without_userinfo(base_url).rstrip("/")
        self.login = login
        self.password = password
        self.access_token = access_token
        self.verify_ssl = verify_ssl
        self.ssl_ca_cert = ssl_ca_cert
        self.page_size = page_size
        self.timeout = float(timeout)
        self.max_response_bytes = max_response_bytes
        self.time_limit = time_limit
        self.retry = ReadRetry.from_settings() if retry is None else retry
        #: requests made so far, the token request and every try again included
        self.requests = 0
        #: the tries again so far, and the count of the last read
        self.reads = ReadTally()
        #: the API server's clock minus this worker's, from every answer so far
        #: (:meth:`ClockOffset.combined`); ``None`` before the first answer
        self.clock_offset: ClockOffset | None = None
        #: the token reads send: ``None`` before the first read, ``""`` for none
        self._bearer: str | None = None
        self._connections: urllib3.PoolManager | None = None

    # -- the reads ---------------------------------------------------------------

    def task_instances(
        self, dag_id: str, run_id: str, task_ids: Collection[str]
    ) -> list[TaskInstanceRow]:
        """The current task instances of ``task_ids`` in one run, in one paged request."""
        if not task_ids:
            return []
        where = f"task instances of run {run_id!r} of DAG {dag_id!r}"
        body: dict[str, Any] = {"dag_ids": [dag_id], "dag_run_ids": [run_id]}
        body["task_ids"] = sorted(set(task_ids))

        def page(offset: int) -> tuple[list[TaskInstanceRow], int]:
            return self._read(
                where,
                f"{_path('~', '~')}/taskInstances/list",
                _listing("task_instances", _row),
                body={
                    **body,
                    "page_limit": self.page_size,
                    "page_offset": offset,
                    "order_by": "id",
                },
                method="POST",
            )

        return list(self._pages(page))

    def task_tries(
        self, dag_id: str, run_id: str, task_id: str, map_index: int = -1
    ) -> list[TaskInstanceRow]:
        """Every try of one task instance, earlier tries included (one request).

        :param map_index: the task instance's map index, ``-1`` when it is not mapped.
        """
        shown = label(task_id, map_index)
        where = f"tries of task {shown!r} in run {run_id!r} of DAG {dag_id!r}"
        instance = _path(dag_id, run_id, task_id, *([map_index] if map_index >= 0 else []))
        rows, _ = self._read(where, f"{instance}/tries", _listing("task_instances", _row))
        return rows

    def event_logs(
        self,
        dag_id: str,
        run_id: str,
        task_id: str,
        *,
        event: str,
        try_number: int,
        map_index: int = -1,
        limit: int = 10,
    ) -> list[dict[str, Any]]:
        """The latest ``event`` entries of Airflow's event log for one try (one request).

        :param event: the event's name, e.g. ``"state mismatch"``.
        :param try_number: the try the entries are about.
        :param map_index: the task instance's map index, ``-1`` when it is not mapped.
        :param limit: the most entries read, newest first.
        """
        shown = label(task_id, map_index)
        where = f"{event!r} events of try {try_number} of task {shown!r} in run {run_id!r}"
        query = {
            "dag_id": dag_id, "run_id": run_id, "task_id": task_id, "map_index": map_index,
            "try_number": try_number, "event": event, "limit": limit, "order_by": "-when",
        }  # fmt: skip
        return self._read(where, "/api/v2/eventLogs", _events, query=query)

    def xcom_keys(self, dag_id: str, run_id: str, key_prefix: str) -> list[XComKey]:
        """The XCom keys starting with ``key_prefix`` of every task of one run, paged."""
        from airflow_retrywindow.version_compat import xcom_key_filter

        where = f"XCom keys {key_prefix}* of run {run_id!r} of DAG {dag_id!r}"

        def page(offset: int) -> tuple[list[XComKey], int]:
            query = {"limit": self.page_size, "offset": offset, **xcom_key_filter(key_prefix)}
            entries = f"{_path(dag_id, run_id, '~')}/xcomEntries"
            return self._read(where, entries, _listing("xcom_entries", _xcom_key), query=query)

        keys = self._pages(page)
        # the prefix filter is index-friendly but loose: keep exact matches only
        return [key for key in keys if key.key.startswith(key_prefix)]

    def pool_listing(
        self,
        pool: str,
        states: Collection[str],
        *,
        try_numbers: Collection[int] = (),
        ended_since: datetime | None = None,
        order_by: str = "id",
        limit: int = 0,
    ) -> PoolListing:
        """One page of the task instances of ``pool`` across all DAGs and runs, and how
        many match: one request (``GET /api/v2/dags/~/dagRuns/~/taskInstances``) whose
        answer does not grow with the pool.

        :param states: only task instances in these states.
        :param try_numbers: only these try numbers (all when empty).
        :param ended_since: only tries that ended at or after this time.
        :param order_by: the listing's order, e.g. ``-end_date``.
        :param limit: rows wanted, at most :attr:`page_size` (0: the count alone).
        """
        query: dict[str, Any] = {
            "pool": [pool], "state": sorted(states), "try_number": sorted(try_numbers),
            "order_by": order_by, "limit": min(limit, self.page_size), "offset": 0,
        }  # fmt: skip
        if ended_since is not None:
            query["end_date_gte"] = ended_since.isoformat()
        rows, total = self._read(
            f"task instances of pool {pool!r}",
            f"{_path('~', '~')}/taskInstances",
            _listing("task_instances", _pool_try),
            query=query,
        )
        return PoolListing(tuple(rows), total)

    def xcom_value(
        self, dag_id: str, run_id: str, task_id: str, key: str, map_index: int = -1
    ) -> Any:
        """The value of one XCom entry (one request).

        :param map_index: the pushing task instance's map index, ``-1`` when not mapped.
        """
        shown = label(task_id, map_index)
        where = f"XCom {key!r} of task {shown!r} in run {run_id!r} of DAG {dag_id!r}"
        entry = f"{_path(dag_id, run_id, task_id)}/xcomEntries/{quote(key, safe='')}"
        value = self._read(
            where, entry, lambda answer: answer.value("value"), query={"map_index": map_index}
        )
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError:
                return value
        return value

    def approval(
        self, dag_id: str, run_id: str, task_id: str, map_index: int = -1
    ) -> ApprovalRow | None:
        """The human-in-the-loop request and answer of one task instance (one request).

        ``None`` when the task instance has written no request in this run (it has
        not run yet, or was skipped): the API answers 404 then.

        :param map_index: the task instance's map index, ``-1`` when not mapped.
        """
        shown = label(task_id, map_index)
        where = f"the approval answer of {shown!r} in run {run_id!r} of DAG {dag_id!r}"
        instance = _path(dag_id, run_id, task_id, map_index)

        def approval(answer: AnswerObject) -> ApprovalRow:
            return _approval(answer, task_id, map_index)

        try:
            return self._read(where, f"{instance}/hitlDetails", approval)
        except AirflowApiError as error:
            cause = error.__cause__
            if isinstance(cause, RefusedAnswer) and cause.status == 404:
                return None
            raise

    def pools(self, names: Collection[str] | None = None) -> dict[str, PoolRow]:
        """The pools named ``names`` that exist (every pool for ``None``), in one paged request."""
        if names is not None and not names:
            return {}

        def page(offset: int) -> tuple[list[PoolRow], int]:
            query = {"limit": self.page_size, "offset": offset, "order_by": "name"}
            return self._read("pools", "/api/v2/pools", _listing("pools", _pool), query=query)

        wanted = None if names is None else set(names)
        return {
            pool.name: pool for pool in self._pages(page) if wanted is None or pool.name in wanted
        }

    def pool(self, name: str) -> PoolRow | None:
        """The pool ``name``, ``None`` when there is none (one request)."""
        try:
            return self._read(f"pool {name!r}", f"/api/v2/pools/{quote(name, safe='')}", _pool)
        except AirflowApiError as error:
            cause = error.__cause__
            if isinstance(cause, RefusedAnswer) and cause.status == 404:
                return None
            raise

    def set_pool(self, pool: PoolRow, slots: int, description: str) -> PoolRow:
        """Give ``pool`` ``slots`` and ``description`` (one request: ``PATCH
        /api/v2/pools/{name}``, which needs the permission to edit pools).

        Airflow checks the body as a whole pool (name and whether deferred tasks count
        included) whatever the update mask says: they are sent as read, and not changed.
        """
        body = {
            "name": pool.name,
            "slots": slots,
            "description": description,
            "include_deferred": pool.include_deferred,
        }
        return self._read(
            f"the size of pool {pool.name!r}",
            f"/api/v2/pools/{quote(pool.name, safe='')}",
            _pool,
            query={"update_mask": ["slots", "description"]},
            body=body,
            method="PATCH",
        )

    def xcom_count(self, key: str, since: datetime) -> int:
        """How many XCom entries named ``key``, of any task of any run, were pushed at or
        after ``since``: the newest page of them, one request whatever the DAGs hold (a
        full page counts as a page: enough for a breaker's round)."""
        query = {"xcom_key": key, "order_by": "-timestamp", "limit": self.page_size, "offset": 0}
        entries, _total_entries = self._read(
            f"XCom entries {key!r}",
            f"{_path('~', '~', '~')}/xcomEntries",
            _listing("xcom_entries", _xcom_key),
            query=query,
        )
        return sum(1 for entry in entries if entry.timestamp >= since)

    def variables(self, prefix: str) -> dict[str, str]:
        """The Airflow Variables whose key starts with ``prefix``, by key (one paged request)."""

        def page(offset: int) -> tuple[list[tuple[str, str]], int]:
            query = {"variable_key_pattern": prefix, "limit": self.page_size, "offset": offset}
            return self._read(
                f"Variables {prefix}*", "/api/v2/variables", _listing("variables", _variable),
                query=query,
            )  # fmt: skip

        return {key: value for key, value in self._pages(page) if key.startswith(prefix)}

    def task_instance_count(self, dag_id: str, task_id: str, states: Collection[str]) -> int:
        """How many task instances of ``task_id`` in ``dag_id``, in any run, are in ``states``
        (one request, a count)."""
        query = {"task_id": task_id, "state": sorted(states), "limit": 0, "offset": 0}
        return self._read(
            f"task {task_id!r} of DAG {dag_id!r}",
            f"{_path(dag_id, '~')}/taskInstances",
            _total,
            query=query,
        )

    def version(self) -> str:
        """The Airflow version the API server reports (``GET /api/v2/version``, one request)."""
        return self._read("its version", "/api/v2/version", lambda answer: answer.text("version"))

    def triggerer_runs(self) -> bool:
        """Whether a triggerer is alive, as the API server's health check says
        (``GET /api/v2/monitor/health``, one request)."""
        return self._read("its health", "/api/v2/monitor/health", _triggerer_healthy)

    def pool_count(self) -> int:
        """How many pools exist, from one authenticated read (``GET /api/v2/pools?limit=1``).

        It proves the credentials are accepted for the reads the gate makes.
        """
        return self._read("pools", "/api/v2/pools", _total, query={"limit": 1, "offset": 0})

    # -- plumbing ----------------------------------------------------------------

    def _pages(self, page: Callable[[int], tuple[list[T], int]]) -> Iterator[T]:
        """Every row of a paged listing.

        The next offset follows the rows received, not the page size asked for,
        so a server that caps the page size still gives every row.
        """
        offset = 0
        while True:
            rows, total = page(offset)
            yield from rows
            offset += len(rows)
            if not rows or offset >= total:
                return

    def _read(
        self,
        where: str,
        path: str,
        parse: Callable[[AnswerObject], T],
        *,
        query: dict[str, Any] | None = None,
        body: dict[str, Any] | None = None,
        method: str = "GET",
    ) -> T:
        """One read of ``path``, bounded: what ``parse`` makes of its answer's JSON object.

        :param parse: reads the answer; a field missing or of another type than the API
            documents (``ValueError``) makes it an unreadable answer.
        :param query: the query's parameters; a list is sent as the parameter repeated.
        :param body: a JSON body.
        :param method: the request's HTTP method.
        """
        bounds = BoundedAnswers(self)

        def send(timeout: float) -> BaseHTTPResponse:
            return self._send(method, path, timeout, query=query, body=body)

        def request() -> T:
            answer, data = bounds.fetch(send, method, where)
            if not 200 <= answer.status <= 299:
                text = data.decode("utf-8", "replace")
                raise RefusedAnswer(answer.status, answer.reason, text, answer.headers)
            return parse(AnswerObject(json.loads(data.decode("utf-8"))))

        return self._call(where, request)

    def _send(
        self,
        method: str,
        path: str,
        timeout: float,
        *,
        query: dict[str, Any] | None = None,
        body: dict[str, Any] | None = None,
        bearer: bool = True,
    ) -> BaseHTTPResponse:
        """One request, its answer's body not read yet; never tried again here (the
        reader's retry counts every try) nor redirected.

        :param bearer: whether it carries the reader's token (the token's request does not).
        """
        import urllib3

        headers = {"Accept": "application/json"}
        if bearer and self._bearer:
            headers["Authorization"] = f"Bearer {self._bearer}"
        if body is not None:
            headers["Content-Type"] = "application/json"
        url = self.base_url + path + (f"?{urlencode(query, doseq=True)}" if query else "")
        return self._http().request(
            method,
            url,
            body=None if body is None else json.dumps(body),
            headers=headers,
            timeout=urllib3.Timeout(total=timeout),
            retries=False,
            preload_content=False,
        )

    def _http(self) -> urllib3.PoolManager:
        if self._connections is None:
            import urllib3

            self._connections = urllib3.PoolManager(
                cert_reqs=ssl.CERT_REQUIRED if self.verify_ssl else ssl.CERT_NONE,
                ca_certs=self.ssl_ca_cert,
            )
        return self._connections

    def _call(self, where: str, request: Callable[[], T]) -> T:
        """One read, tried again while Airflow is briefly away; on a 401 with ``login``
        given, one fresh token and one more read."""
        if self._bearer is None:  # the token request, if any, is made and counted first
            self._bearer = self.access_token or self._token() or ""
        renewed = False
        while True:
            try:
                return self._retried(request)
            except ErrorAnswer as error:  # a 5xx or 429 through every try
                cause = error.__cause__
                said = (
                    self._refusal(where, cause, renewed)
                    if isinstance(cause, RefusedAnswer)
                    else f"the Airflow REST API at {self.base_url} refused to read {where}: {error}"
                )
                raise AirflowApiError(f"{said}{self._tries()}") from cause or error
            except RefusedAnswer as error:
                if error.status == 401 and self.login and not renewed:
                    # the token expired, or the server's signing key changed: renew it once
                    self._bearer = self._token() or ""
                    renewed = True
                    continue
                raise AirflowApiError(self._refusal(where, error, renewed)) from error
            except AirflowApiError:
                raise  # the transport's own refusal: a cap, the time limit, the clock
            except ValueError as error:  # not JSON, or not shaped as the API describes it
                raise AirflowApiError(
                    f"the Airflow REST API at {self.base_url} gave an unreadable answer for "
                    f"{where}: {_short(str(error))}"
                ) from error
            except Exception as error:
                limit = self.time_limit
                if limit is not None and limit.expired:  # a request cut short by the limit
                    raise AirflowApiError(
                        f"{limit.describe()} (reading {where}: {type(error).__name__}"
                        f"{self._tries()})"
                    ) from error
                raise AirflowApiError(
                    f"the Airflow REST API at {self.base_url} could not be reached to read "
                    f"{where} ({type(error).__name__}: {_short(str(error))}){self._tries()}"
                    f"{_tls_hint(error)}"
                ) from error

    def _retried(self, request: Callable[[], T]) -> T:
        """``request``, counted, and tried again on a connection error or an answer
        5xx or 429, within the time the decision has left."""

        def once(_left: float) -> T:
            self.requests += 1
            try:
                return request()
            except RefusedAnswer as error:
                if retried_status(error.status):
                    raise ErrorAnswer(
                        error.status, _retry_after(error), error.reason or ""
                    ) from error
                raise

        return self.retry.call(once, bound=self._bound(), tally=self.reads)

    def _bound(self) -> float:
        """Seconds the tries of one read may take: the decision's time left, else one
        request's timeout."""
        return self.timeout if self.time_limit is None else self.time_limit.left()

    def _tries(self) -> str:
        count = self.reads.last
        return f", after {count.describe()}" if count is not None and count.tries > 1 else ""

    def _refusal(self, where: str, error: RefusedAnswer, renewed: bool) -> str:
        text = (
            f"the Airflow REST API at {self.base_url} refused to read {where}: "
            f"HTTP {error.status} {error.reason} {_short(error.body)}"
        ).rstrip()
        if error.status != 401:
            return text
        if renewed:
            return (
                f"{text}; a fresh token for user {self.login!r} was refused as well: check "
                "that every API server signs tokens with the same key ([api_auth] jwt_secret)"
            )
        if self.access_token:
            return (
                f"{text}; the connection's access_token was refused (expired?): renew it, or "
                "give the connection login and password so that fresh tokens are fetched"
            )
        return f"{text}; the API needs credentials: give the connection login and password"

    def _token(self) -> str | None:
        """A JWT from ``POST /auth/token`` for ``login``/``password``, if given."""
        if not self.login:
            return None
        url = f"{self.base_url}/auth/token"
        bounds = BoundedAnswers(self)
        credentials = {"username": self.login, "password": self.password or ""}

        def send(timeout: float) -> BaseHTTPResponse:
            return self._send("POST", "/auth/token", timeout, body=credentials, bearer=False)

        def once(_left: float) -> tuple[int, bytes]:
            self.requests += 1
            answer, body = bounds.fetch(send, "POST", url)
            if retried_status(answer.status):
                raise ErrorAnswer(answer.status, answer.headers.get("Retry-After"))
            return answer.status, body

        try:
            status, data = self.retry.call(once, bound=self._bound(), tally=self.reads)
        except AirflowApiError:
            raise
        except ErrorAnswer as error:
            raise AirflowApiError(
                f"the Airflow API at {self.base_url} could not give a token for user "
                f"{self.login!r}: {error}{self._tries()}"
            ) from error
        except Exception as error:
            raise AirflowApiError(
                f"the Airflow REST API at {self.base_url} could not be reached to get a token "
                f"({type(error).__name__}: {_short(str(error))}){self._tries()}"
                f"{_tls_hint(error)}"
            ) from error
        text = data.decode("utf-8", "replace")
        if status not in (200, 201):
            raise AirflowApiError(
                f"the Airflow API at {self.base_url} refused a token for user {self.login!r}: "
                f"HTTP {status} {_short(text)}; check the connection's login and password"
            )
        try:
            token = json.loads(text)["access_token"]
        except (ValueError, KeyError, TypeError):
            raise AirflowApiError(
                f"POST {url} answered without an access_token: {_short(text)}"
            ) from None
        if not isinstance(token, str) or not token:
            raise AirflowApiError(f"POST {url} answered with an empty access_token")
        _register_secret(token)
        return token


class BoundedAnswers:
    """The reader's requests and their answers, bounded: in time, in size, and on one clock.

    Each request is given at most the time the decision has left; the answer's
    ``Date`` is noted against this worker's clock, and its body is read here, a
    chunk at a time, refused once it is larger than the reader's cap.

    :param reader: the reader whose limits apply and whose clock offset is kept.
    """

    def __init__(self, reader: AirflowApi) -> None:
        self.reader = reader

    def fetch(
        self, send: Callable[[float], BaseHTTPResponse], method: str, target: str
    ) -> tuple[BaseHTTPResponse, bytes]:
        """The answer to ``send`` and its whole body.

        :param send: makes the request, given the seconds it may wait.
        :param method: its HTTP method, for messages.
        :param target: what it reads or its address, for messages.
        """
        timeout = self._timeout(f"{method} {target}")
        sent = _now()
        answer = send(timeout)
        received = _now()
        if answer.status < 400:  # an error answer is no clock reading, with a Date or not
            self._note_clock(sent, received, answer.headers.get("Date"))
        return answer, self._body(answer, f"{method} {self._address(answer)}")

    def _address(self, answer: BaseHTTPResponse) -> str:
        path = answer.url or ""  # the path asked for, or a proxy's whole URL
        return _address(path if "://" in path else f"{self.reader.base_url}{path}")

    def _timeout(self, shown: str) -> float:
        own = self.reader.timeout
        limit = self.reader.time_limit
        if limit is None:
            return own
        timeout = limit.request_timeout(own)
        if timeout is None:
            raise AirflowApiError(
                f"{limit.describe()} (no time was left for {shown} after "
                f"{self.reader.requests - 1} requests)"
            )
        return timeout

    def _note_clock(
        self, sent: pendulum.DateTime, received: pendulum.DateTime, date: str | None
    ) -> None:
        """Keep what every answer so far says of the server's clock, together."""
        source = f"the Airflow REST API at {self.reader.base_url}"
        try:
            found = ClockOffset.measured(sent, received, server_date(date, source), source)
        except ClockError as error:
            raise AirflowApiError(str(error)) from error
        known = self.reader.clock_offset
        self.reader.clock_offset = found if known is None else known.combined(found)

    def _body(self, response: BaseHTTPResponse, shown: str) -> bytes:
        """The whole body, read a chunk at a time; refused once it passes the cap."""
        cap = self.reader.max_response_bytes
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > cap:
            self._drop(response)
            raise AirflowApiError(self._too_large(shown, f"declares {int(declared)} bytes"))
        chunks: list[bytes] = []
        size = 0
        limit = self.reader.time_limit
        while True:
            if limit is not None and limit.expired:
                self._drop(response)
                raise AirflowApiError(f"{limit.describe()} (while reading the answer to {shown})")
            chunk = response.read(min(_CHUNK, cap + 1 - size))
            if not chunk:
                break
            size += len(chunk)
            if size > cap:
                self._drop(response)
                raise AirflowApiError(self._too_large(shown, f"sent more than {cap} bytes"))
            chunks.append(chunk)
        response.release_conn()
        return b"".join(chunks)

    def _too_large(self, shown: str, what: str) -> str:
        cap = self.reader.max_response_bytes
        return (
            f"the answer to {shown} {what}, more than the {cap} bytes a gate reads "
            "([retry_window] api_max_response_bytes), so it was not read: ask for smaller "
            "pages (page_size) or raise api_max_response_bytes"
        )

    @staticmethod
    def _drop(response: BaseHTTPResponse) -> None:
        # the rest of the body is never read: the connection cannot be used again
        response.close()
        response.release_conn()


def _retry_after(error: RefusedAnswer) -> str | None:
    headers = error.headers or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    return str(value) if value else None


def _address(url: str) -> str:
    """A request's address as messages show it: no credentials, no query, masked, capped."""
    try:
        parts = urlsplit(without_userinfo(url))
    except ValueError:
        return safe_text(url, limit=200)
    return safe_text(parts._replace(query="", fragment="").geturl(), limit=200)


def _register_secret(token: str) -> None:
    """Tell Airflow's masker about a token, so no log or stored text can show it."""
    try:
        from airflow.sdk.log import mask_secret
    except ImportError:  # outside Airflow nothing logs through its masker
        return
    mask_secret(token)


def check_reading_settings(page_size: object, timeout: object) -> None:
    """Refuse a page size or timeout the reader cannot use, naming the setting and the value."""
    checked_page_size(page_size)
    checked_timeout(timeout)


def connection_url(host: str | None, schema: str | None, port: int | None, conn_id: str) -> str:
    """The base URL an Airflow connection describes.

    :param host: the connection's host: a URL (``http://api:8080``) or a name.
    :param schema: ``http`` or ``https`` when ``host`` is a bare name.
    :param port: the port when ``host`` does not give one.
    :param conn_id: the connection's id, for messages.
    """
    if not host:
        raise AirflowApiError(
            f"the Airflow connection {conn_id!r} has no host; set it to the API server's URL, "
            "e.g. http://localhost:8080"
        )
    if "://" in host:
        parts = urlsplit(host)
        if port and parts.port is None and parts.hostname:
            netloc = f"{parts.netloc}:{port}"
            return parts._replace(netloc=netloc).geturl().rstrip("/")
        return host.rstrip("/")
    scheme = schema if schema in ("http", "https") else "http"
    return f"{scheme}://{host}{f':{port}' if port else ''}".rstrip("/")


def _row(item: AnswerObject) -> TaskInstanceRow:
    return TaskInstanceRow(
        task_id=item.text("task_id"),
        map_index=item.number("map_index"),
        state=item.optional_text("state"),
        try_number=item.number("try_number"),
        max_tries=item.number("max_tries"),
        start_date=item.optional_moment("start_date"),
        end_date=item.optional_moment("end_date"),
        pool=item.text("pool"),
        pool_slots=item.number("pool_slots"),
        observed_at=_now(),
    )


def _listing(
    name: str, row: Callable[[AnswerObject], T]
) -> Callable[[AnswerObject], tuple[list[T], int]]:
    """Reads one page of a listing: its rows named ``name``, each read by ``row``, and how
    many rows the whole listing has."""

    def page(answer: AnswerObject) -> tuple[list[T], int]:
        return [row(item) for item in answer.items(name)], _total(answer)

    return page


def _total(answer: AnswerObject) -> int:
    return answer.number("total_entries")


def _triggerer_healthy(answer: AnswerObject) -> bool:
    triggerer = answer.optional_item("triggerer")
    return triggerer is not None and triggerer.optional_text("status") == "healthy"


def _events(answer: AnswerObject) -> list[dict[str, Any]]:
    return [
        {
            "event": item.text("event"),
            "tryNumber": item.optional_number("try_number"),
            "mapIndex": item.optional_number("map_index"),
            "extra": item.optional_text("extra"),
            "when": item.moment("when"),
        }
        for item in answer.items("event_logs")
    ]


def _pool(item: AnswerObject) -> PoolRow:
    return PoolRow(
        name=item.text("name"),
        slots=item.number("slots"),
        occupied=item.number("occupied_slots"),
        deferred=item.number("deferred_slots"),
        open=item.number("open_slots"),
        include_deferred=item.flag("include_deferred"),
        description=item.optional_text("description"),
    )


def _approval(answer: AnswerObject, task_id: str, map_index: int) -> ApprovalRow:
    user = answer.optional_item("responded_by_user")
    instance = answer.item("task_instance")
    return ApprovalRow(
        task_id=task_id,
        map_index=map_index,
        state=instance.optional_text("state"),
        try_number=instance.number("try_number"),
        options=answer.texts("options"),
        chosen=answer.texts("chosen_options"),
        user_id=None if user is None else user.text("id"),
        user_name=None if user is None else user.text("name"),
        responded_at=answer.optional_moment("responded_at"),
        params_input=dict(answer.value("params_input") or {}),
        asked_at=answer.moment("created_at"),
        observed_at=_now(),
    )


def _xcom_key(item: AnswerObject) -> XComKey:
    return XComKey(
        item.text("task_id"), item.number("map_index"), item.text("key"), item.moment("timestamp")
    )


def _variable(item: AnswerObject) -> tuple[str, str]:
    return item.text("key"), item.optional_text("value") or ""


def _pool_try(item: AnswerObject) -> PoolTry:
    """One row of the task instance listing as a try."""
    map_index = item.optional_number("map_index")
    return PoolTry(
        dag_id=item.text("dag_id"),
        run_id=item.text("dag_run_id"),
        task_id=item.text("task_id"),
        map_index=-1 if map_index is None else map_index,
        state=item.optional_text("state"),
        try_number=item.optional_number("try_number") or 0,
        max_tries=item.optional_number("max_tries") or 0,
        start_date=item.optional_moment("start_date"),
        end_date=item.optional_moment("end_date"),
    )


def _path(dag_id: str, run_id: str, *task: str | int) -> str:
    """The address of a DAG run (``~``: any), or of a task instance in it."""
    parts = ["dags", dag_id, "dagRuns", run_id, *(["taskInstances"] if task else []), *task]
    return "/api/v2/" + "/".join(quote(str(part), safe="~") for part in parts)


def _now() -> pendulum.DateTime:
    # a whole microsecond clock read once per answer
    return pendulum.from_timestamp(time.time(), tz="UTC")


def _short(text: str | None, limit: int = 300) -> str:
    # an answer or a client error may echo credentials: masked before any message holds it
    return safe_text((text or "").strip().replace("\n", " "), limit=limit)


def _tls_hint(error: BaseException) -> str:
    """What to do when TLS stopped a request, or nothing."""
    found = list(causes(error))
    verify_failed = any(isinstance(cause, ssl.SSLCertVerificationError) for cause in found)
    handshake_failed = any(tls_error(cause) for cause in found)
    if verify_failed:
        return (
            "; the server's TLS certificate could not be verified: set the connection's extra "
            "ssl_ca_cert to the CA certificates that signed it (verify_ssl false turns the "
            "check off; only on a trusted network)"
        )
    if handshake_failed:
        return "; the TLS handshake failed: check that the server speaks https at that URL"
    return ""
