"""Reads of Airflow that ride out what Airflow's own client rides out.

Airflow's execution-API client retries connection errors and 5xx answers
(``[workers] execution_api_retries`` tries, ``wait_random_exponential`` between
``execution_api_retry_wait_min`` and ``_max``), so a try's own report survives an
API server restart of a few seconds. Every read the policy, the retry-start check,
the gate and the sensor make of Airflow goes through :class:`ReadRetry`, built
from ``[retry_window] api_retries``, ``api_retry_wait_min`` and
``api_retry_wait_max`` (empty: Airflow's own values), so the decision rides out
at least the same.

What is retried: a connection error or timeout, an answer 5xx or 429. A 429 or
503 answer's ``Retry-After`` (seconds or an HTTP date) is waited, unless that
would pass the caller's bound. Nothing else is: a 4xx answer, a TLS failure, an
answer too large, a decision out of time are the same on the next try.

Each caller has its bound, in seconds from the first try: no try starts in its
last second (:func:`last_try`), a jittered wait that would end there is shortened
to leave one last try, and each try may only use the time left. Only when the tries
or the bound are spent does the read fail, and :class:`ReadCount` then says how
many tries were made over how long.

No Airflow import: the gate's stages and the policy use it alike.
"""

from __future__ import annotations

import email.utils
import math
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timezone
from typing import TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception, wait_random_exponential

T = TypeVar("T")

#: answers that say "try again": too many requests, and every server error
TOO_MANY_REQUESTS = 429
SERVER_ERRORS = 500


def retried_status(status: int) -> bool:
    """Whether an answer with this HTTP status is tried again."""
    return status == TOO_MANY_REQUESTS or status >= SERVER_ERRORS


class ErrorAnswer(Exception):
    """An answer of Airflow's that says to try again (5xx, 429).

    :param status: the HTTP status.
    :param retry_after: the answer's ``Retry-After`` header, if any.
    :param text: what the answer said, for a message.
    """

    def __init__(self, status: int, retry_after: str | None = None, text: str = "") -> None:
        super().__init__(f"HTTP {status} {text}".rstrip())
        self.status = status
        self.retry_after = retry_after


@dataclass(frozen=True)
class ReadCount:
    """How many tries one read took, over how long.

    :param tries: requests made, the first one included.
    :param seconds: from the first try's start to the last one's end.
    """

    tries: int
    seconds: float

    def describe(self) -> str:
        """The count in words, e.g. ``5 tries over 8.9 s``."""
        return f"{self.tries} {'try' if self.tries == 1 else 'tries'} over {self.seconds:.1f} s"

    def as_dict(self) -> dict[str, float | int]:
        """The count as evidence stores it."""
        return {"tries": self.tries, "seconds": round(self.seconds, 3)}


@dataclass
class ReadTally:
    """What the reads of one decision took: the last read's count and every retry.

    :param last: the count of the last read made (the one that failed, if any).
    :param retries: tries beyond the first, over every read so far.
    :param causes: why each read was tried again, the first :data:`MAX_CAUSES`.
    """

    last: ReadCount | None = None
    retries: int = 0
    causes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        """The tries again, as a decision record stores them."""
        return {"retries": self.retries, "causes": list(self.causes)}


#: the most causes of tries again a tally keeps
MAX_CAUSES = 20


def cause_of(error: BaseException | None) -> str:
    """Why a try failed, in a few words that hold no credentials: a status or a type."""
    if isinstance(error, ErrorAnswer):
        return f"HTTP {error.status}"
    return type(error).__name__


def transient(error: BaseException) -> bool:
    """Whether ``error`` may be gone on the next try: a connection error or timeout,
    or an :class:`ErrorAnswer`; never a TLS failure (it is the same next time)."""
    if isinstance(error, ErrorAnswer):
        return retried_status(error.status)
    if _tls_failure(error):
        return False
    return isinstance(error, (OSError, *_transport_errors()))


def _transport_errors() -> tuple[type[BaseException], ...]:
    # the HTTP libraries' own connection errors, from those already loaded
    found: list[type[BaseException]] = []
    httpx = sys.modules.get("httpx")
    if httpx is not None:
        found.append(httpx.TransportError)
    urllib3 = sys.modules.get("urllib3.exceptions")
    if urllib3 is not None:
        found.append(urllib3.HTTPError)
    return tuple(found)


def causes(error: BaseException) -> Iterator[BaseException]:
    """``error`` and every exception it wraps, each once: urllib3 may
    wrap the cause (``MaxRetryError(reason=SSLError(SSLCertVerificationError))``)."""
    seen: set[int] = set()
    pending: list[BaseException] = [error]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        linked = (current.__cause__, current.__context__, getattr(current, "reason", None))
        pending.extend(item for item in (*linked, *current.args) if isinstance(item, BaseException))


def tls_error(error: BaseException) -> bool:
    """Whether ``error`` is an SSL error of the standard library or of a client library."""
    return isinstance(error, ssl.SSLError) or type(error).__name__ == "SSLError"


def _tls_failure(error: BaseException) -> bool:
    return any(tls_error(cause) for cause in causes(error))


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """The wait a ``Retry-After`` header asks for, in seconds; ``None`` if it asks none.

    :param value: the header: a number of seconds or an HTTP date.
    :param now: the wall clock (:func:`time.time`) to count a date from.
    """
    if not value or not value.strip():
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        moment = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:  # an HTTP date is always GMT
        moment = moment.replace(tzinfo=timezone.utc)
    return max(0.0, moment.timestamp() - (time.time() if now is None else now))


def _noted(tally: ReadTally, state: RetryCallState) -> None:
    if len(tally.causes) < MAX_CAUSES and state.outcome is not None:
        tally.causes.append(cause_of(state.outcome.exception()))


def _pause(seconds: float) -> None:
    # not time.sleep: an Event's wait keeps working under a faked clock (faketime)
    threading.Event().wait(seconds)


@dataclass(frozen=True)
class ReadRetry:
    """How a read of Airflow is tried again: how often, and how long between tries.

    :param tries: the most requests one read makes, the first included (at least 1).
    :param wait_min: the shortest wait between two tries, in seconds.
    :param wait_max: the longest, in seconds: waits grow exponentially from
        ``wait_min`` with random jitter (``wait_random_exponential``), as Airflow's
        own client waits.
    :param sleep: how a wait is spent.
    :param monotonic: the clock the bound is measured on, in seconds.
    :param wall: the wall clock, in seconds since the epoch, a ``Retry-After`` date is
        counted from. A test gives all three from one fake clock, so that waiting moves time.
    """

    tries: int
    wait_min: float
    wait_max: float
    sleep: Callable[[float], None] = field(default=_pause, compare=False, repr=False)
    monotonic: Callable[[], float] = field(default=time.monotonic, compare=False, repr=False)
    wall: Callable[[], float] = field(default=time.time, compare=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.tries, bool) or not isinstance(self.tries, int) or self.tries < 1:
            raise ValueError(f"tries must be a whole number of at least 1, got {self.tries!r}")
        for name, value in (("wait_min", self.wait_min), ("wait_max", self.wait_max)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a number of seconds of at least 0, got {value!r}")
        if self.wait_max < self.wait_min:
            raise ValueError(
                f"wait_max ({self.wait_max!r}) must be at least wait_min ({self.wait_min!r})"
            )

    @classmethod
    def from_settings(cls) -> ReadRetry:
        """The retry ``[retry_window]`` asks for (Airflow's ``[workers]`` values by default)."""
        from airflow_retrywindow.configuration import api_retries, api_retry_wait

        low, high = api_retry_wait()
        return cls(tries=api_retries(), wait_min=low, wait_max=high)

    def call(self, read: Callable[[float], T], *, bound: float, tally: ReadTally) -> T:
        """``read``'s answer, tried again on transient errors within ``bound`` seconds.

        A jittered wait that would run past the bound is shortened, so that one last
        try starts :func:`last_try` seconds before it: an outage shorter than the
        bound is ridden out whatever the jitter drew. A ``Retry-After`` past the bound
        ends the read instead: the server said it will not answer sooner.

        :param read: one try; it is given the seconds left, and should wait no longer.
        :param bound: seconds from now after which no try starts.
        :param tally: where the count of tries is kept, whatever the outcome.
        :raises BaseException: the last try's error, when it is not transient or the
            tries or the bound are spent.
        """
        started = self.monotonic()
        tries = 0
        latest = bound - last_try(bound)  # the latest a try may start

        def attempt() -> T:
            nonlocal tries
            tries += 1
            return read(max(0.0, bound - (self.monotonic() - started)))

        def wait(state: RetryCallState) -> float:
            asked = self._asked_by_server(state)
            if asked is not None:
                return asked
            return max(0.0, min(self._jittered(state), latest - (self.monotonic() - started)))

        def spent(state: RetryCallState) -> bool:
            if state.attempt_number >= self.tries:
                return True
            remaining = latest - (self.monotonic() - started)
            # the last try is made; a wait cut to end at ``latest`` is still in time (the
            # clock moved on a moment since it was chosen); a server's longer one is not
            return remaining <= _MOMENT or state.upcoming_sleep > remaining + _MOMENT

        retrying = Retrying(
            retry=retry_if_exception(transient),
            stop=spent,
            wait=wait,
            sleep=self.sleep,
            before_sleep=lambda state: _noted(tally, state),
            reraise=True,
        )
        try:
            return retrying(attempt)
        finally:
            tally.last = ReadCount(tries=tries, seconds=self.monotonic() - started)
            tally.retries += max(0, tries - 1)

    def _jittered(self, state: RetryCallState) -> float:
        """Jittered exponential backoff, as Airflow's own client waits."""
        jittered = wait_random_exponential(multiplier=1, min=self.wait_min, max=self.wait_max)
        return float(jittered(state))

    def _asked_by_server(self, state: RetryCallState) -> float | None:
        """The wait the failed answer's ``Retry-After`` asks for, if any."""
        error = state.outcome.exception() if state.outcome is not None else None
        if not isinstance(error, ErrorAnswer):
            return None
        return retry_after_seconds(error.retry_after, now=self.wall())


#: the time the last try of a read is left before the bound, at most
LAST_TRY_SECONDS = 1.0
#: what the clock may move between a wait's choice and the check of the bound
_MOMENT = 0.01


def last_try(bound: float) -> float:
    """Seconds left for the last try before ``bound``: 1 s, or a quarter of a shorter bound."""
    return min(LAST_TRY_SECONDS, max(0.0, bound) / 4)
