"""A credential is masked by its name, in whatever syntax a library prints it.

The names come from Airflow itself, read here when the test runs (its secrets
masker's ``DEFAULT_SENSITIVE_FIELDS`` and ``[core] sensitive_var_conn_names``), and
from the credential names Airflow's list lacks (HTTP cookies, Azure connection
strings, presigned URLs' signatures). Each is drawn in a random case, with ``-`` and
``_`` swapped, and put in a syntax this test writes itself: a query string, a URL
fragment, JSON, a Python dict or keyword repr, a DSN, a ``;``-separated connection
string, a header line, or percent-encoded inside another URL. The value, random,
must be gone; the text around it must stay.
"""

from __future__ import annotations

import json
import os
import secrets
import string
import subprocess
import sys
from collections.abc import Callable, Iterator
from urllib.parse import quote

import pytest
from airflow.configuration import conf
from airflow.sdk._shared.secrets_masker import DEFAULT_SENSITIVE_FIELDS
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_retrywindow.redaction import MASK, safe_text, without_credentials

#: credential names Airflow's list lacks, as services spell them
NAMES_AIRFLOW_LACKS = (
    "Cookie", "Set-Cookie", "AccountKey", "SharedAccessSignature", "sig",
    "X-Amz-Signature", "X-Amz-Credential", "X-Amz-Security-Token",
    "X-Goog-Signature", "X-Goog-Credential",
)  # fmt: skip
#: names a deployment adds in ``[core] sensitive_var_conn_names``
CONFIGURED = "ledger_pin, vault-lease"
CONFIGURED_ENV = "AIRFLOW__CORE__SENSITIVE_VAR_CONN_NAMES"
#: Airflow matches its names anywhere in a longer one
PREFIXES = ("", "", "db_", "x-", "my-app-")


@pytest.fixture(scope="module", autouse=True)
def configured_names() -> Iterator[None]:
    before = os.environ.get(CONFIGURED_ENV)
    os.environ[CONFIGURED_ENV] = CONFIGURED
    yield
    if before is None:
        del os.environ[CONFIGURED_ENV]
    else:
        os.environ[CONFIGURED_ENV] = before


def airflows_names() -> list[str]:
    """Airflow's sensitive names as this Airflow has them configured, sorted."""
    configured = conf.get("core", "sensitive_var_conn_names", fallback="") or ""
    extra = {name.strip() for name in configured.split(",") if name.strip()}
    return sorted(set(DEFAULT_SENSITIVE_FIELDS) | extra)


@st.composite
def spelled(draw: st.DrawFn, name: str, prefixed: bool) -> str:
    """``name`` in a random case, each ``-`` or ``_`` either of them."""
    prefix = draw(st.sampled_from(PREFIXES)) if prefixed else ""
    letters = []
    for char in prefix + name:
        if char in "-_":
            letters.append(draw(st.sampled_from("-_")))
        else:
            letters.append(char.upper() if draw(st.booleans()) else char.lower())
    return "".join(letters)


@st.composite
def credential_name(draw: st.DrawFn) -> str:
    if draw(st.booleans()):
        return draw(spelled(draw(st.sampled_from(airflows_names())), prefixed=True))
    return draw(spelled(draw(st.sampled_from(NAMES_AIRFLOW_LACKS)), prefixed=False))


# -- the syntaxes: (name, value) -> (text, the forms the value takes in it) ----------------

Syntax = Callable[[str, str], str]


def query(name: str, value: str) -> str:
    return f"GET https://api.example.test/v1/rows?page=2&{name}={quote(value, safe='')}&region=eu"


def fragment(name: str, value: str) -> str:
    return f"redirected to https://app.example.test/cb#{name}={quote(value, safe='')}&state=s42"


def json_object(name: str, value: str) -> str:
    return "bad request body " + json.dumps({"user": "etl", name: value, "region": "eu"})


def python_dict(name: str, value: str) -> str:
    return f"headers { ({'Accept': 'application/json', name: value, 'region': 'eu'})!r}"


def keywords(name: str, value: str) -> str:
    return f"connect(host='db.example.test', {name}={value!r}, region='eu')"


def dsn(name: str, value: str) -> str:
    return f"could not connect: host=db.example.test port=5432 {name}={value} dbname=wh"


def connection_string(name: str, value: str) -> str:
    return f"DefaultEndpointsProtocol=https;AccountName=acct;{name}={value};EndpointSuffix=net"


def header_line(name: str, value: str) -> str:
    return f"403 Forbidden, request headers:\nAccept: application/json\n{name}: {value}\nregion: eu"


def percent_encoded(name: str, value: str) -> str:
    inner = f"https://app.example.test/cb?region=eu&{name}={quote(value, safe='')}&page=2"
    return f"login at https://login.example.test/start?next={quote(inner, safe='')} failed"


SYNTAXES: dict[str, Syntax] = {
    "query": query,
    "fragment": fragment,
    "json": json_object,
    "python dict": python_dict,
    "keywords": keywords,
    "dsn": dsn,
    "connection string": connection_string,
    "header line": header_line,
    "percent-encoded": percent_encoded,
}
#: what each syntax must keep of the text around the credential
KEPT = {
    "query": ["GET https://api.example.test/v1/rows?page=2&", "&region=eu"],
    "fragment": ["redirected to https://app.example.test/cb#", "&state=s42"],
    "json": ['bad request body {"user": "etl", ', '"region": "eu"}'],
    "python dict": ["headers {'Accept': 'application/json', ", "'region': 'eu'}"],
    "keywords": ["connect(host='db.example.test', ", ", region='eu')"],
    "dsn": ["could not connect: host=db.example.test port=5432 ", " dbname=wh"],
    "connection string": [
        "DefaultEndpointsProtocol=https;AccountName=acct;",
        ";EndpointSuffix=net",
    ],
    "header line": ["403 Forbidden, request headers:\nAccept: application/json\n", "\nregion: eu"],
    "percent-encoded": ["login at https://login.example.test/start?next=", "%26page%3D2 failed"],
}
#: a secret's characters: what tokens, keys and base64 signatures hold
VALUE = st.text(alphabet=string.ascii_letters + string.digits + "-_~+/=", min_size=8, max_size=40)


def forms(value: str) -> list[str]:
    """The value as it is, and percent-encoded once and twice."""
    once = quote(value, safe="")
    return [value, once, quote(once, safe="")]


@settings(max_examples=600, deadline=None)
@given(name=credential_name(), value=VALUE, syntax=st.sampled_from(sorted(SYNTAXES)))
def test_no_credential_survives_in_any_syntax(name: str, value: str, syntax: str) -> None:
    secret = f"Zq{secrets.token_hex(4)}{value}"  # no surrounding text holds it by chance
    text = SYNTAXES[syntax](name, secret)
    cleaned = without_credentials(text, limit=100_000)
    assert not [form for form in forms(secret) if form in cleaned], cleaned
    assert MASK in cleaned
    for around in KEPT[syntax]:
        assert around in cleaned, (around, cleaned)


@settings(max_examples=300, deadline=None)
@given(name=credential_name(), value=VALUE)
def test_safe_text_masks_by_name_too(name: str, value: str) -> None:
    secret = f"Zq{secrets.token_hex(4)}{value}"
    assert secret not in safe_text(dsn(name, secret), limit=100_000)


def test_a_key_in_the_middle_of_a_line_is_written_like_one() -> None:
    text = "sent Cookie: sid=Zq1a2b3c4d; theme=dark\nheaders x-api-key: Zq5e6f7a8b, accept: json"
    assert without_credentials(text, limit=1000) == (
        "sent Cookie: ***\nheaders x-api-key: ***, accept: json"
    )


def test_the_configured_names_count() -> None:
    assert "ledger_pin" in airflows_names()
    text = "Ledger-Pin: 48151623\nvault_lease=Zq9e8d7c6b5a"
    assert without_credentials(text) == "Ledger-Pin: ***\nvault_lease=***"


@pytest.mark.parametrize(
    "text",
    [
        # a path's last segment named like a credential, then the server's answer
        "GET https://api.example.test/v1/token: 500 Internal Server Error",
        "POST https://api.example.test/oauth/access_token: connection reset by peer",
        # words that hold a short added name inside them
        "design=blue signal=11 keyframe=3",
        "ProxyError is not a header: retry later",
        # a sentence's word before a colon, in the middle of a line
        "HTTP 401; the API needs credentials: give the connection login and password",
        "could not refresh the token: HTTP 503 from the identity provider",
    ],
)
def test_text_that_only_looks_like_a_credential_stays(text: str) -> None:
    assert without_credentials(text, limit=1000) == text


def _in_a_new_process(code: str, **environment: str) -> list[str]:
    env = {**os.environ, **environment}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()


def test_a_process_without_airflow_reads_airflows_list_without_loading_airflow() -> None:
    code = (
        "import json, sys; from airflow_retrywindow.credential_names import sensitive_names; "
        "from airflow_retrywindow.redaction import without_credentials; "
        "print(json.dumps(sorted(sensitive_names()))); "
        "print(without_credentials('Ledger-Pin: 4815162342')); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'airflow'))"
    )
    names, masked, loaded = _in_a_new_process(code, **{CONFIGURED_ENV: CONFIGURED})
    assert set(DEFAULT_SENSITIVE_FIELDS) | {"ledger_pin", "vault_lease"} <= set(json.loads(names))
    assert masked == "Ledger-Pin: ***"
    assert loaded == "[]"


def test_stored_text_is_masked_whatever_hide_sensitive_var_conn_fields_says() -> None:
    code = (
        "import airflow.settings; from airflow.sdk.log import redact; "
        "from airflow_retrywindow.redaction import safe_text; "
        "print(redact({'password': 'Zq4815162342'})); "
        "print(safe_text('host=db password=Zq4815162342'))"
    )
    hidden_by_airflow, stored = _in_a_new_process(
        code, AIRFLOW__CORE__HIDE_SENSITIVE_VAR_CONN_FIELDS="False"
    )
    # Airflow's masker shows the value when told not to hide it; what we store never does
    assert "Zq4815162342" in hidden_by_airflow
    assert stored == "host=db password=***"


def test_without_airflows_list_nothing_of_the_text_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_retrywindow import credential_names
    from airflow_retrywindow.redaction import describe_exception

    def unreadable() -> frozenset[str]:
        raise credential_names.CredentialNamesError("Airflow's DEFAULT_SENSITIVE_FIELDS not found")

    monkeypatch.setattr(credential_names, "_airflow_defaults", unreadable)
    assert without_credentials("host=db password=Zq4815162342 dbname=wh") == MASK
    failure = ConnectionError("password=Zq4815162342")
    assert describe_exception(failure) == f"ConnectionError: {MASK}"
