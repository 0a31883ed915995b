"""What an hour of outage costs a held fleet, replayed on the pure admission.

Twelve task instances of one pool (``retries=3``, ``retry_delay=15 s``) fail at once and
stay failing for an hour. A held retry waits in the triggerer, which reads the pool once
a round for all of them and wakes one only when it probes (or an hour later, to decide
it again); each wake is a worker start. Plain Airflow would start each retry after its
15 s backoff.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum

from airflow_retrywindow.dependency.admission import HOLD, PROBE, Retry, admit, round_of
from airflow_retrywindow.dependency.fleet import PoolCount
from airflow_retrywindow.dependency.settings import MAX_HOLD, DependencySettings
from tests.dependency.test_admission import a_try

SETTINGS = DependencySettings()
START = pendulum.datetime(2026, 12, 4, 14, 0, 7, tz="UTC")
HOUR = 3600
TASKS = 12
MAX_TRIES = 3  # retries=3: tries 1 to 4
BACKOFF = 15


def replay_an_hour() -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
    """Per task instance over an hour of outage: its tries started, the triggerer's wakes
    that ran no try (to decide it again), and its probes."""
    tries = dict.fromkeys(range(TASKS), 2)
    probed: dict[int, int | None] = dict.fromkeys(range(TASKS))
    held_since = dict.fromkeys(range(TASKS), START + timedelta(seconds=BACKOFF))
    started = dict.fromkeys(range(TASKS), 1)  # try 2, held at its start
    rechecks = dict.fromkeys(range(TASKS), 0)
    probes = dict.fromkeys(range(TASKS), 0)
    now = START + timedelta(seconds=BACKOFF)
    while (now - START).total_seconds() < HOUR:
        now += timedelta(seconds=SETTINGS.round_seconds)
        held = tuple(
            a_try(m, "deferred", try_number=tries[m], max_tries=MAX_TRIES, start=START)
            for m in range(TASKS)
        )
        # one read a round for every held retry of the pool (the triggerer's watch)
        state = PoolCount("positions_api", now, 0, None, TASKS, held, 0, None, START).state(
            SETTINGS
        )
        for n in range(TASKS):
            retry = Retry(
                key=held[n].key,
                try_number=tries[n],
                attempts_left=MAX_TRIES - tries[n] + 2,
                backoff_seconds=BACKOFF,
                latest_start=START + timedelta(hours=6),
                probed_round=probed[n],
                protected=True,
            )
            found = admit(state, retry, SETTINGS)
            if found.action == PROBE:
                probes[n] += 1
                probed[n] = round_of(now, SETTINGS)
                if retry.attempts_left >= 2:
                    tries[n] += 1  # the probe fails against the outage: an attempt spent
                    started[n] += 1  # and the next try starts, held again at its start
                held_since[n] = now
            elif (now - held_since[n]).total_seconds() >= MAX_HOLD:
                rechecks[n] += 1  # woken an hour on, to be decided again
                held_since[n] = now
            else:
                assert found.action == HOLD
    return started, rechecks, probes


def test_a_held_task_starts_a_worker_only_to_probe_or_once_an_hour() -> None:
    started, rechecks, probes = replay_an_hour()
    print(f"tries started per task: {sum(started.values()) / TASKS:.1f}")
    print(f"wakes to decide again per task: {sum(rechecks.values()) / TASKS:.1f}")
    print(f"probes per task: {sum(probes.values()) / TASKS:.1f}")
    # beyond its tries and its probes, a held task starts a worker at most once an hour
    assert max(rechecks.values()) <= 1
    # no try beyond its budget: a probe on the last attempt is held again, not spent
    assert max(started.values()) <= MAX_TRIES
    # the probes stay within the budget: one a round, for the whole fleet
    rounds = HOUR // SETTINGS.round_seconds
    assert sum(probes.values()) <= (rounds + 1) * SETTINGS.min_probes
    assert sum(probes.values()) >= rounds * SETTINGS.min_probes - 2
