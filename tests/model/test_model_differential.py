"""The model against the published reference listing, on valid, near-valid and junk input."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_retrywindow.model import Fixture, InvalidFixture, decide, evaluate
from tests.model.fixture_strategies import fixtures, json_values, near_valid, shaped_junk
from tests.model.oracle import reference_outcome

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(payload: Any) -> tuple[str, Any]:
    """Like :func:`reference_outcome`, but only ``InvalidFixture`` counts as a rejection."""
    try:
        return "ok", evaluate(payload)
    except InvalidFixture:
        return "rejected", None


def typed_outcome(payload: Any) -> tuple[str, Any]:
    try:
        return "ok", decide(Fixture.from_dict(payload)).to_dict()
    except InvalidFixture:
        return "rejected", None


def same_as_reference(payload: Any) -> None:
    expected = reference_outcome(copy.deepcopy(payload))
    ours = outcome(copy.deepcopy(payload))
    assert ours == expected
    assert typed_outcome(copy.deepcopy(payload)) == expected
    if expected[0] == "ok":
        assert json.dumps(ours[1], sort_keys=True) == json.dumps(expected[1], sort_keys=True)


@SETTINGS
@given(fixtures())
def test_valid_fixtures_match_reference(payload: dict[str, Any]) -> None:
    same_as_reference(payload)


@SETTINGS
@given(near_valid())
def test_near_valid_fixtures_match_reference(payload: dict[str, Any]) -> None:
    same_as_reference(payload)


@settings(max_examples=200, deadline=None)
@given(st.one_of(json_values, shaped_junk()))
def test_junk_matches_reference(payload: Any) -> None:
    same_as_reference(payload)
