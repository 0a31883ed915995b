"""A task's Airflow retry settings, translated into the model's retry policy.

Airflow counts ``retries`` after the first run; the model's ``maxAttempts``
includes it, so ``maxAttempts = retries + 1``. Settings the model cannot express
are refused with a message that says which setting, which value, and what to
change: a wrong translation would gate retries on a timeline that never runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from airflow_retrywindow.exceptions import UnsupportedRetrySettings
from airflow_retrywindow.model.bounds import DURATION_LIMIT, MAX_ATTEMPTS, MAX_MULTIPLIER
from airflow_retrywindow.model.policy import Policy, backoff
from airflow_retrywindow.timing.clock import as_timedelta, seconds_down, seconds_up

#: the model's attempt bound in Airflow's terms: ``retries`` counts after the first run
MAX_RETRIES = MAX_ATTEMPTS - 1
#: Airflow's default cap on a retry delay, ``[core] max_task_retry_delay``
AIRFLOW_DELAY_CAP = 24 * 60 * 60
#: what ``retry_exponential_backoff=True`` means in Airflow 3.3 (its serializer reads 2.0)
TRUE_MULTIPLIER = 2


@dataclass(frozen=True)
class RetrySettings:
    """The retry settings of one task, in Airflow's terms; :attr:`policy` is the model's.

    :param task_id: the task they belong to, for messages.
    :param retries: Airflow ``retries`` (runs after the first).
    :param initial_delay: ``retry_delay`` in whole seconds.
    :param multiplier: ``retry_exponential_backoff`` (1 when off, 2 for ``True``).
    :param max_delay: ``max_retry_delay``, or Airflow's own cap, in whole seconds.
    :param delay_ceiling: the longest wait jitter may lengthen a constant delay to:
        ``max_retry_delay`` or Airflow's own cap (which Airflow itself applies only
        to exponential backoff). ``None``: ``max_delay``.
    """

    task_id: str
    retries: int
    initial_delay: int
    multiplier: int
    max_delay: int
    delay_ceiling: int | None = None

    @classmethod
    def of_task(cls, task: Any, *, delay_cap: int = AIRFLOW_DELAY_CAP) -> RetrySettings:
        """Read and check the retry settings of an Airflow task (or anything shaped like one)."""
        return cls.of(
            task_id=str(task.task_id),
            retries=task.retries,
            retry_delay=task.retry_delay,
            retry_exponential_backoff=task.retry_exponential_backoff,
            max_retry_delay=getattr(task, "max_retry_delay", None),
            delay_cap=delay_cap,
        )

    @classmethod
    def of(
        cls,
        *,
        task_id: str,
        retries: object,
        retry_delay: object,
        retry_exponential_backoff: object,
        max_retry_delay: object,
        delay_cap: int = AIRFLOW_DELAY_CAP,
    ) -> RetrySettings:
        """Check Airflow's settings one by one and translate them."""
        where = f"task {task_id!r}"
        count = _retries(retries, where)
        initial = _delay(retry_delay, "retry_delay", where)
        multiplier = _multiplier(retry_exponential_backoff, where)
        if multiplier == 1:
            # Airflow applies max_retry_delay only to exponential backoff; the
            # author's cap still bounds how far jitter may lengthen the delay
            ceiling = _constant_ceiling(max_retry_delay, delay_cap, initial, where)
            return cls(task_id, count, initial, 1, initial, ceiling)
        cap = delay_cap if max_retry_delay is None else _cap(max_retry_delay, where)
        if cap < initial:
            raise UnsupportedRetrySettings(
                f"{where}: max_retry_delay ({cap} s) is shorter than retry_delay ({initial} s); "
                "raise max_retry_delay or lower retry_delay"
            )
        return cls(task_id, count, initial, multiplier, min(cap, DURATION_LIMIT))

    @property
    def max_attempts(self) -> int:
        """Runs in one window, the first included."""
        return self.retries + 1

    @property
    def longest_wait(self) -> int:
        """The longest wait these settings allow, whole seconds."""
        return self.max_delay if self.delay_ceiling is None else self.delay_ceiling

    @property
    def policy(self) -> Policy:
        """The model's retry policy: ``maxAttempts`` is ``retries + 1``."""
        return Policy(self.max_attempts, self.initial_delay, self.max_delay, self.multiplier)

    def backoff(self, attempts: int) -> int:
        """The model's wait after ``attempts`` attempts of the window."""
        return backoff(self.policy, attempts)

    def with_backoff(self, attempts: int, wait: int) -> RetrySettings:
        """These settings as the model policy whose wait after ``attempts`` is ``wait``.

        For one decision's fixture: the model has no jitter, so a lengthened wait
        reaches it as the policy. ``maxDelay`` becomes ``wait`` and ``initialDelay``
        the smallest delay whose growth reaches it, so that
        ``min(maxDelay, initialDelay * multiplier ** (attempts - 1))`` is ``wait``
        exactly; attempts and multiplier stay as they are.

        :param attempts: attempts started in the window, 1 or more.
        :param wait: the wait, from :meth:`backoff` to :attr:`longest_wait` seconds.
        """
        if not self.backoff(attempts) <= wait <= self.longest_wait:
            raise UnsupportedRetrySettings(
                f"task {self.task_id!r}: a wait of {wait} s after {attempts} attempts is "
                f"outside {self.backoff(attempts)} s to {self.longest_wait} s"
            )
        growth: int = self.multiplier ** (attempts - 1)
        return replace(self, initial_delay=-(-wait // growth), max_delay=wait)

    def with_shortest_wait(self, attempts: int, shortest: int) -> RetrySettings:
        """These settings with the wait after ``attempts`` at least ``shortest`` seconds.

        For a classifier's suggested delay (``classify=``): a floor under the backoff,
        which the model then checks against the deadline like any wait.

        :param attempts: attempts started in the window, 1 or more.
        :param shortest: the shortest wait, whole seconds.
        """
        if shortest <= self.backoff(attempts):
            return self
        raised = replace(self, delay_ceiling=max(self.longest_wait, shortest))
        return raised.with_backoff(attempts, shortest)

    def model_policy(self) -> dict[str, object]:
        """The model's ``policy`` object, as JSON."""
        return self.policy.to_dict()

    def attempts_in_window(self, try_number: int, max_tries: int) -> int:
        """Attempts started in the current window, the failing one included.

        A manual clear keeps ``try_number`` counting and raises ``max_tries`` to
        ``try_number + retries``; the window therefore began at try
        ``max_tries - retries + 1``.

        :param try_number: Airflow's 1-based try number of the failing attempt.
        :param max_tries: Airflow's ``max_tries`` for the task instance.
        """
        attempts = try_number - (max_tries - self.retries)
        if not 1 <= attempts <= self.max_attempts:
            raise UnsupportedRetrySettings(
                f"task {self.task_id!r}: try {try_number} with max_tries {max_tries} and "
                f"retries {self.retries} gives {attempts} attempts in this window, outside "
                f"1..{self.max_attempts}; were the task's retries changed during the run? "
                "Clear the task to start a new window"
            )
        return attempts


def airflow_delay_cap() -> int:
    """The installed Airflow's cap on any retry delay, in whole seconds.

    Airflow applies ``[core] max_task_retry_delay`` when a task sets no
    ``max_retry_delay``; it is read from Airflow's configuration (the Task SDK's
    from 3.2), with Airflow's own fallback. Without Airflow the documented default stands in.
    """
    try:
        from airflow_retrywindow.version_compat import conf
    except ImportError:
        return AIRFLOW_DELAY_CAP
    return conf.getint("core", "max_task_retry_delay", fallback=AIRFLOW_DELAY_CAP)


def _retries(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UnsupportedRetrySettings(f"{where}: retries must be a whole number, got {value!r}")
    if value > MAX_RETRIES:
        raise UnsupportedRetrySettings(
            f"{where}: retries={value} means {value + 1} runs; the gate supports up to "
            f"{MAX_RETRIES} retries ({MAX_RETRIES + 1} runs). Lower retries"
        )
    return value


def _delay(value: object, name: str, where: str) -> int:
    try:
        delta = as_timedelta(value, name)
    except ValueError as error:
        raise UnsupportedRetrySettings(f"{where}: {error}") from None
    seconds = seconds_up(delta)
    if not 1 <= seconds <= DURATION_LIMIT:
        raise UnsupportedRetrySettings(
            f"{where}: {name}={_show(delta)} is outside the gate's 1 s to {DURATION_LIMIT} s; "
            f"set {name} within that range"
        )
    return seconds


def _cap(value: object, where: str) -> int:
    try:
        delta = as_timedelta(value, "max_retry_delay")
    except ValueError as error:
        raise UnsupportedRetrySettings(f"{where}: {error}") from None
    # a cap rounds down: rounding it up would promise waits Airflow never makes
    seconds = seconds_down(delta)
    if seconds < 1:
        raise UnsupportedRetrySettings(
            f"{where}: max_retry_delay={_show(delta)} is under 1 s; set at least 1 s"
        )
    return seconds


def _constant_ceiling(max_retry_delay: object, delay_cap: int, initial: int, where: str) -> int:
    if max_retry_delay is None:
        return max(initial, min(delay_cap, DURATION_LIMIT))
    try:
        cap = _cap(max_retry_delay, where)
    except UnsupportedRetrySettings:
        # Airflow ignores this setting for a constant delay, so it is not refused
        # here; unreadable, it leaves jitter no room
        return initial
    return max(initial, min(cap, DURATION_LIMIT))


def _multiplier(value: object, where: str) -> int:
    if isinstance(value, bool):
        # Airflow 3.3 stores True as the multiplier 2.0 and doubles each wait
        return TRUE_MULTIPLIER if value else 1
    if not isinstance(value, (int, float)) or not _whole_in(value, 0, MAX_MULTIPLIER):
        raise UnsupportedRetrySettings(
            f"{where}: retry_exponential_backoff={value!r} cannot be expressed; the gate "
            f"supports 0 (off) or a whole multiplier from 1 to {MAX_MULTIPLIER}"
        )
    return max(int(value), 1)


def _whole_in(value: float, low: int, high: int) -> bool:
    return math.isfinite(value) and value == int(value) and low <= value <= high


def _show(delta: timedelta) -> str:
    return f"{delta.total_seconds():g} s"
