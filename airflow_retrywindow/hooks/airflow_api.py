"""The Airflow hook over the REST API connection the gate and the sensor read.

It builds the REST reader (:mod:`airflow_retrywindow.hooks.api_reader`) from an
Airflow connection and tests it; the reader itself imports no Airflow.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from airflow_retrywindow.configuration import api_max_response_bytes, checked_max_response_bytes
from airflow_retrywindow.exceptions import AirflowApiError
from airflow_retrywindow.hooks import connection_type
from airflow_retrywindow.hooks.api_reader import (
    DEFAULT_CONN_ID,
    DEFAULT_PAGE_SIZE,
    DEFAULT_TIMEOUT,
    AirflowApi,
    check_reading_settings,
    connection_url,
)
from airflow_retrywindow.redaction import describe_exception, safe_text
from airflow_retrywindow.timing.time_limit import TimeLimit

#: the longest message ``test_connection`` returns
_MESSAGE_LIMIT = 1000


class AirflowApiHook(BaseHook):
    """Reads Airflow's own REST API (``/api/v2``) with an Airflow connection.

    The connection (type ``retrywindow_airflow_api``; connections of type ``http``
    are read the same way):

    * ``host`` - the API server's URL, e.g. ``http://airflow-apiserver:8080`` (a bare
      host name gets ``schema`` or ``http`` and ``port``); credentials in the URL
      (``user:password@``) are dropped, never sent nor shown;
    * ``login`` and ``password`` - exchanged for a JWT at ``POST /auth/token``. When a
      read is answered 401 Unauthorized (the token expired), the reader fetches one
      fresh token and repeats that read once; a second 401 is an error;
    * ``extra`` ``access_token`` - a JWT used as given instead (a 401 is an error
      unless login and password are given too);
    * ``extra`` ``verify_ssl`` (default true) and ``ssl_ca_cert`` (a CA bundle path).

    :param airflow_conn_id: the connection's id.
    :param page_size: rows asked for per page of a listing (1 to 1000; the server may
        cap it, ``[api] maximum_page_limit``).
    :param timeout: seconds to wait for each request.
    :param max_response_bytes: the largest answer body read (default: ``[retry_window]
        api_max_response_bytes``).
    :param time_limit: the time the whole decision may take, if it is limited.
    """

    conn_name_attr = "airflow_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    conn_type = connection_type.CONN_TYPE
    hook_name = connection_type.HOOK_NAME

    def __init__(
        self,
        airflow_conn_id: str = DEFAULT_CONN_ID,
        *,
        page_size: int = DEFAULT_PAGE_SIZE,
        timeout: float = DEFAULT_TIMEOUT,
        max_response_bytes: int | None = None,
        time_limit: TimeLimit | None = None,
    ) -> None:
        super().__init__()
        check_reading_settings(page_size, timeout)
        self.airflow_conn_id = airflow_conn_id
        self.page_size = page_size
        self.timeout = timeout
        self.max_response_bytes = (
            api_max_response_bytes()
            if max_response_bytes is None
            else checked_max_response_bytes(max_response_bytes)
        )
        self.time_limit = time_limit
        self._api: AirflowApi | None = None

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """How Airflow's connection form shows the standard fields.

        Airflow 3.2 and later read the same from the provider info instead.
        """
        return connection_type.field_behaviour()

    def get_conn(self) -> AirflowApi:
        """The reader for this connection: one per hook, its token and request count kept.

        Reading the connection makes no request; the first read fetches the token.

        :raises AirflowApiError: when the connection is missing or unusable.
        """
        if self._api is None:
            self._api = self._reader()
        return self._api

    def test_connection(self) -> tuple[bool, str]:
        """Whether the API server answers an authenticated read, and if not, what failed.

        Reads ``GET /api/v2/version`` (after ``POST /auth/token`` with login and
        password) and ``GET /api/v2/pools?limit=1``, which needs the credentials.
        Never raises; the message holds no credentials.
        """
        try:
            api = self._reader()  # a fresh reader: a test shares no token nor count
            version = api.version()
            pools = api.pool_count()
        except AirflowApiError as error:
            return False, safe_text(str(error), limit=_MESSAGE_LIMIT)
        except Exception as error:
            return False, describe_exception(error, limit=_MESSAGE_LIMIT)
        if api.login:
            who = f"user {api.login!r}"
        elif api.access_token:
            who = "the access token"
        else:
            who = "a client without credentials"
        return True, (
            f"Airflow {safe_text(version, limit=40)} at {api.base_url}: {who} may read "
            f"({pools} pool{'' if pools == 1 else 's'})"
        )

    def _reader(self) -> AirflowApi:
        conn_id = self.airflow_conn_id
        try:
            conn = self.get_connection(conn_id)
        except Exception as error:
            raise AirflowApiError(
                f"the Airflow connection {conn_id!r} for the REST API could not be read "
                f"({describe_exception(error)}); create it with host (the API server's "
                "URL, e.g. http://localhost:8080), login and password"
            ) from error
        extra = conn.extra_dejson if isinstance(conn.extra_dejson, dict) else {}
        return AirflowApi(
            connection_url(conn.host, conn.schema, conn.port, conn_id),
            login=conn.login or None,
            password=conn.password or None,
            access_token=extra.get("access_token") or None,
            verify_ssl=_flag(extra.get("verify_ssl"), "verify_ssl", conn_id),
            ssl_ca_cert=extra.get("ssl_ca_cert") or None,
            page_size=self.page_size,
            timeout=self.timeout,
            max_response_bytes=self.max_response_bytes,
            time_limit=self.time_limit,
        )


def _flag(value: object, name: str, conn_id: str) -> bool:
    # absent, or null as a connection form may store it: the safe default, verify
    if value is None:
        return True
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise AirflowApiError(f"connection {conn_id!r}: extra {name} must be true or false")
