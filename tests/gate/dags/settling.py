"""How long a gate test DAG's task pauses so that its gate sees a target's backoff over.

Not a DAG: a module beside them in their DAG folder (Airflow puts the folder on the
import path when it parses a file or runs a task). A gate decides at the earliest "now"
the API server's clock may mean: the ``Date`` it measures the server's clock with has
whole seconds, and uvicorn renews it once a second. And the model counts whole seconds:
a try's end is rounded up onto the decision's grid, then up again, so the retry it
allows may start up to two seconds after the end plus the backoff. A gate that looked
2.2 s after a 1 s backoff began found it still running, and skipped the retry.
"""

from __future__ import annotations

import time

from airflow_retrywindow.timing.skew import DATE_LAG, DATE_RESOLUTION

#: the model's rounding of a try's end, at most (airflow_retrywindow/timing/fixtures.py)
ROUNDING = 2.0
#: the gate's reads, from the request to the answer, on a loaded machine
ROUND_TRIP = 0.5


def settle_past(backoff: float) -> None:
    """Sleep until a gate deciding now sees a backoff of ``backoff`` seconds, begun now, over."""
    measurement = (DATE_RESOLUTION + DATE_LAG).total_seconds()
    time.sleep(backoff + ROUNDING + measurement + ROUND_TRIP)
