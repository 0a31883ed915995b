"""The REST reader's bounds against a real local server: the size of an answer, the
time of a whole decision, and the server's clock read from every answer's Date."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

import pytest

from airflow_retrywindow.configuration import MIN_MAX_RESPONSE_BYTES
from airflow_retrywindow.exceptions import AirflowApiError
from airflow_retrywindow.hooks.api_reader import AirflowApi
from airflow_retrywindow.timing.time_limit import TimeLimit
from tests.hooks.fake_api import FakeAirflowApi, Served, pool, serve

CAP = 64 * 1024


@pytest.fixture
def api() -> FakeAirflowApi:
    return FakeAirflowApi(pools=[pool(f"pool_{n}", 4) for n in range(5)])


@pytest.fixture
def server(api: FakeAirflowApi) -> Iterator[Served]:
    yield from serve(api)


def reader(server: Served, **arguments: object) -> AirflowApi:
    return AirflowApi(
        server.url.replace("http://", "http://reader:url-secret@"),
        login="reader",
        password="reader-pw",
        **arguments,  # type: ignore[arg-type]
    )


# -- the size of an answer ---------------------------------------------------------------


def test_an_answer_within_the_cap_is_read(server: Served) -> None:
    assert len(reader(server, max_response_bytes=CAP).pools({"pool_1"})) == 1


def test_a_declared_oversized_answer_is_refused_naming_the_address_and_the_limit(
    server: Served, api: FakeAirflowApi
) -> None:
    api.padding = 2 * CAP
    with pytest.raises(AirflowApiError) as refused:
        reader(server, max_response_bytes=CAP).pools({"pool_1"})
    text = str(refused.value)
    assert f"{server.url}/auth/token declares" in text
    assert f"more than the {CAP} bytes" in text and "api_max_response_bytes" in text
    assert "url-secret" not in text


def test_an_endless_answer_is_refused_while_it_is_read(server: Served, api: FakeAirflowApi) -> None:
    api.endless = True  # no Content-Length, a body that never ends
    started = time.monotonic()
    with pytest.raises(AirflowApiError, match=rf"sent more than {CAP} bytes"):
        reader(server, max_response_bytes=CAP).version()
    # an unbounded read would never return; this one stops at the cap
    assert time.monotonic() - started < 10


def test_the_cap_is_checked_when_the_reader_is_made() -> None:
    with pytest.raises(
        ValueError, match=rf"max_response_bytes must .* from {MIN_MAX_RESPONSE_BYTES}"
    ):
        AirflowApi("http://api:8080", max_response_bytes=10)


# -- the time of a whole decision ---------------------------------------------------------


def test_slow_answers_run_out_the_decision_time_not_each_request(
    server: Served, api: FakeAirflowApi
) -> None:
    api.delay = 0.4  # each answer is in time for its own 30 s timeout
    api.max_page = 1  # five pools: five pages, five requests, after the token
    slow = reader(server, timeout=30, time_limit=TimeLimit.starting_now(1.0))
    started = time.monotonic()
    with pytest.raises(AirflowApiError) as refused:
        slow.pools({"pool_4"})
    assert time.monotonic() - started < 3
    text = str(refused.value)
    assert "ran out of its 1 s ([retry_window] gate_timeout)" in text
    assert "nothing is decided" in text
    assert len(api.received) < 6


def test_an_answer_dribbling_in_is_cut_at_the_time_left(
    server: Served, api: FakeAirflowApi
) -> None:
    api.dribble = 0.05  # every byte comes well within the read timeout
    started = time.monotonic()
    with pytest.raises(AirflowApiError, match=r"ran out of its 1 s"):
        reader(server, timeout=30, time_limit=TimeLimit.starting_now(1.0)).version()
    assert time.monotonic() - started < 5


def test_no_request_is_made_once_the_time_is_out(server: Served, api: FakeAirflowApi) -> None:
    spent = TimeLimit(seconds=1.0, started=time.monotonic() - 2)
    with pytest.raises(AirflowApiError, match=r"no time was left for POST .*/auth/token"):
        reader(server, time_limit=spent).version()
    assert api.received == []


# -- the server's clock --------------------------------------------------------------------


@pytest.mark.parametrize("shift", [0.0, 60.0, -60.0])
def test_every_answer_bounds_the_servers_clock(
    server: Served, api: FakeAirflowApi, shift: float
) -> None:
    api.clock_shift = shift
    measured = reader(server)
    assert measured.clock_offset is None
    measured.version()
    offset = measured.clock_offset
    assert offset is not None
    # a whole-second Date, maybe a second old: known to within 2 s and the round trip
    assert offset.low <= timedelta(seconds=shift) <= offset.high
    assert offset.high - offset.low < timedelta(seconds=3)
    assert server.url in offset.source and "url-secret" not in offset.source


def test_a_stale_date_is_outweighed_by_a_fresh_one(server: Served, api: FakeAirflowApi) -> None:
    api.stale_answers = 1  # the token's answer: a Date noted 10 s early
    measured = reader(server)
    measured.version()
    offset = measured.clock_offset
    assert offset is not None
    # alone, the stale Date would put this worker's clock 8 s or more ahead
    assert offset.low <= timedelta(0) <= offset.high
