"""One type for a task as observed: the policy's, the API-read one and the author's.

A task instance the gate read, an explicit observation once parsed, and the task
the policy decides about are all a ``TaskFacts`` whose state is the model's
``TaskState``. An explicit observation is parsed before the gate knows its
target's estimate, so it is decided only once the gate pairs it with its target.
"""

from __future__ import annotations

import dataclasses

import pytest

from airflow_retrywindow.gate.observe import (
    OBSERVATIONS,
    Observed,
    observe,
    observe_explicitly,
    parse_observations,
)
from airflow_retrywindow.model import TaskState
from airflow_retrywindow.timing.clock import Clock
from airflow_retrywindow.timing.fixtures import TaskFacts
from tests.gate.test_decision_parts import NOW, _row, _target

SEEN = {"state": "unknown", "observed_at": "2026-03-02T07:39:00+02:00", "source": "job X"}


def test_a_parsed_observation_is_a_task_as_observed_without_an_estimate() -> None:
    parsed = parse_observations({"load": SEEN}, ["load"], as_of=NOW)["load"]
    assert type(parsed) is TaskFacts
    assert parsed.state is TaskState.UNKNOWN
    assert (parsed.task_id, parsed.attempts, parsed.work, parsed.seen_in) == (
        "load",
        None,
        None,
        "job X",
    )
    with pytest.raises(ValueError, match=r"'load' has no attempts and work: pair it with"):
        parsed.model_task(Clock(origin=NOW.subtract(hours=1)), as_of=NOW, max_observation_age=60)


def test_the_gate_completes_it_with_its_target_and_airflows_count() -> None:
    target = _target()
    parsed = parse_observations({"load": SEEN}, ["load"], as_of=NOW)["load"]
    airflow_view = observe(target, _row("failed", 1, 2), failure=None, failure_source="")
    view = observe_explicitly(target, parsed, airflow_view)
    assert view.source == OBSERVATIONS
    assert view.facts == dataclasses.replace(parsed, attempts=1, work=target.work)
    assert view.detail == "observed 2026-03-02 05:39:00Z; job X"
    assert airflow_view.detail == ""  # Airflow's own view needs no words of where it was seen
    # what was observed is the facts' alone: the row does not repeat it
    observed_fields = {field.name for field in dataclasses.fields(TaskFacts)} - {"task_id"}
    assert observed_fields.isdisjoint(field.name for field in dataclasses.fields(Observed))


def test_airflows_row_becomes_the_same_type() -> None:
    view = observe(_target(), _row("failed", 1, 2), failure="terminal", failure_source="x")
    assert type(view.facts) is TaskFacts
    assert view.facts.state is TaskState.TERMINAL
