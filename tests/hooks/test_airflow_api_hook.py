"""The REST API hook against a real local HTTP(S) server that imitates Airflow's API."""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import socket
import ssl
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pendulum
import pytest

from airflow_retrywindow.exceptions import AirflowApiError
from airflow_retrywindow.hooks.airflow_api import AirflowApiHook
from airflow_retrywindow.hooks.api_reader import (
    DEFAULT_CONN_ID,
    DEFAULT_PAGE_SIZE,
    DEFAULT_TIMEOUT,
    AirflowApi,
    PoolRow,
)
from airflow_retrywindow.hooks.connection_type import CONN_TYPE, HOOK_NAME
from tests.hooks.fake_api import (
    VERSION,
    FakeAirflowApi,
    Served,
    pool,
    serve,
    task_instance,
    xcom_entry,
)

TASKS = [f"load_{n:02d}" for n in range(7)]
SECRET = "url-secret-5d1e"  # a password in a host URL: never sent, never shown


@pytest.fixture
def api() -> FakeAirflowApi:
    return FakeAirflowApi(
        task_instances=[task_instance(task_id) for task_id in TASKS],
        xcoms=[xcom_entry(task_id, "rw_failure__transient") for task_id in TASKS]
        + [xcom_entry("load_00", "return_value")],
        pools=[pool(f"pool_{n}", 4, occupied=n % 3) for n in range(5)],
    )


@pytest.fixture
def server(api: FakeAirflowApi) -> Iterator[Served]:
    yield from serve(api)


def connect(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: object) -> str:
    """Create the connection ``conn_id`` the way a deployment's environment does."""
    fields.setdefault("conn_type", CONN_TYPE)
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))
    return conn_id


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- what Airflow sees ----------------------------------------------------------------


def test_the_hook_declares_its_connection_type() -> None:
    from airflow.sdk import BaseHook

    assert issubclass(AirflowApiHook, BaseHook)
    assert AirflowApiHook.conn_type == CONN_TYPE == "retrywindow_airflow_api"
    assert AirflowApiHook.hook_name == HOOK_NAME
    assert AirflowApiHook.conn_name_attr == "airflow_conn_id"
    assert AirflowApiHook.default_conn_name == DEFAULT_CONN_ID == "airflow_api_default"
    hook = AirflowApiHook()
    assert (hook.airflow_conn_id, hook.page_size, hook.timeout) == (
        DEFAULT_CONN_ID,
        DEFAULT_PAGE_SIZE,
        DEFAULT_TIMEOUT,
    )
    behaviour = AirflowApiHook.get_ui_field_behaviour()
    assert behaviour["relabeling"] == {"host": "API server URL"}
    assert set(behaviour["hidden_fields"]) == {"schema", "port"}
    with pytest.raises(ValueError, match="page_size must be a whole number from 1 to 1000"):
        AirflowApiHook(page_size=0)


def test_an_http_connection_is_read_the_same_way(
    server: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    # what docker/init.sh and the test stack create
    conn = connect(
        monkeypatch, "rw_http", conn_type="http", host=server.url, login="reader",
        password="reader-pw",
    )  # fmt: skip
    reader = AirflowApiHook(conn).get_conn()
    assert isinstance(reader, AirflowApi)
    assert reader.base_url == server.url
    assert len(reader.task_instances("etl", "run_1", TASKS)) == len(TASKS)


def test_a_connection_in_uri_form_keeps_its_url_and_extras(
    server: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.sdk.definitions.connection import Connection

    uri = Connection(
        conn_id="rw_uri",
        conn_type=CONN_TYPE,
        host=server.url,
        login="reader",
        password="reader-pw",
        extra=json.dumps({"verify_ssl": False}),
    ).get_uri()
    assert uri.startswith("retrywindow-airflow-api://http://")
    monkeypatch.setenv("AIRFLOW_CONN_RW_URI", uri)
    reader = AirflowApiHook("rw_uri").get_conn()
    assert (reader.base_url, reader.login, reader.verify_ssl) == (server.url, "reader", False)
    assert len(reader.pools({"pool_3"})) == 1


def test_get_conn_keeps_one_reader(server: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    conn = connect(monkeypatch, "rw_same", host=server.url, login="reader", password="reader-pw")
    hook = AirflowApiHook(conn, page_size=3, timeout=5)
    reader = hook.get_conn()
    assert reader is hook.get_conn()
    assert (reader.base_url, reader.page_size, reader.timeout, reader.login) == (
        server.url,
        3,
        5.0,
        "reader",
    )


def test_a_missing_connection_says_how_to_create_it() -> None:
    with pytest.raises(AirflowApiError) as raised:
        AirflowApiHook("rw_nowhere").get_conn()
    assert "the Airflow connection 'rw_nowhere' for the REST API could not be read" in str(
        raised.value
    )
    assert "create it with host" in str(raised.value)


# -- paging -------------------------------------------------------------------------------


def test_listings_are_read_page_by_page(server: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    conn = connect(monkeypatch, "rw_pages", host=server.url, login="reader", password="reader-pw")
    reader = AirflowApiHook(conn, page_size=3).get_conn()

    rows = reader.task_instances("etl", "run_1", TASKS)
    assert sorted(row.task_id for row in rows) == TASKS
    assert {(row.state, row.try_number, row.pool) for row in rows} == {
        ("failed", 1, "default_pool")
    }
    assert rows[0].start_date is not None and rows[0].start_date.isoformat().endswith("+00:00")
    # a token, then 7 rows in pages of 3: offsets 0, 3, 6
    assert reader.requests == 1 + 3
    listed = [r for r in server.api.received if r.path.endswith("/taskInstances/list")]
    assert [r.body["page_offset"] for r in listed] == [0, 3, 6]
    assert {r.body["page_limit"] for r in listed} == {3}
    assert listed[0].body["task_ids"] == TASKS

    keys = reader.xcom_keys("etl", "run_1", "rw_failure__")
    assert sorted(key.task_id for key in keys) == TASKS  # return_value filtered out
    assert reader.requests == 4 + 3

    found = reader.pools({"pool_1", "pool_4", "absent"})
    assert reader.requests == 7 + 2  # 5 pools in pages of 3
    assert set(found) == {"pool_1", "pool_4"}
    assert found["pool_1"] == PoolRow("pool_1", 4, 1, 0, 3, False)


def test_a_server_capping_the_page_size_still_gives_every_row(
    server: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.api.max_page = 2  # the server's maximum_page_limit is below what is asked
    conn = connect(monkeypatch, "rw_cap", host=server.url, login="reader", password="reader-pw")
    reader = AirflowApiHook(conn, page_size=5).get_conn()
    assert len(reader.task_instances("etl", "run_1", TASKS)) == len(TASKS)
    assert reader.requests == 1 + 4  # offsets follow the rows received: 0, 2, 4, 6


def test_a_pool_row_is_the_one_pool_shape_the_gate_decides_with() -> None:
    row = PoolRow("positions_db", 2, 1, 1, 1, True)
    assert row.open_slots() == 1
    assert row.as_dict()["includeDeferred"] is True


# -- tokens -------------------------------------------------------------------------------


def test_a_pool_is_counted_with_one_page_of_its_rows_in_one_request(
    server: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = connect(monkeypatch, "rw_pool", host=server.url, login="reader", password="reader-pw")
    server.api.task_instances[0]["end_date"] = None  # still running
    server.api.task_instances[1]["start_date"] = "2026-03-02T07:00:00.250000+02:00"
    reader = AirflowApiHook(conn, page_size=3).get_conn()
    found = reader.pool_listing("default_pool", {"failed", "running"}, try_numbers=(1, 2), limit=5)
    assert found.total == len(TASKS)
    assert [item.task_id for item in found.rows] == TASKS[:3]  # a page, never more
    assert reader.requests == 1 + 1  # a token, then one request whatever the pool holds
    (listed,) = [r for r in server.api.received if r.path.endswith("/taskInstances")]
    assert listed.method == "GET"
    assert listed.query["pool"] == ["default_pool"]
    assert listed.query["state"] == ["failed", "running"]
    assert listed.query["try_number"] == ["1", "2"]
    assert listed.query["limit"] == ["3"] and listed.query["order_by"] == ["id"]
    first, second = found.rows[0], found.rows[1]
    assert (first.dag_id, first.run_id, first.task_id, first.map_index) == (
        "etl", "run_1", "load_00", -1,
    )  # fmt: skip
    assert (first.state, first.try_number, first.max_tries) == ("failed", 1, 3)
    assert first.end_date is None and second.end_date == pendulum.datetime(2026, 3, 2, 5, 4)
    # an offset is read as the same moment, kept in UTC like every time the reader gives
    assert second.start_date == pendulum.datetime(2026, 3, 2, 5, 0, 0, 250000)
    assert second.start_date is not None and second.start_date.timezone_name == "UTC"
    counted = reader.pool_listing("default_pool", {"failed"})  # a count alone: no rows
    assert counted.rows == () and counted.total == len(TASKS)
    server.api.expire_tokens()  # an error answer is raised as before: renewed once
    assert reader.pool_listing("default_pool", {"failed"}).total == len(TASKS)
    listing = "/api/v2/dags/~/dagRuns/~/taskInstances"
    assert server.api.paths()[-3:] == [listing, "/auth/token", listing]


def test_a_pool_listing_not_shaped_as_the_api_describes_is_an_unreadable_answer(
    server: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = connect(monkeypatch, "rw_shape", host=server.url, login="reader", password="reader-pw")
    server.api.task_instances[2]["start_date"] = "yesterday"
    reader = AirflowApiHook(conn).get_conn()
    with pytest.raises(AirflowApiError) as raised:
        reader.pool_listing("default_pool", {"failed"}, limit=10)
    assert "gave an unreadable answer for task instances of pool 'default_pool'" in str(
        raised.value
    )


def test_an_expired_token_is_renewed_once_and_the_read_repeated(
    server: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = connect(monkeypatch, "rw_renew", host=server.url, login="reader", password="reader-pw")
    reader = AirflowApiHook(conn).get_conn()
    assert len(reader.pools({"pool_0"})) == 1
    assert reader.requests == 2
    server.api.expire_tokens()  # e.g. [api_auth] jwt_expiration_time passed
    assert len(reader.pools({"pool_0"})) == 1
    # the refused read, a fresh token, the read again
    assert reader.requests == 5
    assert server.api.paths()[2:] == ["/api/v2/pools", "/auth/token", "/api/v2/pools"]
    tokens = [r.authorization for r in server.api.received if r.path == "/api/v2/pools"]
    assert tokens == ["Bearer jwt-0", "Bearer jwt-0", "Bearer jwt-1"]
    # the fresh token serves later reads
    reader.pools({"pool_0"})
    assert server.api.paths()[-1] == "/api/v2/pools" and reader.requests == 6


def test_a_second_401_is_an_error_after_one_renewal(
    server: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = connect(monkeypatch, "rw_refuse", host=server.url, login="reader", password="reader-pw")
    server.api.refuse_every_token = True  # e.g. API servers with different signing keys
    reader = AirflowApiHook(conn).get_conn()
    with pytest.raises(AirflowApiError) as raised:
        reader.task_instances("etl", "run_1", ["load_00"])
    message = str(raised.value)
    assert "refused to read task instances of run 'run_1' of DAG 'etl': HTTP 401" in message
    assert "a fresh token for user 'reader' was refused as well" in message
    assert "reader-pw" not in message
    assert server.api.paths() == [
        "/auth/token",
        "/api/v2/dags/~/dagRuns/~/taskInstances/list",
        "/auth/token",
        "/api/v2/dags/~/dagRuns/~/taskInstances/list",
    ]
    assert reader.requests == 4


def test_an_access_token_is_used_as_given_and_never_renewed(
    server: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = server.api.issue_token()
    conn = connect(monkeypatch, "rw_token", host=server.url, extra={"access_token": token})
    reader = AirflowApiHook(conn).get_conn()
    assert len(reader.pools({"pool_2"})) == 1
    assert [(r.path, r.authorization) for r in server.api.received] == [
        ("/api/v2/pools", f"Bearer {token}")
    ]
    assert reader.requests == 1
    server.api.expire_tokens()
    with pytest.raises(AirflowApiError) as raised:
        reader.pools({"pool_2"})
    assert "HTTP 401" in str(raised.value)
    assert "access_token was refused (expired?)" in str(raised.value)
    assert token not in str(raised.value)
    assert "/auth/token" not in server.api.paths()  # no login: nothing to renew it with


def test_a_wrong_password_is_refused_at_the_token(
    server: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = connect(monkeypatch, "rw_wrong", host=server.url, login="reader", password="wrong-pw")
    with pytest.raises(AirflowApiError) as raised:
        AirflowApiHook(conn).get_conn().pools({"pool_0"})
    assert "refused a token for user 'reader': HTTP 401" in str(raised.value)
    assert "wrong-pw" not in str(raised.value)


# -- test_connection ----------------------------------------------------------------------


def test_test_connection_succeeds_with_an_authenticated_read(
    server: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = connect(monkeypatch, "rw_ok", host=server.url, login="reader", password="reader-pw")
    hook = AirflowApiHook(conn)
    ok, message = hook.test_connection()
    assert ok, message
    assert message == f"Airflow {VERSION} at {server.url}: user 'reader' may read (5 pools)"
    assert server.api.paths() == ["/auth/token", "/api/v2/version", "/api/v2/pools"]
    assert server.api.received[-1].query["limit"] == ["1"]
    # the test used a reader of its own
    assert hook.get_conn().requests == 0


def test_airflow_finds_the_hook_by_connection_type_and_tests_through_it(
    server: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the path of Airflow's "Test" button: Connection.test_connection -> get_hook -> the hook
    from airflow.sdk import BaseHook

    conn = connect(monkeypatch, "rw_button", host=server.url, login="reader", password="reader-pw")
    hook = BaseHook.get_hook(conn)
    assert isinstance(hook, AirflowApiHook) and hook.airflow_conn_id == conn
    ok, message = BaseHook.get_connection(conn).test_connection()
    assert ok, message
    assert "user 'reader' may read" in message


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("wrong password", "refused a token for user 'reader': HTTP 401"),
        ("no credentials", "refused to read pools: HTTP 401"),
        ("closed port", "could not be reached to get a token"),
        ("not an API", "refused to read its version: HTTP 404"),
        ("bad extra", "extra verify_ssl must be true or false"),
        ("no connection", "the Airflow connection 'rw_case' for the REST API could not be read"),
    ],
)
def test_test_connection_says_what_failed_without_credentials(
    server: Served, monkeypatch: pytest.MonkeyPatch, case: str, expected: str
) -> None:
    fields: dict[str, object] = {"host": server.url, "login": "reader", "password": "pw-9c2e"}
    if case == "no credentials":
        fields = {"host": server.url}
    elif case == "closed port":
        fields["host"] = f"http://reader:{SECRET}@127.0.0.1:{closed_port()}"
        monkeypatch.setenv("AIRFLOW__RETRY_WINDOW__API_RETRIES", "3")
        monkeypatch.setenv("AIRFLOW__RETRY_WINDOW__API_RETRY_WAIT_MIN", "0.01")
        monkeypatch.setenv("AIRFLOW__RETRY_WINDOW__API_RETRY_WAIT_MAX", "0.02")
        expected = "Connection refused), after 3 tries over "
    elif case == "not an API":
        fields = {"host": f"{server.url}/elsewhere", "extra": {"access_token": "tok-3f1"}}
    elif case == "bad extra":
        fields["extra"] = {"verify_ssl": "sometimes"}
    if case != "no connection":
        connect(monkeypatch, "rw_case", **fields)
    ok, message = AirflowApiHook("rw_case").test_connection()
    assert not ok
    assert expected in message
    assert "pw-9c2e" not in message and SECRET not in message


# -- credentials in the host URL ----------------------------------------------------------


def test_credentials_in_the_host_url_are_neither_sent_nor_shown(
    server: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = server.url.replace("http://", f"http://intruder:{SECRET}@")
    conn = connect(monkeypatch, "rw_userinfo", host=host, login="reader", password="reader-pw")
    reader = AirflowApiHook(conn).get_conn()
    assert reader.base_url == server.url
    reader.pools({"pool_0"})
    assert all(SECRET not in json.dumps(dataclasses.asdict(r)) for r in server.api.received)
    server.api.refuse_every_token = True
    with pytest.raises(AirflowApiError) as raised:
        reader.xcom_keys("etl", "run_1", "rw_")
    assert SECRET not in str(raised.value) and server.url in str(raised.value)


# -- TLS ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, made here."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "retrywindow test API")])
    now = datetime.now(timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    folder = tmp_path_factory.mktemp("tls")
    cert_path, key_path = folder / "api.pem", folder / "api.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.fixture
def https_server(api: FakeAirflowApi, certificate: tuple[Path, Path]) -> Iterator[Served]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)
    yield from serve(api, tls=context)


def test_an_unknown_certificate_is_refused_with_what_to_do(
    https_server: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = connect(
        monkeypatch, "rw_tls", host=https_server.url, login="reader", password="reader-pw"
    )
    with pytest.raises(AirflowApiError) as raised:
        AirflowApiHook(conn).get_conn().pools({"pool_0"})
    message = str(raised.value)
    assert f"the Airflow REST API at {https_server.url} could not be reached" in message
    assert "the server's TLS certificate could not be verified" in message
    assert "ssl_ca_cert" in message
    assert https_server.api.received == []  # nothing was sent over an unverified channel
    ok, tested = AirflowApiHook(conn).test_connection()
    assert not ok and "TLS certificate could not be verified" in tested


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
@pytest.mark.parametrize(
    "extra",
    [
        pytest.param("ca", id="ssl_ca_cert"),
        pytest.param({"verify_ssl": False}, id="verify_ssl false"),
        pytest.param({"verify_ssl": "false"}, id="verify_ssl 'false'"),
    ],
)
def test_a_trusted_or_unverified_certificate_is_read(
    https_server: Served,
    certificate: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    extra: object,
) -> None:
    if extra == "ca":
        extra = {"ssl_ca_cert": str(certificate[0]), "verify_ssl": True}
    conn = connect(
        monkeypatch, "rw_tls", host=https_server.url, login="reader", password="reader-pw",
        extra=extra,
    )  # fmt: skip
    assert len(AirflowApiHook(conn).get_conn().pools({"pool_0", "pool_1"})) == 2
    ok, message = AirflowApiHook(conn).test_connection()
    assert ok, message
    assert message.startswith(f"Airflow {VERSION} at {https_server.url}")


def test_every_token_obtained_is_registered_with_the_masker(
    server: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.sdk.log import redact  # type: ignore[attr-defined]

    conn = connect(monkeypatch, "rw_masked", host=server.url, login="reader", password="reader-pw")
    reader = AirflowApiHook(conn).get_conn()
    reader.pools({"pool_0"})
    server.api.expire_tokens()
    reader.pools({"pool_0"})  # a second, renewed token
    for token in ("jwt-0", "jwt-1"):
        assert token not in str(redact(f"read with Bearer-less header {token}"))
