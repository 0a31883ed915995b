"""The time one whole gate decision may take, every request to the REST API included.

Each request has its own timeout, but a gate makes many (pages, earlier tries,
XCom values, pools): a slow server answering each just in time could hold a
worker for their sum. A :class:`TimeLimit` starts when the decision starts; every
request then waits at most the smaller of its own timeout and the time left
(:meth:`TimeLimit.request_timeout`), and a decision that runs out is refused.

Measured on the monotonic clock: setting the wall clock does not stretch it.
Pure: no Airflow, no network.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True)
class TimeLimit:
    """A decision's time limit, started at ``started`` on the monotonic clock.

    :param seconds: how long the decision may take.
    :param started: :func:`time.monotonic` when it started.
    :param what: what is limited, for a refusal.
    :param option: the ``[retry_window]`` option that sets the limit.
    """

    seconds: float
    started: float
    what: str = "the gate's decision"
    option: str = "gate_timeout"

    @classmethod
    def starting_now(
        cls, seconds: float, *, what: str = "the gate's decision", option: str = "gate_timeout"
    ) -> TimeLimit:
        """A limit of ``seconds`` from now on ``what``, set by ``option``."""
        return cls(seconds=float(seconds), started=time.monotonic(), what=what, option=option)

    def left(self) -> float:
        """Seconds left, never below 0."""
        return max(0.0, self.seconds - (time.monotonic() - self.started))

    @property
    def expired(self) -> bool:
        """Whether no time is left."""
        return self.left() <= 0.0

    def request_timeout(self, own: float) -> float | None:
        """The timeout of the next request: its own or the time left, whichever is
        shorter; ``None`` when no time is left (make no request).

        :param own: the request's own timeout, in seconds.
        """
        left = self.left()
        return None if left <= 0.0 else min(float(own), left)

    def describe(self) -> str:
        """The limit in words, for a refusal: what ran out and what to change."""
        return (
            f"{self.what} ran out of its {self.seconds:g} s ([retry_window] "
            f"{self.option}) before it could read everything it needs, so nothing is decided: "
            f"check that the API server answers promptly, or raise {self.option}"
        )
