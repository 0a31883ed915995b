"""How long a gate test DAG's task pauses so that its gate sees a target's backoff over.

Not a DAG: a module beside them in their DAG folder (Airflow puts the folder on the
import path when it parses a file or runs a task). A gate decides at the earliest "now"
the API server's clock may mean: the ``Date`` it measures the server's clock with has
whole seconds, and uvicorn renews it once a second. And the model counts whole seconds:
a try's end is rounded up onto the decision's grid, then up again, so the retry it
allows may start up to two seconds after the end plus the backoff. A gate that looked
2.2 s after a 1 s backoff began found it still running, and skipped the retry.

A run its test put on a clock of its own (``tests/gate/run_clock.py``) does not pause: the
clock is moved on by as much and stopped there, so the gates decide at that instant, however
long a busy machine takes to start them and to read the API server; and a task stops it
(:func:`stop_clock`) so that what follows decides at the instant the task ended.
"""

from __future__ import annotations

import time

from airflow_retrywindow.timing.skew import DATE_LAG, DATE_RESOLUTION

#: the model's rounding of a try's end, at most (airflow_retrywindow/timing/fixtures.py)
ROUNDING = 2.0
#: the gate's reads, from the request to the answer, on a loaded machine
ROUND_TRIP = 0.5


def settle_past(backoff: float) -> None:
    """Wait until a gate deciding now sees a backoff of ``backoff`` seconds, begun now, over:
    on the run's clock, move it on by as much and stop it; else sleep, a gate's reads on a
    loaded machine more."""
    past = backoff + ROUNDING + (DATE_RESOLUTION + DATE_LAG).total_seconds()
    if not _advanced(past):
        time.sleep(past + ROUND_TRIP)


def pause(seconds: float) -> None:
    """Let ``seconds`` pass: on the run's clock, move it on by as much and stop it."""
    if not _advanced(seconds):
        time.sleep(seconds)


def stop_clock() -> None:
    """Stop the run's clock, when its test gave it one, at this instant."""
    _advanced(0)


def _advanced(seconds: float) -> bool:
    """Whether the run has its test's clock, moved on by ``seconds`` and stopped there."""
    try:  # the repository is on the import path of a run its test gives a clock
        from tests.gate import run_clock
    except ImportError:
        return False
    return run_clock.advance(seconds)
