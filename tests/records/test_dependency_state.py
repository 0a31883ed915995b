"""A pool's state as a dependency: written and read by one class, in the agreed shape.

The stored example below is the shape the retry-start check stores for a held
retry (task state store and XCom, key ``retry_window_dependency``), key for key.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import subprocess
import sys
from typing import Any

import pendulum
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_retrywindow.exceptions import RecordError
from airflow_retrywindow.records.dependency_state import (
    KEY,
    DependencyRecord,
    dependency_of,
    latest_per_pool,
)

HELD: dict[str, Any] = {
    "version": 1,
    "pool": "positions_api",
    "state": "open",
    "forced": None,
    "readAt": "2026-12-04T14:02:11+00:00",
    "failingSince": "2026-12-04T14:00:03+00:00",
    "failingTasks": 12,
    "successes": 0,
    "held": 10,
    "budget": 2,
    "roundStart": "2026-12-04T14:02:00+00:00",
    "roundSeconds": 60,
    "nextProbe": "2026-12-04T14:03:00+00:00",
    "tryNumber": 2,
    "action": "hold",
    "decision": "dependency-held",
    "holdUntil": "2026-12-04T14:03:00+00:00",
    "reason": "dependency-held: pool positions_api is failing since 14:00:03 UTC "
    "(12 task instances failing, no success since); held until 14:03:00 UTC, "
    "when it is decided again",
    "holds": 1,
    "probedRound": None,
    "windowSeconds": 300,
    "waitsIn": "triggerer",
}
AT = pendulum.datetime(2026, 12, 4, 14, 2, 11)


def held(**changed: Any) -> DependencyRecord:
    """The held retry of :data:`HELD`, built as the writer builds it."""
    fields: dict[str, Any] = {
        "pool": "positions_api",
        "state": "open",
        "forced": None,
        "read_at": AT,
        "failing_since": pendulum.datetime(2026, 12, 4, 14, 0, 3),
        "failing_tasks": 12,
        "successes": 0,
        "held": 10,
        "budget": 2,
        "round_start": pendulum.datetime(2026, 12, 4, 14, 2),
        "round_seconds": 60,
        "next_probe": pendulum.datetime(2026, 12, 4, 14, 3),
        "try_number": 2,
        "action": "hold",
        "decision": "dependency-held",
        "hold_until": pendulum.datetime(2026, 12, 4, 14, 3),
        "reason": HELD["reason"],
        "holds": 1,
        "window_seconds": 300,
        "waits_in": "triggerer",
    }
    return DependencyRecord(**{**fields, **changed})


def changed(**values: Any) -> dict[str, Any]:
    stored = copy.deepcopy(HELD)
    stored.update(values)
    return stored


def test_the_writer_writes_exactly_the_agreed_shape() -> None:
    written = held().as_dict()
    assert list(written) == list(HELD)  # the keys, in the agreed order
    assert written == HELD
    assert json.loads(json.dumps(written)) == written  # plain JSON, nothing else


def test_what_is_written_reads_back_as_the_same_record() -> None:
    record = held()
    assert DependencyRecord.of(record.as_dict()) == record
    assert DependencyRecord.of(HELD) == record
    assert DependencyRecord.of(HELD).is_open  # type: ignore[union-attr]


def test_times_read_as_pendulum_utc_whatever_offset_was_stored() -> None:
    record = DependencyRecord.of(changed(readAt="2026-12-04T15:02:11+01:00"))
    assert record is not None
    assert isinstance(record.read_at, pendulum.DateTime)
    assert record.read_at.timezone_name == "UTC"
    assert record.read_at == AT


def test_a_writer_may_give_standard_library_times_with_a_zone() -> None:
    record = held(
        read_at=dt.datetime(2026, 12, 4, 15, 2, 11, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    )
    assert isinstance(record.read_at, pendulum.DateTime)
    assert record.as_dict()["readAt"] == "2026-12-04T14:02:11+00:00"


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"read_at": dt.datetime(2026, 12, 4, 14, 2, 11)}, "read_at"),  # naive
        ({"hold_until": "14:03"}, "hold_until"),
        ({"state": "half-open"}, "state"),
        ({"forced": "recovering"}, "forced"),
        ({"action": "wait"}, "action"),
        ({"held": -1}, "held"),
        ({"round_seconds": 0}, "roundSeconds"),
        ({"try_number": 0}, "tryNumber"),
        ({"pool": ""}, "pool"),
    ],
)
def test_a_writer_cannot_build_a_record_its_readers_would_drop(
    fields: dict[str, Any], named: str
) -> None:
    with pytest.raises(RecordError) as refused:
        held(**fields)
    assert refused.value.field == named


@pytest.mark.parametrize(
    "stored",
    [
        None,
        "open",
        [HELD],
        {},
        changed(version=2),
        changed(version=0),
        changed(version="1"),
        changed(version=True),
        {key: value for key, value in HELD.items() if key != "version"},
        {key: value for key, value in HELD.items() if key != "pool"},
        changed(state="OPEN"),
        changed(forced="recovering"),
        changed(readAt="2026-12-04T14:02:11"),  # no offset: not a time we can place
        changed(readAt=None),
        changed(roundStart="soon"),
        changed(failingTasks=True),
        changed(held=2.5),
        changed(budget=-1),
        changed(tryNumber=0),
        changed(action="held"),
        changed(decision=None),
        changed(reason=7),
    ],
    ids=lambda stored: json.dumps(stored)[:40] if stored is not None else "none",
)
def test_anything_else_reads_as_none(stored: object) -> None:
    assert DependencyRecord.of(stored) is None


def test_a_strict_read_names_the_field_and_the_value() -> None:
    with pytest.raises(
        RecordError, match=r"^failingTasks must be a whole number from 0 up, got True$"
    ):
        DependencyRecord.read(changed(failingTasks=True))
    with pytest.raises(RecordError, match=r"^version must be 1, got 2$"):
        DependencyRecord.read(changed(version=2))


def test_null_times_are_kept_as_none_and_written_as_null() -> None:
    record = DependencyRecord.of(
        changed(state="closed", failingSince=None, nextProbe=None, holdUntil=None, action="run")
    )
    assert record is not None
    assert (record.failing_since, record.next_probe, record.hold_until) == (None, None, None)
    assert not record.is_open
    written = record.as_dict()
    assert (written["failingSince"], written["nextProbe"], written["holdUntil"]) == (
        None,
        None,
        None,
    )


def test_keys_added_later_are_left_alone() -> None:
    assert DependencyRecord.of(changed(unknownPool=True)) == held()


def test_a_record_of_the_older_shape_reads_without_where_it_waited() -> None:
    older = changed(firstTries=12, lastProbe=None)
    del older["waitsIn"]
    assert DependencyRecord.of(older) == held(waits_in=None)


def test_a_held_try_says_where_it_waits() -> None:
    assert ("Waits", "in the triggerer, holding no worker") in held().facts(str)
    rescheduled = "rescheduled, a worker at each check: no triggerer runs, or none woke it in time"
    assert ("Waits", rescheduled) in held(waits_in="worker").facts(str)
    assert "Waits" not in dict(held(waits_in=None).facts(str))
    assert DependencyRecord.of(changed(waitsIn="pod")) is None


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(key=st.sampled_from(sorted(HELD)), value=JSON)
def test_any_value_in_any_field_never_raises(key: str, value: Any) -> None:
    found = DependencyRecord.of(changed(**{key: value}))
    if found is not None:
        assert DependencyRecord.of(found.as_dict()) == found


@settings(max_examples=100, deadline=None)
@given(value=JSON)
def test_any_value_at_all_never_raises(value: Any) -> None:
    assert DependencyRecord.of(value) is None
    assert dependency_of(value) is None


@pytest.mark.parametrize(
    "stored",
    [
        HELD,
        {"latest": HELD, "decisions": [HELD]},
        {"tryNumber": 2, "action": "reschedule", KEY: HELD},
    ],
    ids=["the record", "a history", "a decision carrying it"],
)
def test_a_record_is_found_where_it_is_kept(stored: object) -> None:
    assert dependency_of(stored) == held()


def test_the_latest_record_of_each_pool_is_the_one_read_last() -> None:
    early = held(read_at=AT.subtract(seconds=30), held=4)
    late = held(read_at=AT, held=10)
    other = held(pool="legacy_db", state="closed", action="run", hold_until=None)
    assert latest_per_pool([late, other, early]) == [other, late]
    assert latest_per_pool([early, late]) == [late]
    assert latest_per_pool([]) == []


def test_reading_imports_no_airflow() -> None:
    code = (
        "import sys\n"
        "import airflow_retrywindow.records.dependency_state\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'airflow'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
