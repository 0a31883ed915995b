"""A breaker pool through a brownout, on a real scheduler and triggerer, beside plain Airflow.

The dependency serves a quarter of the pool's slots at once (:data:`SERVED`) and refuses
the rest, then half of that (:data:`SERVED_LATER`), for :data:`BROWNOUT` seconds in all;
each call it serves takes :data:`SERVE` seconds. The fleet is that of
``test_breaker_on_scheduler.py``, in a pool of :data:`SLOTS` slots; ``rw_breaker_plain``
calls the same dependency with Airflow's own retries in a pool as large. The pool's size
the breaker gives it is sampled every second from its description.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from devstack.breaker_fleet import (
    GATED_DAGS,
    PLAIN_DAG,
    DependencyStandIn,
    breaker_line,
    final_states,
    fleet_stack,
)
from devstack.stack import AirflowStack

pytestmark = [pytest.mark.airflow, pytest.mark.slow(minutes=10), pytest.mark.alone]

ROUND = 15
SLOTS = 16
SERVED = 4
SERVED_LATER = 2
BROWNOUT = 300.0
#: a served call, well within a round; the fleet outlasts the brownout
SERVE = 5.0
MAP_INDEXES = 50
RUN_TIMEOUT = 1200
#: the rounds the issue allows the breaker to settle in, after a change of what is served
SETTLE_ROUNDS = 3


@pytest.fixture(scope="module")
def standin() -> Iterator[DependencyStandIn]:
    server = DependencyStandIn(serve=SERVE)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, standin: DependencyStandIn
) -> Iterator[AirflowStack]:
    home = tmp_path_factory.mktemp("brownout")
    with fleet_stack(home, standin, ROUND, MAP_INDEXES, SLOTS) as running:
        yield running


@dataclass(frozen=True)
class Brownout:
    """The brownout's runs once they ended, and the breaker's slots as they were sampled.

    :param runs: DAG id -> run id.
    :param start: when the dependency began to serve only :data:`SERVED` (Unix seconds).
    :param change: when it began to serve only :data:`SERVED_LATER`.
    :param end: when it served all again.
    :param slots: (when, the slots the breaker gave the pool), every second.
    """

    runs: dict[str, str]
    start: float
    change: float
    end: float
    slots: list[tuple[float, int]]

    def slots_between(self, start: float, end: float) -> list[int]:
        return [count for at, count in self.slots if start <= at < end]


def _sample(stack: AirflowStack, until: threading.Event, found: list[tuple[float, int]]) -> None:
    while not until.wait(1.0):
        line = breaker_line(stack)
        if line is not None:
            found.append((time.time(), int(line["slots"])))


@pytest.fixture(scope="module")
def brownout(stack: AirflowStack, standin: DependencyStandIn) -> Brownout:
    start = standin.serving(SERVED)
    conf = {"deadline_in": 7200}
    runs = {
        dag_id: stack.trigger(
            dag_id,
            conf={**conf, "endpoint": "plain" if dag_id == PLAIN_DAG else "gated"},
            logical_date="2026-11-02",
        )
        for dag_id in (*GATED_DAGS, PLAIN_DAG)
    }
    slots: list[tuple[float, int]] = []
    done = threading.Event()
    sampler = threading.Thread(target=_sample, args=(stack, done, slots), daemon=True)
    sampler.start()
    try:
        time.sleep(BROWNOUT / 2)  # the brownout itself: what the fleet is tried against
        change = standin.serving(SERVED_LATER)
        time.sleep(BROWNOUT / 2)
        end = standin.up()
        for dag_id, run_id in runs.items():
            stack.wait_for_run(dag_id, run_id, timeout=RUN_TIMEOUT)
    finally:
        done.set()
        sampler.join()
    found = Brownout(runs, start, change, end, slots)
    print(timeline(found, standin))
    return found


def timeline(brownout: Brownout, standin: DependencyStandIn) -> str:
    """Each round of the brownout: the breaker's slots, and the calls served and refused."""
    lines = ["round | slots | gated served / refused | plain served / refused"]
    at = brownout.start
    while at < brownout.end:
        slots = sorted(set(brownout.slots_between(at, at + ROUND)))
        counts = [
            (sum(c.status == 200 for c in calls), sum(c.status != 200 for c in calls))
            for calls in (standin.between(at, at + ROUND, name) for name in ("gated", "plain"))
        ]
        lines.append(f"{at - brownout.start:5.0f} | {slots} | {counts[0]} | {counts[1]}")
        at += ROUND
    return "\n".join(lines)


def _settled(brownout: Brownout, since: float, until: float) -> list[int]:
    return brownout.slots_between(since + SETTLE_ROUNDS * ROUND, until)


def test_the_slots_settle_at_what_the_dependency_serves_within_three_rounds(
    brownout: Brownout, standin: DependencyStandIn
) -> None:
    # from the first call it refused: the fleet's first tries take a while to start
    refused = [
        c.at for c in standin.between(brownout.start, brownout.end, "gated") if c.status != 200
    ]
    first = _settled(brownout, min(refused), brownout.change)
    assert first, brownout.slots
    assert all(abs(count - SERVED) <= 0.25 * SERVED for count in first), first


def test_the_slots_follow_what_the_dependency_serves_when_it_changes(brownout: Brownout) -> None:
    later = _settled(brownout, brownout.change, brownout.end)
    assert later, brownout.slots
    # at most one slot more than it serves: the limit's try of one slot more
    assert all(count <= SERVED_LATER + 1 for count in later), later
    assert min(later) <= SERVED_LATER


def test_once_settled_at_most_a_tenth_of_the_calls_are_refused(
    standin: DependencyStandIn, brownout: Brownout
) -> None:
    gated = standin.between(brownout.start, brownout.end, "gated")
    began = min(call.at for call in gated if call.status != 200)
    settled = [
        call
        for start, end in ((began, brownout.change), (brownout.change, brownout.end))
        for call in standin.between(start + SETTLE_ROUNDS * ROUND, end, "gated")
    ]
    refused = [call for call in settled if call.status != 200]
    assert settled
    assert len(refused) <= 0.1 * len(settled), (len(refused), len(settled))


def test_no_gated_task_fails_for_good_because_of_the_brownout(
    stack: AirflowStack, brownout: Brownout
) -> None:
    finals = final_states(stack, brownout.runs, GATED_DAGS)
    assert len(finals) == len(GATED_DAGS) * MAP_INDEXES
    assert [each for each in finals if each[0] != "success"] == []


def test_plain_airflow_beside_it_is_refused_far_more(
    stack: AirflowStack, standin: DependencyStandIn, brownout: Brownout
) -> None:
    plain = standin.between(brownout.start, brownout.end, "plain")
    gated = standin.between(brownout.start, brownout.end, "gated")
    share = {
        name: sum(call.status != 200 for call in calls) / len(calls)
        for name, calls in (("plain", plain), ("gated", gated))
    }
    print(f"refused share in the brownout: {share}")
    assert share["plain"] > 2 * share["gated"], share
