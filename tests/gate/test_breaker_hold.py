"""A gate's or sensor's repeat in a breaker pool: held while the breaker is open, and how long."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pendulum
import pytest

from airflow_retrywindow.breaker.law import ON_CALL
from airflow_retrywindow.breaker.settings import BreakerSettings
from airflow_retrywindow.gate.breaker_hold import MAX_HOLD, SPREAD, BreakerHold
from airflow_retrywindow.model.decisions import Decision
from airflow_retrywindow.records.breaker_state import CLOSED, LIMITED, OPEN, RECOVERING
from airflow_retrywindow.verdicts import DEPENDENCY_HELD, VERDICTS, WAITS
from tests.breaker.states import OPENED, opened

SETTINGS = BreakerSettings(round=60)
#: a verdict that lets the repeat start now, one after its backoff, and refusals
RUNS = [Decision.RETRY_ELIGIBLE.value, Decision.WAIT_BACKOFF.value]


def _hold(phase: str = OPEN, **changes: object) -> BreakerHold:
    return BreakerHold(replace(opened(), phase=phase, **changes), SETTINGS)  # type: ignore[arg-type]


@pytest.mark.parametrize("phase", [CLOSED, RECOVERING, LIMITED, OPEN])
def test_only_an_open_breaker_holds_a_repeat(phase: str) -> None:
    # recovering and limited breakers hold with their slots already
    assert _hold(phase).holds(Decision.RETRY_ELIGIBLE.value) is (phase == OPEN)


@pytest.mark.parametrize("decision", sorted(VERDICTS))
def test_an_open_breaker_holds_only_a_repeat_that_would_run(decision: str) -> None:
    held = _hold().holds(decision)
    assert held is (decision in RUNS)
    # a refusal stays a refusal, and a held repeat is not held twice
    assert held is (VERDICTS[decision].rank >= WAITS)
    assert not _hold().holds(DEPENDENCY_HELD)
    assert not _hold().holds("not a verdict")


@pytest.mark.parametrize(
    ("held_for", "hold"),
    [
        (timedelta(seconds=10), 60),  # a round at least
        (timedelta(minutes=30), 1800),  # as long as the pool has been held
        (timedelta(hours=3), MAX_HOLD),  # an hour at most
    ],
)
def test_a_held_repeat_is_decided_again_after_as_long_as_the_pool_was_held(
    held_for: timedelta, hold: int
) -> None:
    now = OPENED + held_for
    spread = max(SPREAD * hold, SETTINGS.round)
    untils = [_hold().hold_until(None, f"load[{index}]", now) for index in range(200)]
    waits = [(until - now).total_seconds() for until in untils]
    assert all(hold <= wait < hold + spread for wait in waits)
    # spread over the whole of it by the task instance: not one round for all
    assert len(set(untils)) == len(untils)
    assert max(waits) - min(waits) > 0.9 * spread
    # and the same task instance is always held to the same end
    assert _hold().hold_until(None, "load[7]", now) == untils[7]


def test_a_model_start_later_than_the_hold_is_kept() -> None:
    now = OPENED.add(minutes=5)
    later = now.add(hours=2)
    assert _hold().hold_until(later, "load", now) == later
    sooner = now.add(seconds=1)
    assert _hold().hold_until(sooner, "load", now) > now.add(minutes=5)


def test_the_reason_and_status_name_the_pool_its_breaker_and_the_holds_end() -> None:
    hold = _hold()
    until = OPENED.add(minutes=7)
    assert hold.reason(until, OPENED) == (
        "dependency-held: pool positions_api's breaker is open since 14:00:03Z, 0 of 24 "
        "slots; last probe 14:02:11Z started; held until 14:07:03Z, when it is decided again"
    )
    model = {"state": "attempt 1 failed", "following": "attempt 2", "deadline": "15:00:00Z"}
    status = hold.status("load", model, until, OPENED)  # type: ignore[arg-type]
    assert status.startswith("load: confirmed attempt 1 failed")
    assert "when pool positions_api recovers" in status
    assert "hold attempt 2 until 14:07:03Z at the latest" in status
    # a hold that ends another day says which
    assert "held until 2026-12-05 00:10:00Z" in hold.reason(
        pendulum.datetime(2026, 12, 5, 0, 10, tz="UTC"), OPENED
    )
    # a pool on-call forced open says so
    forced = _hold(by=ON_CALL).reason(until, OPENED)
    assert forced.endswith("when it is decided again (forced open by on-call)")
