"""No credential is stored, whatever shape it comes in.

What ordinary libraries put in an error text: presigned URLs, authorization
headers, URL userinfo whose password holds characters a URL should have encoded.
A property test throws generated ones at the redaction and finds nothing left.
"""

from __future__ import annotations

import json
import re
import secrets
import string
from datetime import timedelta
from typing import Any

import pendulum
import pytest
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG
from airflow.sdk.log import mask_secret, redact  # type: ignore[attr-defined]
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_retrywindow import RetryWindowGateOperator
from airflow_retrywindow.gate.decide import decide
from airflow_retrywindow.gate.observe import observe_run, parse_observations
from airflow_retrywindow.gate.read import RunSnapshot
from airflow_retrywindow.gate.record import build
from airflow_retrywindow.gate.targets import Target
from airflow_retrywindow.hooks.api_reader import PoolRow
from airflow_retrywindow.redaction import (
    MASK,
    credentials_masked,
    safe_text,
    without_credentials,
    without_userinfo,
)
from airflow_retrywindow.timing.retry_settings import RetrySettings
from airflow_retrywindow.timing.work import Work


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (
            "403 Client Error: Forbidden for url: https://bucket.s3.amazonaws.com/positions.csv"
            "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAEXAMPLE%2F20261203"
            "&X-Amz-Signature=0123abcd&X-Amz-Security-Token=FQoGZXIvYXdz",
            "https://bucket.s3.amazonaws.com/positions.csv?X-Amz-Algorithm=AWS4-HMAC-SHA256",
        ),
        ("{'Authorization': 'Bearer eyJhbGciOi.eyJzdWIi.c2ln'}", "{'Authorization': '***'}"),
        ('{"Proxy-Authorization": "Basic dXNlcjpwYXNz"}', '{"Proxy-Authorization": "***"}'),
        ("http://etl:pa/ss@api:8080/api/v2", "http://***@api:8080/api/v2"),
        ("https://etl:hunter2@jobs.example.com/jobs/1", "https://***@jobs.example.com/jobs/1"),
        ("https://u:p#w?d@host/p", "https://***@host/p"),
        # an '@' and then a '/' in the password: the part after the '@' is no host
        ("https://etl:dd@ee/ff@jobs.example.com/v1/jobs", "https://***@jobs.example.com/v1/jobs"),
        ("'https://etl:a@b?c@h.example.com/x', 'next'", "'https://***@h.example.com/x', 'next'"),
        ("GET https://api.example.test/v1?api_key=sk-live-123 failed", "?api_key=*** failed"),
        ("https://storage.googleapis.com/b/o?X-Goog-Signature=abc&alt=media", "&alt=media"),
        ("https://acct.blob.core.windows.net/c/b?sv=2024&sig=Zm9v%3D&se=2026", "sig=***&se=2026"),
        # by name, in any syntax: key=value text is no query string, and still masked
        ("login with token=abc123&user=etl", "login with token=***&user=etl"),
        ("GET https://host/v1/token: 500 Internal Server Error", "/v1/token: 500 Internal Server"),
    ],
)
def test_credentials_are_masked_and_the_rest_stays_readable(text: str, kept: str) -> None:
    cleaned = without_credentials(text, limit=1000)
    assert kept in cleaned


def test_the_examples_lose_every_secret() -> None:
    secret_parts = ["AKIAEXAMPLE", "0123abcd", "FQoGZXIvYXdz", "eyJhbGciOi", "pa/ss", "hunter2"]
    texts = [
        "https://b.s3.amazonaws.com/x?X-Amz-Credential=AKIAEXAMPLE&X-Amz-Signature=0123abcd"
        "&X-Amz-Security-Token=FQoGZXIvYXdz",
        "{'Authorization': 'Bearer eyJhbGciOi.x.y'}",
        "http://etl:pa/ss@api:8080",
        "https://etl:hunter2@jobs.example.com/",
    ]
    joined = " ".join(without_credentials(text, limit=1000) for text in texts)
    assert not [part for part in secret_parts if part in joined]
    assert joined.count(MASK) >= 6


def test_the_api_field_loses_userinfo_with_unencoded_characters() -> None:
    assert without_userinfo("http://etl:pa/ss@api:8080") == "http://api:8080"
    # a password may hold '@' and '/': with userinfo, everything up to the last '@' goes
    assert without_userinfo("https://u:p@h/x?mail=a@b.c") == "https://b.c"
    assert without_userinfo("https://u@h/x?mail=a@b.c") == "https://h/x?mail=a@b.c"
    assert without_userinfo("https://h/x?mail=a@b.c") == "https://h/x?mail=a@b.c"


def test_an_e_mail_in_a_path_or_query_is_not_taken_for_userinfo() -> None:
    text = "no answer from https://api.example/owners/ops@example.com/jobs"
    assert without_credentials(text, limit=1000) == text


# -- property: generated URLs, headers and reprs -------------------------------------------

SECRET = st.text(alphabet=string.ascii_letters + string.digits + "-_.~+/", min_size=8, max_size=24)
#: characters a careless password holds without encoding them
PASSWORD = st.text(
    alphabet=string.ascii_letters + string.digits + "/?#@!$%", min_size=8, max_size=20
)
HOST = st.from_regex(r"[a-z]{3,10}\.(example|test)\.(com|org)(:[1-9][0-9]{2,4})?", fullmatch=True)
PARAMETER = st.sampled_from(
    ["X-Amz-Signature", "X-Amz-Credential", "X-Amz-Security-Token", "X-Goog-Signature", "sig",
     "signature", "token", "access_token", "api_key", "apikey", "key", "password", "secret"]
)  # fmt: skip


def _unique(secret: str) -> str:
    # a marker no surrounding text can hold by chance
    return f"Zq{secrets.token_hex(4)}{secret}"


@settings(max_examples=300, deadline=None)
@given(host=HOST, user=st.from_regex(r"[a-z]{2,8}", fullmatch=True), password=PASSWORD)
def test_no_password_survives_in_userinfo(host: str, user: str, password: str) -> None:
    secret = _unique(password)
    text = f"could not reach https://{user}:{secret}@{host}/api/v2/dags"
    # nothing of the password is left, not even the part after an unencoded '@'
    assert (
        without_credentials(text, limit=1000) == f"could not reach https://***@{host}/api/v2/dags"
    )
    assert without_userinfo(f"https://{user}:{secret}@{host}") == f"https://{host}"
    assert without_userinfo(f"https://{user}:{secret}@{host}/api/v2") == f"https://{host}/api/v2"


@settings(max_examples=300, deadline=None)
@given(host=HOST, parameter=PARAMETER, value=SECRET, first=st.booleans())
def test_no_credential_parameter_survives(
    host: str, parameter: str, value: str, first: bool
) -> None:
    secret = _unique(value)
    query = f"{parameter}={secret}&part=1" if first else f"part=1&{parameter}={secret}"
    text = f"403 Forbidden for url: https://{host}/data.csv?{query}"
    assert secret not in without_credentials(text, limit=1000)


@settings(max_examples=300, deadline=None)
@given(
    value=SECRET,
    scheme=st.sampled_from(["Bearer", "bearer", "Basic", "Token"]),
    shape=st.sampled_from(["dict", "json", "header"]),
)
def test_no_authorization_value_survives(value: str, scheme: str, shape: str) -> None:
    secret = _unique(value)
    credential = f"{scheme} {secret}"
    text = {
        "dict": f"headers={{'Authorization': '{credential}', 'Accept': 'json'}}",
        "json": f'{{"authorization": "{credential}"}}',
        "header": f"Authorization: {credential}\nAccept: json",
    }[shape]
    assert secret not in without_credentials(text, limit=1000)


def test_safe_text_applies_the_same_rules_after_airflows_masker() -> None:
    text = "https://etl:hunter2@h.example.com/x?token=abc123def"
    assert safe_text(text) == "https://***@h.example.com/x?token=***"


# -- what the gate stores and logs ----------------------------------------------------------

NOW = pendulum.datetime(2026, 3, 2, 5, 40, tz="UTC")


def _observed_through(source: str) -> tuple[Target, dict[str, Any]]:
    """The target ``load`` and an observation of it seen at ``source``."""
    work = Work(duration=timedelta(minutes=5), validation=timedelta(minutes=1), safe_repeat=True)
    target = Target("load", work, RetrySettings("load", 2, 60, 1, 60), True, "db", 1)
    observation = {
        "state": "retryable",
        "observed_at": "2026-03-02T05:39:00Z",
        "finished_at": "2026-03-02T05:30:00Z",
        "attempts": 1,
        "source": source,
    }
    return target, {"load": observation}


def test_the_gate_record_masks_an_observation_source_and_a_registered_value() -> None:
    password = f"{secrets.token_hex(6)}@{secrets.token_hex(6)}/{secrets.token_hex(6)}"
    token = secrets.token_hex(16)
    mask_secret(token)
    target, observations = _observed_through(f"https://etl:{password}@jobs.example.com/jobs/42")
    snapshot = RunSnapshot(latest_tries={}, pools={"db": PoolRow("db", 2, 0, 0, 2, False)})
    explicit = parse_observations(observations, ["load"], as_of=NOW)
    table = decide(
        observe_run([target], snapshot, explicit), as_of=NOW, deadline=NOW.add(hours=6),
        max_observation_age=600, origin=None, pools=snapshot.pools,
    )  # fmt: skip
    record = build(
        table, requests=1, api="http://api:8080", gate="gate", dag_id="dag", run_id="run",
        try_number=1, deadline_rule="6 h after the data interval",
        work_unit={"business_date": "2026-03-01", "delivery_token": token},
        guard=[{"taskId": "load", "targets": ["load"], "action": "run", "blockers": []}],
    )  # fmt: skip
    stored = json.dumps(record)
    assert not [part for part in [token, *re.split("[@/]", password)] if part in stored]
    (row,) = record["decisions"]
    assert row["classification"] == "explicit observation (https://***@jobs.example.com/jobs/42)"
    assert "https://***@jobs.example.com/jobs/42)" in row["reason"]
    assert record["workUnit"] == {"business_date": "2026-03-01", "delivery_token": MASK}
    assert "Unit of work: business_date=2026-03-01, delivery_token=***." in record["statusUpdate"]
    # what records are matched on, and the fixtures that replay, are kept exactly
    assert (record["gate"], row["taskId"], row["modelId"]) == ("gate", "load", "load")
    assert record["fixtures"] == table.as_dict()["fixtures"]


def _registered() -> set[str]:
    """What Airflow's task SDK masker was told to mask, in this process."""
    from airflow.sdk._shared.secrets_masker import _secrets_masker

    return set(_secrets_masker().patterns)


def test_a_rendered_observations_credentials_are_masked_in_the_value_airflow_stores() -> None:
    password = f"{secrets.token_hex(6)}@{secrets.token_hex(6)}/{secrets.token_hex(6)}"
    source = f"https://etl:{password}@jobs.example.com/jobs/42"
    with DAG("rw_rendered_observations", schedule=None, start_date=NOW):
        gate = RetryWindowGateOperator(
            task_id="retry_gate",
            targets={"load": Work(timedelta(minutes=5), timedelta(0), safe_repeat=True)},
            deadline=NOW.add(hours=6),
            observations='{"load": {"state": "unknown", "source": "{{ source }}"}}',
            work_unit={"business_date": "{{ ds }}", "api_token": "{{ token }}"},
        )
        EmptyOperator(task_id="load")
    token = secrets.token_hex(12)
    context = {"source": source, "ds": "2026-03-01", "token": token}
    gate.render_template_fields(context)  # type: ignore[arg-type]
    # the rendered value Airflow stores and logs is the masked one
    kept = f"{gate.observations} {gate.work_unit}"
    assert not [part for part in [password, token, *re.split("[@/]", password)] if part in kept]
    assert json.loads(gate.observations)["load"]["source"] == "https://***@jobs.example.com/jobs/42"
    assert gate.work_unit == {"business_date": "2026-03-01", "api_token": MASK}


def test_nothing_a_rendered_field_shows_is_registered_with_airflows_masker() -> None:
    values = {
        "password": f"pw{secrets.token_hex(8)}",
        "sort_key": f"created_{secrets.token_hex(4)}",
        "code": f"code{secrets.token_hex(4)}",
        "auth": f"auth{secrets.token_hex(4)}",
    }
    text = (
        f"https://etl:{values['password']}@jobs.example.com/x?sort_key={values['sort_key']}"
        f"&code={values['code']}&auth={values['auth']}&password={values['password']}"
    )
    with DAG("rw_rendered_registration", schedule=None, start_date=NOW):
        gate = RetryWindowGateOperator(
            task_id="retry_gate",
            targets={"load": Work(timedelta(minutes=5), timedelta(0), safe_repeat=True)},
            deadline=NOW.add(hours=6),
            observations='{"load": {"state": "unknown", "source": "{{ text }}"}}',
            work_unit={"note": "{{ text }}", "password": "{{ text }}"},
        )
        EmptyOperator(task_id="load")
    before = _registered()
    gate.render_template_fields({"text": text})  # type: ignore[arg-type]
    # no value is masked in every log line of the process because it looked like a credential
    assert _registered() == before
    assert redact(text) == text
    # an ordinary parameter's value stays readable where the gate keeps it
    assert f"sort_key={values['sort_key']}" in gate.observations


def test_a_rendered_value_keeps_its_shape_and_loses_what_credential_keys_hold() -> None:
    from collections import namedtuple

    Pair = namedtuple("Pair", "label url")
    rendered = {
        "business_date": "2026-03-01",
        "Delivery-Token": "tok-48151623",
        "empty_secret": None,
        "pairs": [Pair("load", "https://etl:pw48151623@h.example.com/x"), ("sig=Zm9vYmFy",)],
    }
    assert credentials_masked(rendered) == {
        "business_date": "2026-03-01",
        "Delivery-Token": MASK,
        "empty_secret": None,
        "pairs": [Pair("load", "https://***@h.example.com/x"), ("sig=***",)],
    }
