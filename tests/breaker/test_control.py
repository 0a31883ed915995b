"""A round of the breaker pools through the REST API: what it reads and what it writes.

The API is :class:`~tests.breaker.fake_pools.FakePools`, in memory, its scheduler run
in the round's wait for a probe; the API server's clock is the test's.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pendulum
import pytest

from airflow_retrywindow.breaker import control
from airflow_retrywindow.breaker.control import (
    FORCE_PREFIX,
    PROBE_WAIT,
    RENEW_AHEAD,
    Controller,
    server_now,
)
from airflow_retrywindow.breaker.law import ON_CALL
from airflow_retrywindow.breaker.settings import BreakerPools, BreakerSettings
from airflow_retrywindow.records.breaker_state import (
    CLOSED,
    OPEN,
    STARTED,
    BreakerState,
    failure_key,
)
from tests.breaker.fake_pools import START, FakePools, pool_row, tried

POOL = "positions_api"
OWNERS = "Positions API: 24 calls at once"
ROUND = 30
SETTINGS = BreakerSettings(round=ROUND, trip_calls=3)


@pytest.fixture(autouse=True)
def servers_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Now, for a round, is the fake API server's clock."""
    monkeypatch.setattr(control, "server_now", lambda api: api.now)


def _controller(api: FakePools, *names: str) -> Controller:
    pools = BreakerPools({name: SETTINGS for name in names or (POOL,)})
    return Controller(api, pools, sleep=api.scheduler_loop)


def _state(api: FakePools, name: str = POOL) -> BreakerState | None:
    return BreakerState.in_description(api.rows[name].description)


def _watched(size: int = 24) -> FakePools:
    """A breaker pool its controller has watched once, closed at ``size``."""
    line = BreakerState.closed(POOL, size, START, "watching the pool").described(OWNERS)
    return FakePools({POOL: pool_row(POOL, size, line)})


def _opened(probe_due: pendulum.DateTime = START, size: int = 24) -> FakePools:
    """A breaker pool open since ``START``, its next probe due at ``probe_due``."""
    state = replace(
        BreakerState.closed(POOL, size, START, "").moved(OPEN, 0, START, "3 calls refused"),
        next_probe=probe_due,
    )
    return FakePools({POOL: pool_row(POOL, 0, state.described(OWNERS))})


def _later(api: FakePools, seconds: int = ROUND) -> FakePools:
    api.now = api.now.add(seconds=seconds)
    api.calls.clear()
    return api


def test_watching_a_new_pool_writes_its_line_and_keeps_the_owners_words() -> None:
    api = FakePools({POOL: pool_row(POOL, 24, OWNERS)})
    (turn,) = _controller(api).round([POOL])
    assert api.requests() == ["pools", "variables", "set_pool"]
    assert api.writes() == [(POOL, 24)]  # the size as it was
    state = _state(api)
    assert state == turn.state == BreakerState.closed(POOL, 24, START, "watching the pool")
    assert api.rows[POOL].description is not None
    assert api.rows[POOL].description.splitlines()[0] == OWNERS
    assert turn.slots is None


def test_a_closed_pool_with_nothing_refused_writes_nothing() -> None:
    api = _later(_watched())
    api.tries = [tried(POOL, "success", api.now.subtract(seconds=5))]
    api.marks = [(failure_key(POOL), api.now.subtract(seconds=ROUND + 1))]  # a round before
    (turn,) = _controller(api).round([POOL])
    # the reads, and no write: a closed breaker that stays closed costs no change
    assert api.requests() == ["pools", "variables", "pool_listing", "xcom_count"]
    assert turn.state is not None and turn.state.phase == CLOSED and turn.slots is None


def test_refused_calls_with_none_served_trip_the_breaker() -> None:
    api = _later(_watched())
    api.tries = [tried(POOL, "up_for_retry", api.now.subtract(seconds=s)) for s in (3, 9, 20)]
    (turn,) = _controller(api).round([POOL])
    assert api.writes() == [(POOL, 0)]
    state = _state(api)
    assert state is not None and state == turn.state
    assert (state.phase, state.slots, state.size) == (OPEN, 0, 24)
    assert state.reason == "3 calls refused, none served"
    assert state.next_probe == api.now.add(seconds=ROUND)


def test_failures_marked_by_tries_that_ended_failed_count_too() -> None:
    api = _later(_watched())
    api.marks = [(failure_key(POOL), api.now.subtract(seconds=s)) for s in (1, 2, 3)]
    api.marks.append((failure_key("elsewhere"), api.now))
    (turn,) = _controller(api).round([POOL])
    assert ("xcom_count", failure_key(POOL)) in api.calls
    assert turn.state is not None and turn.state.phase == OPEN
    # without the marks (Airflow 3.1 and 3.2: no retry policy marks them) none is read
    unmarked = _later(_watched())
    unmarked.marks = list(api.marks)
    controller = replace(_controller(unmarked), marked=False)
    (kept,) = controller.round([POOL])
    assert "xcom_count" not in unmarked.requests()
    assert kept.state is not None and kept.state.phase == CLOSED


def test_a_probe_opens_one_slot_a_task_takes_and_closes_it_again() -> None:
    api = _opened(probe_due=START.add(seconds=ROUND))
    api.waiting[POOL] = 200
    api = _later(api)
    (turn,) = _controller(api).round([POOL])
    assert api.requests() == ["pools", "variables", "pool_listing", "set_pool", "set_pool"]
    # open slots past those held, then none: one task was let through
    assert api.writes() == [(POOL, 1), (POOL, 0)]
    assert api.waits == [PROBE_WAIT]
    assert (api.rows[POOL].occupied, api.waiting[POOL]) == (1, 199)
    state = turn.state
    assert state is not None and state.phase == OPEN and state.probes == 1
    assert state.last_probe is not None and state.last_probe.outcome == STARTED
    assert state.last_probe.at == api.now
    assert _state(api) == state


def test_a_probe_no_task_took_is_made_again_the_next_round() -> None:
    api = _later(_opened(probe_due=START.add(seconds=ROUND)))  # nothing waits for a slot
    (turn,) = _controller(api).round([POOL])
    assert api.writes() == [(POOL, 1), (POOL, 0)]
    state = turn.state
    assert state is not None and state.last_probe is not None
    assert (state.last_probe.outcome, state.probes) == (STARTED, 1)
    # the next round: no outcome and nothing under way, so no task took the slot
    (again,) = _controller(_later(api)).round([POOL])
    assert api.writes() == [(POOL, 1), (POOL, 0)]
    assert again.state is not None and again.state.last_probe is not None
    assert (again.state.last_probe.outcome, again.state.probes) == (STARTED, 1)
    assert again.state.last_probe.at == api.now


def test_an_open_breaker_whose_probe_is_not_due_keeps_its_line_current_and_probes_not() -> None:
    api = _later(_opened(probe_due=START.add(minutes=10)))
    _controller(api).round([POOL])
    assert api.writes() == [(POOL, 0)]  # no probe: the line's round moved on
    state = _state(api)
    assert state is not None and state.checked_at == api.now and state.probes == 0
    # and the failure marks are not read while it is open: nothing of the pool runs
    assert "xcom_count" not in api.requests()


def test_a_pool_looked_at_less_than_a_round_ago_waits_for_the_rest_of_it_when_unscheduled() -> None:
    api = _later(_opened(probe_due=START.add(minutes=10)), seconds=ROUND - 8)
    (turn,) = _controller(api).round([POOL], unscheduled=[POOL])
    # its line's last round was 22 s ago: nothing more is read, nothing written
    assert api.requests() == ["pools", "variables"]
    assert turn.wait == timedelta(seconds=8) and turn.slots is None
    assert turn.state == _state(api)
    # due within the lease's renewal, or when its trigger knows when its round is: looked at
    for since, unscheduled in ((ROUND - RENEW_AHEAD.seconds, [POOL]), (ROUND - 8, [])):
        looked = _later(_opened(probe_due=START.add(minutes=10)), seconds=since)
        (turn,) = _controller(looked).round([POOL], unscheduled=unscheduled)
        assert turn.wait is None and "pool_listing" in looked.requests()


@pytest.mark.parametrize("size", [24, 1])
def test_a_pool_switched_off_is_given_back_its_size_and_its_line_dropped(size: int) -> None:
    api = _later(_opened(size=size))
    (turn,) = _controller(api, "warehouse").round([])
    assert api.writes() == [(POOL, size)]
    assert api.rows[POOL].description == OWNERS
    assert turn.state is None and turn.slots == size
    assert (
        turn.reason
        == f"pool 'positions_api' is no longer in breaker_pools: given back its size, {size} slots"
    )


def test_a_closed_pool_switched_off_keeps_the_size_it_has() -> None:
    api = _later(_watched(size=24))
    api.rows[POOL] = replace(api.rows[POOL], slots=30)  # its owner made it larger since
    _controller(api, "warehouse").round([])
    assert api.writes() == [(POOL, 30)]
    assert api.rows[POOL].description == OWNERS


def test_a_renamed_pool_is_given_back_its_size_under_its_new_name() -> None:
    # the pool was made anew as positions_api_v2, with the old pool's description and slots
    api = _later(_opened())
    api.rows = {"positions_api_v2": replace(api.rows[POOL], name="positions_api_v2")}
    (turn,) = _controller(api).round([])
    assert api.writes() == [("positions_api_v2", 24)]
    assert api.rows["positions_api_v2"].description == OWNERS
    assert turn.reason == (
        "pool 'positions_api_v2' was pool 'positions_api': given back its size, 24 slots"
    )


def test_a_renamed_pool_that_is_a_breaker_under_its_new_name_is_watched_at_its_size() -> None:
    api = _later(_opened())
    api.rows = {"positions_api_v2": replace(api.rows[POOL], name="positions_api_v2")}
    turns = _controller(api, "positions_api_v2").round(["positions_api_v2"])
    assert [turn.state is None for turn in turns] == [True, False]
    # the owner's size comes back, and stays: the breaker watches it from there
    assert api.rows["positions_api_v2"].slots == 24
    state = _state(api, "positions_api_v2")
    assert state is not None and (state.pool, state.phase, state.size) == (
        "positions_api_v2", CLOSED, 24,
    )  # fmt: skip


def test_on_calls_variable_forces_the_breaker_open_then_closed() -> None:
    api = _later(_watched())
    api.forced[FORCE_PREFIX + POOL] = "open"
    (turn,) = _controller(api).round([POOL])
    assert api.writes() == [(POOL, 0)]
    assert turn.state is not None and (turn.state.phase, turn.state.by) == (OPEN, ON_CALL)
    # forced open: no probe, however long it stays so
    for _ in range(3):
        _controller(_later(api, 600)).round([POOL])
        assert api.writes() == [(POOL, 0)]
    api.forced[FORCE_PREFIX + POOL] = ' "Closed" '
    (back,) = _controller(_later(api)).round([POOL])
    assert api.writes() == [(POOL, 24)]  # the owner's size, kept through the force
    assert back.state is not None and (back.state.phase, back.state.by) == (CLOSED, ON_CALL)
    # another pool's Variable, or a value that forces nothing, is no force
    other = _later(_watched())
    other.forced = {FORCE_PREFIX + "warehouse": "open", FORCE_PREFIX + POOL: "half"}
    _controller(other).round([POOL])
    assert other.writes() == []
    assert other.requests().count("variables") == 1  # one read, whatever the pools


def test_a_line_lost_from_the_description_is_written_again_from_the_state_kept() -> None:
    api = _later(_opened(probe_due=START.add(minutes=10)))
    controller = _controller(api)
    controller.round([POOL])
    api.rows[POOL] = replace(api.rows[POOL], description=OWNERS)  # its owner wrote over it
    (turn,) = controller.round([POOL])
    state = _state(api)
    assert state is not None and state == turn.state
    assert (state.phase, state.size) == (OPEN, 24)  # the owner's size is not lost
    assert api.rows[POOL].slots == 0


def test_a_pool_named_that_does_not_exist_is_said_and_nothing_written() -> None:
    api = FakePools({"warehouse": pool_row("warehouse", 8)})
    (turn,) = _controller(api).round([POOL])
    assert turn == control.Turn(POOL, None, None, "pool 'positions_api' does not exist")
    assert api.writes() == []


def test_give_back_gives_every_held_pool_its_owners_size_and_leaves_the_rest() -> None:
    api = _opened()
    watched = BreakerState.closed("warehouse", 8, START, "watching").described(None)
    api.rows["warehouse"] = pool_row("warehouse", 8, watched)
    api.rows["plain"] = pool_row("plain", 3)
    turns = _controller(api).give_back("the controller's lease lapsed")
    assert api.writes() == [(POOL, 24)]
    (turn,) = turns
    state = _state(api)
    assert state is not None and state == turn.state
    assert (state.phase, state.slots, state.owed) == (CLOSED, 24, 0)
    assert state.reason == "the controller's lease lapsed"
    assert api.rows[POOL].description is not None
    assert api.rows[POOL].description.startswith(OWNERS + "\n")


def test_now_is_the_api_servers_clock_as_its_answers_told_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.undo()  # the real server_now
    offset = type("Offset", (), {"low": timedelta(seconds=60), "high": timedelta(seconds=62)})
    before = pendulum.now("UTC")
    found = server_now(type("Api", (), {"clock_offset": offset})())
    after = pendulum.now("UTC")
    assert before.add(seconds=61) <= found <= after.add(seconds=61)
    before = pendulum.now("UTC")
    assert before <= server_now(object()) <= pendulum.now("UTC")  # no answer yet: this clock
