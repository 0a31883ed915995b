"""What an hour of outage costs a held fleet, replayed on the pure admission.

Twelve task instances of one pool (``retries=3``, ``retry_delay=15 s``) fail at once
and stay failing for an hour. Each check of a held retry starts a worker process in
Airflow; plain Airflow would start each retry after its 15 s backoff.
"""

from __future__ import annotations

import heapq
from datetime import timedelta

import pendulum

from airflow_retrywindow.dependency.admission import HOLD, PROBE, Retry, admit, round_of
from airflow_retrywindow.dependency.fleet import Fleet, PoolTry
from airflow_retrywindow.dependency.settings import DependencySettings

SETTINGS = DependencySettings()
START = pendulum.datetime(2026, 12, 4, 14, 0, 7, tz="UTC")
HOUR = 3600
TASKS = 12
MAX_TRIES = 3  # retries=3: tries 1 to 4
BACKOFF = 15


def replay_an_hour() -> tuple[dict[int, int], dict[int, int]]:
    """Worker starts and probes per task instance over an hour of outage."""
    tries = {n: 2 for n in range(TASKS)}
    holds = dict.fromkeys(range(TASKS), 0)
    probed: dict[int, int | None] = dict.fromkeys(range(TASKS))
    starts = dict.fromkeys(range(TASKS), 0)
    probes = dict.fromkeys(range(TASKS), 0)
    queue = [(START + timedelta(seconds=BACKOFF), n) for n in range(TASKS)]
    heapq.heapify(queue)
    while queue:
        now, n = heapq.heappop(queue)
        if (now - START).total_seconds() > HOUR:
            break
        starts[n] += 1
        fleet = Fleet(
            "positions_api",
            now,
            tuple(
                PoolTry(
                    "dag", "run", f"t{m}", -1, "up_for_reschedule", tries[m], MAX_TRIES, now, now
                )
                for m in range(TASKS)
            ),
        )
        retry = Retry(
            key=("dag", "run", f"t{n}", -1),
            try_number=tries[n],
            attempts_left=MAX_TRIES - tries[n] + 2,
            backoff_seconds=BACKOFF * 2**0,
            latest_start=START + timedelta(hours=6),
            holds=holds[n],
            probed_round=probed[n],
        )
        found = admit(fleet.state(SETTINGS), retry, SETTINGS)
        if found.action == PROBE:
            probes[n] += 1
            probed[n] = round_of(now, SETTINGS)
            tries[n] += 1  # the probe fails against the outage: an attempt spent
            holds[n] = 0
            heapq.heappush(queue, (now + timedelta(seconds=BACKOFF), n))
        else:
            assert found.action == HOLD and found.hold_until is not None
            holds[n] += 1
            heapq.heappush(queue, (found.hold_until, n))
    return starts, probes


def test_a_held_task_starts_a_worker_far_less_often_than_its_backoff_would() -> None:
    starts, probes = replay_an_hour()
    per_task = sum(starts.values()) / TASKS
    print(f"worker starts per held task in the first hour: {per_task:.1f}")
    print(f"plain Airflow, retries every {BACKOFF} s: {HOUR // BACKOFF} an hour")
    assert 2 <= per_task <= 20
    assert max(starts.values()) <= 25
    # no probe ever spends a task instance's last attempt
    assert all(count <= MAX_TRIES - 1 for count in probes.values())
    # and the probes stay within the budget: one a round
    assert sum(probes.values()) <= HOUR // SETTINGS.round_seconds + 1
