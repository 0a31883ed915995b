"""The view's breaker section, from the run's pools as (name, size, description)."""

from __future__ import annotations

from dataclasses import replace

from airflow_retrywindow.breaker.settings import BreakerPools
from airflow_retrywindow.plugins.breaker_rows import (
    UNWATCHED,
    Breakers,
    BreakerSection,
    breakers,
    unknown_pool_note,
)
from airflow_retrywindow.records.breaker_state import MISSED, Probe
from tests.breaker.states import OPENED, closed, opened, recovering

NAMED = BreakerPools.parse('{"positions_api": {}, "warehouse": {}}', option="breaker_pools")


def test_each_breaker_pool_shows_its_state_slots_since_and_last_probe() -> None:
    found = breakers([("positions_api", 0, opened().described("the owner's words"))], NAMED)
    assert found.sections == (
        BreakerSection(
            pool="positions_api",
            phase="open",
            words="open since 14:00:03Z, 0 of 24 slots; last probe 14:02:11Z started",
            reason="3 calls refused, none served",
            facts=(
                ("Slots", "0 of 24"),
                ("Since", "2026-12-04 14:00:03 UTC"),
                ("Checked", "2026-12-04 14:02:11 UTC"),
                ("Set by", "controller"),
                ("Last probe", "2026-12-04 14:02:11 UTC, started (1 since it opened)"),
                ("Next probe", "2026-12-04 14:03:11 UTC"),
            ),
        ),
    )


def test_a_breaker_with_no_probe_yet_shows_neither_probe() -> None:
    (section,) = breakers([("positions_api", 24, closed().described(None))], NAMED).sections
    assert section.phase == "closed"
    assert [name for name, _ in section.facts] == ["Slots", "Since", "Checked", "Set by"]
    (back,) = breakers([("positions_api", 2, recovering().described(None))], NAMED).sections
    assert ("Slots", "2 of 24") in back.facts
    assert "Next probe" not in dict(back.facts)  # none is due while it recovers


def test_a_breaker_pool_no_controller_watched_says_so_and_shows_its_owners_size() -> None:
    for description in (None, "the warehouse", opened("positions_api").described(None)):
        (section,) = breakers([("warehouse", 16, description)], NAMED).sections
        assert (section.pool, section.phase) == ("warehouse", UNWATCHED)
        assert section.words == "16 slots, as the pool's owner set them"
        assert section.reason.startswith("No controller has watched this pool yet")
        assert section.facts == ()


def test_a_pool_that_is_no_breaker_pool_is_left_out_whatever_it_carries() -> None:
    pools = [
        ("reports_api", 0, opened("reports_api").described(None)),
        ("positions_api", 0, opened().described(None)),
        ("default_pool", 128, None),
    ]
    found = breakers(pools, NAMED)
    assert [section.pool for section in found.sections] == ["positions_api"]
    assert not breakers(pools, BreakerPools({}))  # none named: nothing to show


def test_text_is_masked_and_the_settings_problems_are_kept() -> None:
    state = replace(
        opened(),
        reason="refused by https://ops:hunter2@status.example/",
        last_probe=Probe(OPENED.add(minutes=3), MISSED),
    )
    note = unknown_pool_note("postions_api")
    found = breakers([("positions_api", 0, state.described(None))], NAMED, [note])
    (section,) = found.sections
    assert "hunter2" not in section.reason and "status.example" in section.reason
    assert (
        dict(section.facts)["Last probe"] == "2026-12-04 14:03:03 UTC, missed (1 since it opened)"
    )
    assert found.setting_problems == (
        "[retry_window] breaker_pools names 'postions_api', which is no pool: its breaker "
        "holds nothing. Correct the name, or create the pool.",
    )
    assert Breakers(setting_problems=(note,))  # a problem alone is shown
