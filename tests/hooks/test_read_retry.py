"""Reads of Airflow ride out connection errors, timeouts, 5xx and 429 within a bound.

First the retry alone, with reads that fail as told; then the REST reader against a
real local server answering 502 in HAProxy's shape, with and without a Date.
"""

from __future__ import annotations

import email.utils
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import httpx
import pytest
import urllib3

from airflow_retrywindow.exceptions import AirflowApiError
from airflow_retrywindow.hooks.api_reader import AirflowApi
from airflow_retrywindow.read_retry import (
    ErrorAnswer,
    ReadRetry,
    ReadTally,
    retry_after_seconds,
    transient,
)
from airflow_retrywindow.timing.time_limit import TimeLimit
from tests.hooks.fake_api import FakeAirflowApi, Served, pool, serve
from tests.hooks.tcp_proxy import proxy

QUICK = ReadRetry(tries=5, wait_min=0.01, wait_max=0.02)


def failing(*errors: BaseException) -> tuple[Callable[[float], str], list[float]]:
    """A read that raises ``errors`` in turn, then answers ``"ok"``; and the time
    left each try was given."""
    pending = list(errors)
    given: list[float] = []

    def read(left: float) -> str:
        given.append(left)
        if pending:
            raise pending.pop(0)
        return "ok"

    return read, given


@dataclass
class FakeClock:
    """Time that moves only when a wait is spent: a retry on it takes no real time, and
    the times it counts are exact on any machine.

    :param now: the monotonic clock's reading, in seconds.
    :param epoch: the wall clock's reading when ``now`` was 0.
    """

    now: float = 0.0
    epoch: float = 1_796_000_000.0  # 2026-11-30
    waits: list[float] = field(default_factory=list)

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds

    def wall(self) -> float:
        return self.epoch + self.now

    def retry(self, retry: ReadRetry) -> ReadRetry:
        """``retry``, waiting and counting its bound on this clock."""
        return ReadRetry(
            retry.tries, retry.wait_min, retry.wait_max,
            sleep=self.sleep, monotonic=lambda: self.now, wall=self.wall,
        )  # fmt: skip


def recorded(retry: ReadRetry) -> tuple[ReadRetry, list[float]]:
    """``retry`` on a fake clock, and the waits it spends."""
    clock = FakeClock()
    return clock.retry(retry), clock.waits


# -- what is tried again ---------------------------------------------------------------


@pytest.mark.parametrize(
    "error",
    [
        ConnectionRefusedError("refused"),
        TimeoutError("timed out"),
        httpx.ConnectError("no route"),
        httpx.ReadTimeout("slow"),
        urllib3.exceptions.ProtocolError("connection reset"),
        urllib3.exceptions.MaxRetryError(None, "/", reason=ConnectionResetError("reset")),
        ErrorAnswer(502),
        ErrorAnswer(503),
        ErrorAnswer(500),
        ErrorAnswer(429),
    ],
    ids=lambda error: type(error).__name__ + str(getattr(error, "status", "")),
)
def test_each_transient_error_is_tried_again_and_counted(error: BaseException) -> None:
    read, given = failing(error, error)
    tally = ReadTally()
    assert QUICK.call(read, bound=10, tally=tally) == "ok"
    assert len(given) == 3
    assert tally.last is not None and tally.last.tries == 3
    assert tally.retries == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422])
def test_no_other_4xx_is_tried_again(status: int) -> None:
    read, given = failing(ErrorAnswer(status))
    tally = ReadTally()
    with pytest.raises(ErrorAnswer):
        QUICK.call(read, bound=10, tally=tally)
    assert len(given) == 1 and tally.retries == 0
    assert tally.last is not None and tally.last.tries == 1


def test_a_tls_failure_is_not_tried_again() -> None:
    import ssl

    wrapped = urllib3.exceptions.MaxRetryError(
        None, "/", reason=urllib3.exceptions.SSLError(ssl.SSLCertVerificationError("bad"))
    )
    assert not transient(wrapped)
    assert not transient(ssl.SSLCertVerificationError("bad"))
    assert not transient(ValueError("a bug"))


def test_the_tries_are_spent_and_the_last_error_raised_with_the_count() -> None:
    read, given = failing(*[ErrorAnswer(502, text=f"try {n}") for n in range(1, 9)])
    tally = ReadTally()
    with pytest.raises(ErrorAnswer, match="try 5"):
        QUICK.call(read, bound=10, tally=tally)
    assert len(given) == 5
    assert tally.last is not None and tally.last.tries == 5
    assert tally.last.describe().startswith("5 tries over ")


# -- how long it waits ---------------------------------------------------------------------


def test_waits_grow_with_jitter_as_airflows_client_waits() -> None:
    retry, waits = recorded(ReadRetry(tries=5, wait_min=1, wait_max=90))
    read, _ = failing(*[OSError("down")] * 4)
    retry.call(read, bound=1000, tally=ReadTally())
    assert waits[0] == 1  # then random up to 2, 4 and 8 s, never below the minimum
    for wait, high in zip(waits[1:], (2, 4, 8), strict=True):
        assert 1 <= wait <= high


def test_retry_after_in_seconds_is_waited() -> None:
    retry, waits = recorded(QUICK)
    read, _ = failing(ErrorAnswer(429, retry_after="3"))
    assert retry.call(read, bound=10, tally=ReadTally()) == "ok"
    assert waits == [3.0]


def test_retry_after_as_an_http_date_is_waited() -> None:
    clock = FakeClock(now=0.25)  # a quarter second past the wall clock's whole second
    later = email.utils.formatdate(clock.wall() + 5, usegmt=True)  # whole seconds: 4.75 s on
    read, _ = failing(ErrorAnswer(503, retry_after=later))
    assert clock.retry(QUICK).call(read, bound=10, tally=ReadTally()) == "ok"
    assert clock.waits == [4.75]


def test_a_retry_after_past_the_bound_ends_the_read_instead_of_waiting() -> None:
    retry, waits = recorded(QUICK)
    read, given = failing(ErrorAnswer(503, retry_after="60"))
    tally = ReadTally()
    with pytest.raises(ErrorAnswer):
        retry.call(read, bound=10, tally=tally)
    assert waits == [] and len(given) == 1


def test_retry_after_forms() -> None:
    assert retry_after_seconds("120") == 120.0
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None
    past = email.utils.formatdate(time.time() - 60, usegmt=True)
    assert retry_after_seconds(past) == 0.0


def test_no_wait_starts_that_would_end_past_the_bound() -> None:
    clock = FakeClock()
    slow = clock.retry(ReadRetry(tries=50, wait_min=0.2, wait_max=0.2))
    read, given = failing(*[OSError("down")] * 49)
    tally = ReadTally()
    with pytest.raises(OSError):
        slow.call(read, bound=1.0, tally=tally)
    # tries at 0, 0.2, 0.4 and 0.6 s; the last wait is cut to 0.15 s, so that one last try
    # starts at 0.75 s, a quarter of the bound before it; none after
    assert clock.waits == pytest.approx([0.2, 0.2, 0.2, 0.15])
    assert given == pytest.approx([1.0, 0.8, 0.6, 0.4, 0.25])  # each try told the time left
    assert tally.last is not None and tally.last.tries == 5
    assert tally.last.seconds == pytest.approx(0.75)


def test_a_long_wait_is_shortened_to_leave_one_last_try_before_the_bound() -> None:
    # waits of 5 s under a 0.8 s bound: one try, then one more 0.2 s before the bound
    clock = FakeClock()
    long = clock.retry(ReadRetry(tries=5, wait_min=5, wait_max=5))
    read, given = failing(OSError("down"), OSError("down"), OSError("down"))
    tally = ReadTally()
    with pytest.raises(OSError):
        long.call(read, bound=0.8, tally=tally)
    assert clock.waits == pytest.approx([0.6])
    assert given == pytest.approx([0.8, 0.2])  # the time that last try had


def test_an_outage_shorter_than_the_bound_is_ridden_out_whatever_the_jitter_draws() -> None:
    # Airflow's own waits scaled by 1/10 (0.1 s, then up to 0.2, 0.4 and 0.8 s), an
    # outage of 0.4 s and a bound of 0.9 s: the last wait is cut to leave a try
    for _ in range(20):
        clock = FakeClock()
        scaled = clock.retry(ReadRetry(tries=5, wait_min=0.1, wait_max=9))

        def read(_left: float, clock: FakeClock = clock) -> str:
            if clock.now < 0.4:
                raise OSError("restarting")
            return "ok"

        assert scaled.call(read, bound=0.9, tally=ReadTally()) == "ok"
        assert 0.4 <= clock.now <= 0.9 - 0.225  # answered after the outage, before the bound


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="tries must be a whole number of at least 1, got 0"):
        ReadRetry(tries=0, wait_min=1, wait_max=2)
    with pytest.raises(ValueError, match=r"wait_max \(1\) must be at least wait_min \(2\)"):
        ReadRetry(tries=3, wait_min=2, wait_max=1)


def test_by_default_it_takes_airflows_own_retry_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__WORKERS__EXECUTION_API_RETRIES", "7")
    monkeypatch.setenv("AIRFLOW__WORKERS__EXECUTION_API_RETRY_WAIT_MIN", "0.5")
    monkeypatch.setenv("AIRFLOW__WORKERS__EXECUTION_API_RETRY_WAIT_MAX", "12")
    assert ReadRetry.from_settings() == ReadRetry(tries=7, wait_min=0.5, wait_max=12)
    monkeypatch.setenv("AIRFLOW__RETRY_WINDOW__API_RETRIES", "9")
    monkeypatch.setenv("AIRFLOW__RETRY_WINDOW__API_RETRY_WAIT_MAX", "20")
    assert ReadRetry.from_settings() == ReadRetry(tries=9, wait_min=0.5, wait_max=20)


# -- the REST reader -----------------------------------------------------------------------


@pytest.fixture
def api() -> FakeAirflowApi:
    return FakeAirflowApi(pools=[pool("pool_1", 4)])


@pytest.fixture
def server(api: FakeAirflowApi) -> Iterator[Served]:
    yield from serve(api)


def reader(url: str, **arguments: object) -> AirflowApi:
    given: dict[str, object] = {"retry": QUICK, **arguments}
    return AirflowApi(url, login="reader", password="reader-pw", **given)  # type: ignore[arg-type]


def test_502s_without_and_with_a_date_are_tried_again_and_counted(
    server: Served, api: FakeAirflowApi
) -> None:
    api.error_answers = [(502, False), (502, True)]  # HAProxy's page, then one with a Date
    read = reader(server.url)
    assert list(read.pools({"pool_1"})) == ["pool_1"]
    # the token's request, tried three times, then the pools
    assert api.paths() == ["/auth/token"] * 3 + ["/api/v2/pools"]
    assert read.requests == 4
    assert read.reads.as_dict() == {"retries": 2, "causes": ["HTTP 502", "HTTP 502"]}
    assert read.clock_offset is not None  # from the answers that succeeded


def test_a_502_of_a_read_is_tried_again(server: Served, api: FakeAirflowApi) -> None:
    read = reader(server.url)
    read.version()
    api.error_answers = [(502, False), (503, True)]
    assert read.pool_count() == 1
    assert api.paths()[-3:] == ["/api/v2/pools"] * 3
    assert read.requests == 2 + 3 and read.reads.retries == 2


def test_502s_through_every_try_fail_saying_how_often(server: Served, api: FakeAirflowApi) -> None:
    read = reader(server.url, access_token="tok")
    api.error_answers = [(502, False)] * 9
    with pytest.raises(AirflowApiError) as refused:
        read.pool_count()
    text = str(refused.value)
    assert "refused to read pools: HTTP 502 Bad Gateway" in text
    assert "after 5 tries over " in text
    assert read.requests == 5
    assert "without a Date" not in text


def test_a_404_is_not_tried_again(server: Served, api: FakeAirflowApi) -> None:
    read = reader(f"{server.url}/elsewhere", access_token="tok")
    with pytest.raises(AirflowApiError, match="HTTP 404"):
        read.version()
    assert read.requests == 1 and read.reads.retries == 0


def test_an_unreachable_server_is_tried_within_the_decisions_time() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    clock = FakeClock()
    read = AirflowApi(
        f"http://127.0.0.1:{port}",
        access_token="tok",
        retry=clock.retry(ReadRetry(tries=100, wait_min=0.2, wait_max=0.2)),
        time_limit=TimeLimit.starting_now(1.5),
    )
    with pytest.raises(AirflowApiError) as refused:
        read.version()
    # the bound is the time left of the decision's 1.5 s: tries every 0.2 s from 0 to
    # 1.0 s, the last one a quarter of the bound before its end
    assert read.requests == 7
    assert clock.now < 1.5 - 0.375
    assert "after 7 tries over 1.1 s" in str(refused.value)


def test_through_a_proxy_502s_and_a_cut_are_ridden_out(server: Served, api: FakeAirflowApi) -> None:
    port = int(server.url.rsplit(":", 1)[1])
    with proxy(port) as between:
        read = reader(between.url, retry=ReadRetry(tries=10, wait_min=0.1, wait_max=0.2))
        between.bad_gateways(False, True)
        assert read.version() == "3.3.2"
        assert [line for _, line in between.requests][:3] == ["POST /auth/token HTTP/1.1"] * 3
        assert read.reads.retries == 2
        between.cut(0.5)
        assert read.pool_count() == 1
        assert read.reads.retries > 2
        # tried while the proxy dropped every connection, answered once it took them again
        ((cut_at, seconds),) = between.outages
        tries = [at for at, line in between.requests if line.startswith("GET /api/v2/pools")]
        assert tries[0] < cut_at + seconds <= tries[-1]
