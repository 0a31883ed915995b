"""Bounded jitter: a retry's wait lengthened a little, differently for each try.

When many tasks fail together (the instances of a mapped load when their
database drops, say), the same backoff brings them all back at the same
instant. Jitter spreads them out. Three rules keep the deadline guarantee:

* it only lengthens: the wait is ``w + e`` with ``0 <= e <= floor(fraction * w)``
  whole seconds, and never beyond the task's longest allowed wait;
* it is deterministic per try: ``e`` comes from a SHA-256 of the try's dag id,
  task id, run id, map index and try number (not Python's ``hash()``, which
  changes from one process to the next), so a decision replays exactly;
* the model sees it: the fixture carries the lengthened wait
  (:meth:`~airflow_retrywindow.timing.retry_settings.RetrySettings.with_backoff`),
  so the deadline check is made on the wait Airflow is then told to keep.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from airflow_retrywindow.exceptions import UnsupportedRetrySettings
from airflow_retrywindow.timing.retry_settings import RetrySettings

#: the largest fraction: a wait may at most double, as with Airflow's own jitter
MAX_JITTER = 1.0


@dataclass(frozen=True)
class TryKey:
    """The task instance try a jittered wait belongs to.

    :param dag_id: the DAG.
    :param task_id: the task.
    :param run_id: the DAG run.
    :param map_index: the mapped instance, ``-1`` when the task is not mapped.
    :param try_number: the try that failed.
    """

    dag_id: str
    task_id: str
    run_id: str
    map_index: int
    try_number: int

    @classmethod
    def of_task_instance(cls, ti: object, try_number: int) -> TryKey:
        """The key of a failed try of Airflow's runtime task instance ``ti``."""
        parts = {}
        for name in ("dag_id", "task_id", "run_id", "map_index"):
            if getattr(ti, name, None) is None:
                raise UnsupportedRetrySettings(
                    f"jitter needs the task instance's {name} to pick a wait for this try; "
                    f"the context's ti {ti!r} has none"
                )
            parts[name] = getattr(ti, name)
        return cls(
            dag_id=str(parts["dag_id"]),
            task_id=str(parts["task_id"]),
            run_id=str(parts["run_id"]),
            map_index=int(parts["map_index"]),
            try_number=int(try_number),
        )

    def draw(self) -> int:
        """A number from 0 to 2**64 - 1, the same for this try in every process."""
        text = json.dumps([self.dag_id, self.task_id, self.run_id, self.map_index, self.try_number])
        return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")

    def as_dict(self) -> dict[str, Any]:
        """The key as stored in the evidence."""
        return {
            "dagId": self.dag_id,
            "taskId": self.task_id,
            "runId": self.run_id,
            "mapIndex": self.map_index,
            "tryNumber": self.try_number,
        }


@dataclass(frozen=True)
class JitteredWait:
    """One wait before and after jitter, and what it was drawn from.

    :param fraction: the jitter fraction.
    :param wait: the wait the task's retry settings prescribe, whole seconds.
    :param delay: the lengthened wait, the one the fixture and Airflow get.
    :param longest: the longest wait the settings allow.
    :param key: the try it was drawn for.
    """

    fraction: float
    wait: int
    delay: int
    longest: int
    key: TryKey

    def as_dict(self) -> dict[str, Any]:
        """As stored in the evidence."""
        return {
            "fraction": self.fraction,
            "wait": self.wait,
            "delay": self.delay,
            "longest": self.longest,
            "try": self.key.as_dict(),
        }


@dataclass(frozen=True)
class Jitter:
    """How much a retry's wait may be lengthened: ``0.2`` means by 0 to 20 %.

    :param fraction: from 0 (off) to 1 (a wait may double).
    """

    fraction: float = 0.0

    def __post_init__(self) -> None:
        value = self.fraction
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or not 0 <= value <= MAX_JITTER
        ):
            raise UnsupportedRetrySettings(
                f"jitter must be a number from 0 (off) to {MAX_JITTER:g} (a wait may double), "
                f"got {value!r}"
            )

    @property
    def enabled(self) -> bool:
        """Whether any wait is ever lengthened."""
        return self.fraction > 0

    def room(self, wait: int) -> int:
        """The most whole seconds ``wait`` may be lengthened by."""
        # the decimal the author wrote, exactly: 0.3 of 10 s is 3 s, not 2.999... s
        return math.floor(Fraction(repr(self.fraction)) * wait)

    def stretch(self, wait: int, *, longest: int, key: TryKey) -> int:
        """``wait`` lengthened by this try's share of :meth:`room`, never past ``longest``.

        :param wait: the prescribed wait, whole seconds.
        :param longest: the longest wait allowed; a wait already there stays as it is.
        :param key: the try the wait is for.
        """
        extra = key.draw() % (self.room(wait) + 1)
        return max(wait, min(wait + extra, longest))

    def apply(
        self, settings: RetrySettings, attempts: int, key: TryKey
    ) -> tuple[RetrySettings, JitteredWait]:
        """The settings the fixture carries for this try, and the wait they were drawn from.

        :param settings: the task's retry settings.
        :param attempts: attempts started in the window, the failed one included.
        :param key: the failed try.
        """
        wait = settings.backoff(attempts)
        delay = self.stretch(wait, longest=settings.longest_wait, key=key)
        drawn = JitteredWait(self.fraction, wait, delay, settings.longest_wait, key)
        return settings.with_backoff(attempts, delay), drawn

    def longest_waits(self, settings: RetrySettings) -> RetrySettings:
        """Settings whose every wait is at least the longest this jitter can draw.

        For a gate or sensor deciding about a task with this jitter: it never sees
        the policy's draw, so it decides on the longest wait the draw could give,
        and never calls a task ready before Airflow retries it.

        :param settings: the task's retry settings.
        """
        if not self.enabled:
            return settings
        longest = min(settings.longest_wait, settings.max_delay + self.room(settings.max_delay))
        stretched = math.ceil(settings.initial_delay * (1 + Fraction(repr(self.fraction))))
        # every uncapped wait grows from initialDelay, so stretching it by the whole
        # fraction covers each wait's share; capped waits end at the raised cap
        return replace(
            settings,
            initial_delay=min(stretched, longest),
            max_delay=longest,
            delay_ceiling=longest,
        )
