"""The verdicts table: every verdict has a whole entry, and every consumer covers every verdict.

A verdict left out of one consumer used to fail silently (a reason saying "no
explanation", a status telling a refusal to start now, a strictness allowing a
start now); these tests make it fail here instead. Pure: no Airflow.
"""

from __future__ import annotations

import json
from itertools import product
from pathlib import Path

import pytest

from airflow_retrywindow.gate.approve import OVERRIDABLE, STANDING
from airflow_retrywindow.metrics import REFUSED, decision_metrics
from airflow_retrywindow.model.decisions import NOT_ATTEMPTED, Decision
from airflow_retrywindow.model.fixture import Fixture
from airflow_retrywindow.model.verdict import TaskDecision
from airflow_retrywindow.notifications.notice import _outcome
from airflow_retrywindow.plugins.page import TONES, _tone
from airflow_retrywindow.timing.clock import Clock
from airflow_retrywindow.timing.reasons import reason, verdict_reason
from airflow_retrywindow.timing.skew import strictest, strictness
from airflow_retrywindow.timing.status import status_update, verdict_status
from airflow_retrywindow.verdicts import (
    ALLOWS_NOW,
    DEPENDENCY_HELD,
    HOLDS,
    REFUSES,
    VERDICTS,
    WAITS,
    Role,
    entry_of,
    verdict,
)

#: the verdicts the table defines beside the model's decisions
EXTRA = (DEPENDENCY_HELD,)
ALL = (*(decision.value for decision in Decision), *EXTRA)
CASE = Path(__file__).resolve().parents[2] / "examples" / "case.json"
#: what a held retry's words name, as the retry-start check fills them in
HELD_FIELDS = {
    "pool": "positions_api",
    "breaker": "open since 14:00:03Z, 0 of 24 slots",
    "hold_until": "14:03:00 UTC",
    "state": "attempt 1 failed with a retryable error, ended 14:02:10 UTC",
    "following": "attempt 2",
    "deadline": "15:00:00 UTC",
}


def test_the_table_holds_exactly_the_model_decisions_and_its_own_verdicts() -> None:
    assert sorted(VERDICTS) == sorted(ALL)
    ranks = [entry.rank for entry in VERDICTS.values()]
    assert ranks == sorted(ranks)  # listed strictest first
    assert DEPENDENCY_HELD == "dependency-held"
    assert Decision.named(DEPENDENCY_HELD) is None  # not a model decision
    assert verdict(Decision.WAIT_BACKOFF) is VERDICTS["wait-backoff"]
    assert verdict(NOT_ATTEMPTED) is None and verdict(3) is None
    with pytest.raises(KeyError, match=r"'held' is not a verdict.*add it to"):
        entry_of("held")


@pytest.mark.parametrize("name", ALL)
def test_each_verdict_has_a_whole_entry(name: str) -> None:
    entry = VERDICTS[name]
    assert entry.name == name
    assert entry.reason.strip() and all(part.strip() for part in entry.status.parts())
    assert entry.rank in (REFUSES, HOLDS, WAITS, ALLOWS_NOW)
    assert isinstance(entry.role, Role)
    # an approval releases only a refusal, and a verdict it cannot release says why
    if entry.overridable:
        assert entry.role is Role.REFUSED and entry.refuses and not entry.stands
    else:
        assert bool(entry.stands) == (entry.role is not Role.RUNS)
    # a notification says what happens to the next try exactly when one may follow
    assert bool(entry.next_try) == (not entry.refuses)
    assert (entry.role is Role.RUNS) == (entry.rank == ALLOWS_NOW)


@pytest.mark.parametrize("decision", list(Decision))
def test_the_table_agrees_with_the_model_on_what_may_start(decision: Decision) -> None:
    entry = entry_of(decision)
    assert entry.refuses == (not decision.allows_retry)
    assert (entry.rank == ALLOWS_NOW) == decision.allows_now


def test_a_held_retry_waits_is_stricter_than_a_backoff_and_stands() -> None:
    held = VERDICTS[DEPENDENCY_HELD]
    assert VERDICTS["wait-backoff"].rank > held.rank > REFUSES
    assert held.role is Role.WAITING and held.waits and not held.refuses
    assert not held.overridable and DEPENDENCY_HELD in STANDING


# -- each consumer covers every verdict ---------------------------------------------------


def _decided_as(decision: Decision) -> tuple[TaskDecision, Fixture]:
    """``load`` of the seed case, decided ``decision`` with a schedule every word can use."""
    fixture = Fixture.from_dict(json.loads(CASE.read_text()))
    start = fixture.as_of + 8
    return TaskDecision("load", decision, 8, start, start + 40), fixture


@pytest.mark.parametrize("decision", list(Decision))
def test_reasons_and_status_words_fill_every_model_decision(decision: Decision) -> None:
    decided, fixture = _decided_as(decision)
    task = fixture.task("load")
    clock = Clock.from_iso("2026-12-04T14:00:00+00:00")
    said = reason(decided, task=task, fixture=fixture, clock=clock, subject="E: x")
    update = status_update(decided, task, fixture)
    assert said.startswith(f"{decision.value}: ") and said.endswith(" (E: x)")
    assert update.startswith("load: confirmed ") and "; next: " in update
    assert "{" not in said + update and "}" not in said + update


def test_every_verdicts_words_differ() -> None:
    clock = Clock.from_iso("2026-12-04T14:00:00+00:00")
    reasons, updates = set(), set()
    for decision in Decision:
        decided, fixture = _decided_as(decision)
        task = fixture.task("load")
        reasons.add(reason(decided, task=task, fixture=fixture, clock=clock).split(": ", 1)[1])
        updates.add(status_update(decided, task, fixture))
    assert len(reasons) == len(updates) == len(Decision)


def test_a_held_retrys_reason_and_status_are_filled_from_the_table() -> None:
    assert verdict_reason(DEPENDENCY_HELD, HELD_FIELDS) == (
        "dependency-held: pool positions_api's breaker is open since 14:00:03Z, 0 of 24 slots; "
        "held until 14:03:00 UTC, when it is decided again"
    )
    update = verdict_status(DEPENDENCY_HELD, "load", HELD_FIELDS)
    assert update.startswith("load: confirmed attempt 1 failed with a retryable error")
    assert "unknown: when pool positions_api recovers" in update
    assert "next evidence: the pool's state at 14:03:00 UTC." in update
    missing = {key: value for key, value in HELD_FIELDS.items() if key != "pool"}
    with pytest.raises(KeyError, match="'pool'"):
        verdict_reason(DEPENDENCY_HELD, missing)


def test_strictness_ranks_every_verdict_and_keeps_the_stricter() -> None:
    for name in ALL:
        assert strictness(name) == VERDICTS[name].rank
    assert strictness(NOT_ATTEMPTED) == ALLOWS_NOW
    for first, second in product(ALL, repeat=2):
        kept = strictest([first, second], decision=lambda a: a, wait_until=lambda a: None)
        assert strictness(kept) == min(strictness(first), strictness(second)), (first, second)


def test_the_approval_either_releases_or_says_why_each_verdict_stands() -> None:
    runs = {name for name in ALL if VERDICTS[name].role is Role.RUNS}
    assert OVERRIDABLE.isdisjoint(STANDING) and runs.isdisjoint(OVERRIDABLE | set(STANDING))
    assert OVERRIDABLE | set(STANDING) | runs == set(ALL)
    assert all(STANDING[name] == VERDICTS[name].stands for name in STANDING)


def test_the_view_gives_every_verdict_the_tone_of_its_role() -> None:
    assert set(TONES) == set(Role)
    for name in ALL:
        assert _tone(name) == TONES[VERDICTS[name].role], name
    assert _tone(DEPENDENCY_HELD) == _tone("wait-backoff") == "wait"
    assert _tone(NOT_ATTEMPTED) == "allow" and _tone("gate-error") == "error"


def test_the_notifier_and_the_metrics_cover_every_verdict() -> None:
    for name in ALL:
        entry = VERDICTS[name]
        if entry.next_try:
            assert _outcome("retry", name) == f"retry allowed: {entry.next_try}"
        counted = {metric.name for metric in decision_metrics(name, None, {})}
        assert (REFUSED in counted) == entry.refuses, name
