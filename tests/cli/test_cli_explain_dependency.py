"""``explain`` on a held retry: the pool's state as a dependency, on its own or beside a decision.

The dependency states are written by :class:`DependencyRecord` itself; the decision
they sit beside is a stored decision of ``tests/ui/stored_decisions.json``.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pendulum

from tests.cli.cli_runner import refusal_lines, run_cli
from tests.cli.test_cli_explain_stored import entry, explained
from tests.records.test_dependency_state import HELD, held

KEY = "retry_window_dependency"


def test_a_held_retrys_record_on_its_own_is_explained() -> None:
    assert explained(HELD).splitlines() == [
        "Times are UTC.",
        "Stored decision about try 2 (retry-start); what Airflow was told: hold, held until "
        "2026-12-04 14:03:00Z (dependency-held).",
        HELD["reason"],
        "",
        "Dependency: pool positions_api",
        "  State:          failing: retries are held, a few run as probes each round",
        "  Failing since:  2026-12-04 14:00:03Z",
        "  Failing:        12 task instances, 0 successes since it began",
        "  In a retry:     10 task instances held or under way now",
        "  Waits:          in the triggerer, holding no worker",
        "  Probes:         2 this round (rounds of 60 s, this one from 2026-12-04 14:02:00Z)",
        "  Next probe:     2026-12-04 14:03:00Z",
        "  Read:           2026-12-04 14:02:11Z (the API server's clock), try 2: hold, held "
        "until 2026-12-04 14:03:00Z",
    ]


def test_a_task_state_store_history_of_it_explains_its_latest() -> None:
    later = held(held=11, read_at=pendulum.datetime(2026, 12, 4, 14, 2, 41)).as_dict()
    text = explained({"latest": later, "decisions": [HELD, later]})
    assert "  In a retry:     11 task instances held or under way now" in text.splitlines()


def _with_dependency(value: Any) -> dict[str, Any]:
    stored = entry("load", 0)
    stored[KEY] = value
    return stored


def test_a_decision_carrying_it_shows_it_beside_the_decision_on_the_tables_day() -> None:
    # read on the decision's own day: its times are written like the table's
    day = pendulum.datetime(2026, 12, 3, 9, 27, 20)
    record = held(
        read_at=day, failing_since=day.subtract(minutes=2), round_start=day.replace(second=0),
        next_probe=day.add(seconds=40), hold_until=day.add(seconds=40), action="probe",
        decision="retry-eligible", waits_in=None,
    )  # fmt: skip
    lines = explained(_with_dependency(record.as_dict())).splitlines()
    start = lines.index("Dependency: pool positions_api")
    assert lines[start + 1 : start + 9] == [
        "  State:          failing: retries are held, a few run as probes each round",
        "  Failing since:  09:25:20Z",
        "  Failing:        12 task instances, 0 successes since it began",
        "  In a retry:     10 task instances held or under way now",
        "  Probes:         2 this round (rounds of 60 s, this one from 09:27:00Z)",
        "  Next probe:     09:28:00Z",
        "  Read:           09:27:20Z (the API server's clock), try 2: probe, held until 09:28:00Z",
        "",
    ]
    # under the table, before the job the decision reconciled; nothing else changes
    assert lines[start + 9] == "Reconciled before deciding: job load_20261203_a1"
    assert lines[:start] + lines[start + 9 :] == explained(entry("load", 0)).splitlines()


def test_a_dependency_state_that_cannot_be_read_is_said_and_the_decision_still_explained() -> None:
    text = explained(_with_dependency({**HELD, "version": 2}))
    assert "Dependency: could not be read (version must be 1, got 2)." in text
    assert "Reconciled before deciding: job load_20261203_a1" in text
    assert "Dependency: pool" not in text


def test_a_decision_without_one_says_nothing_of_dependencies() -> None:
    assert "Dependency" not in explained(entry("load", 0))


def test_a_record_of_another_version_on_its_own_is_refused_as_before() -> None:
    newer = copy.deepcopy(HELD)
    newer["version"] = 2
    process = run_cli("explain", stdin=json.dumps(newer).encode())
    (_, reason) = refusal_lines(process)
    assert reason.startswith("the stored decision holds no fixture to explain")


def test_stored_credentials_are_not_printed() -> None:
    leaky = held(reason="dependency-held: https://ops:hunter2@status.example/health").as_dict()
    text = explained(leaky)
    assert "hunter2" not in text
    assert "status.example/health" in text
