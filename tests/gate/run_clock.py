"""The wall clock of a DAG run, controlled by its test: stopped, moved on, never waited for.

A test DAG's run (``airflow dags test``: every task in one process), or every process of a
test's Airflow stack (``clocked_site/sitecustomize.py`` on their import path), follows a
clock kept in a file, ``RW_RUN_CLOCK``: either ``+S`` or ``-S``, real time shifted by S seconds,
running; or an instant in seconds since the epoch, where the clock stands still. The
process's every read of the wall clock (``time.time``, ``datetime.now``, so pendulum's and
Airflow's) gives that time; its monotonic clock, which timeouts and sleeps count on, runs
as ever. A task stops the clock (:func:`stop`) or moves it on (:func:`advance`) in
process; the test sets it running from an instant (:meth:`RunClock.run_from`) when the run
says it waits until then; the API server's ``Date``, as the run reads it, tells the same
time (``tests/gate/frozen_server_clock.server_on``).

So a sensor that looks at the instant its target failed finds the whole backoff to wait,
however late a busy machine starts it, and a backoff is over when the clock is moved past
it, not when a wait long enough for a slow start has passed.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pendulum

#: the environment variable that names a run's clock file
VARIABLE = "RW_RUN_CLOCK"
#: the folder whose ``sitecustomize`` puts every process started with it on the run's clock
SITE = Path(__file__).with_name("clocked_site")
#: how often the run reads the file for the test's changes
FOLLOW_EVERY = 0.01


class RunClock:
    """A run's clock file, as the test and the run read and write it.

    :param path: the file.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def started(cls, path: Path) -> RunClock:
        """A new clock file at ``path``, reading real time."""
        clock = cls(path)
        clock._write("+0")
        return clock

    def env(self) -> dict[str, str]:
        """The environment that puts a DAG run on this clock."""
        return {VARIABLE: str(self.path)}

    def services_env(self, pythonpath: str) -> dict[str, str]:
        """The environment that puts every Python process of a stack on this clock.

        :param pythonpath: the import path the services have otherwise; it must hold the
            repository, whose ``tests.gate.run_clock`` they import.
        """
        return {**self.env(), "PYTHONPATH": os.pathsep.join([str(SITE), pythonpath])}

    def kept(self) -> str:
        return self.path.read_text().strip()

    def now(self) -> float:
        """What the clock reads, in seconds since the epoch (the real clock's, shifted)."""
        kept = self.kept()
        return _real() + float(kept) if _running(kept) else float(kept)

    def stopped(self) -> bool:
        """Whether the clock stands still."""
        return not _running(self.kept())

    def stop_at(self, at: float) -> None:
        """Stop the clock at ``at``, seconds since the epoch."""
        self._write(f"{at:.6f}")

    def run_from(self, at: pendulum.DateTime) -> None:
        """Set the clock running from ``at`` on: forward only, as a clock may go."""
        assert at.timestamp() >= self.now(), f"the clock would go back to {at}"
        self._write(f"{at.timestamp() - _real():+.6f}")

    def _write(self, spec: str) -> None:
        partial = self.path.with_name(self.path.name + ".partial")
        partial.write_text(spec + "\n")
        partial.replace(self.path)  # whole: a reader never finds half a time


def _running(kept: str) -> bool:
    return kept[:1] in ("+", "-")


def _real() -> float:
    """The real wall clock, whatever the process's clock says: the monotonic clock, which no
    one moves, from where the two stood when this module was imported."""
    return _REAL_AT_IMPORT + (time.monotonic() - _MONOTONIC_AT_IMPORT)


_REAL_AT_IMPORT, _MONOTONIC_AT_IMPORT = time.time(), time.monotonic()


# -- in the run's process -----------------------------------------------------------------


class _Follower:
    """Keeps this process's wall clock on the run's clock file."""

    def __init__(self, clock: RunClock) -> None:
        import time_machine

        self.clock = clock
        self.lock = threading.Lock()
        self.applied = ""
        self.travel = time_machine.travel(_real(), tick=True).start()
        self.apply()
        self._start()
        # a forked child (a task's process) keeps the clock, but not the thread that follows
        # it, and may keep its lock held, had the fork come while it read the file
        os.register_at_fork(after_in_child=self._restart)

    def _start(self) -> None:
        threading.Thread(target=self._follow, name="run-clock", daemon=True).start()

    def _restart(self) -> None:
        self.lock = threading.Lock()
        self._start()

    def apply(self) -> None:
        with self.lock:
            kept = self.clock.kept()
            if kept != self.applied:
                self.travel.move_to(self.clock.now(), tick=_running(kept))
                # time-machine starts a moved clock ticking at its first read, not at the
                # move: a process that read no time for seconds (an idle worker, forked for
                # a task later) ran that far behind the clock, and a gate took it for skew
                time.time()
                self.applied = kept

    def _follow(self) -> None:
        while True:
            self.apply()
            threading.Event().wait(FOLLOW_EVERY)


#: this process's follower, once it follows a clock
_FOLLOWING: list[_Follower] = []


def follow() -> None:
    """Put this process on the clock ``RW_RUN_CLOCK`` names, if it names one."""
    path = os.environ.get(VARIABLE)
    if path and not _FOLLOWING:
        _FOLLOWING.append(_Follower(RunClock(Path(path))))


def stop() -> None:
    """Stop the run's clock where it is now; nothing when the run has none."""
    advance(0)


def advance(seconds: float) -> bool:
    """Move the run's clock on by ``seconds`` and stop it there; whether the run has one."""
    for follower in _FOLLOWING:
        follower.clock.stop_at(time.time() + seconds)
        follower.apply()
    return bool(_FOLLOWING)
