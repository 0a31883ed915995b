"""The view never breaks on what a run holds: any JSON value, beside real records.

A user's task may return anything, including a value with a decision record's
keys. Whatever the run's XComs hold, every record reads (or says what it could
not read) and the run's page renders: in full, summarised per task, or paged.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_retrywindow.links.addresses import ViewLinks
from airflow_retrywindow.plugins.decision_rows import gate_record, is_decision_record, policy_rows
from airflow_retrywindow.plugins.page import run_page, task_page
from airflow_retrywindow.plugins.run_summary import (
    FULL_DETAIL,
    Paging,
    policy_sections,
    record_window,
)

STORED = json.loads((Path(__file__).with_name("stored_decisions.json")).read_text())
RECORD = STORED["late"]["records"]["retry_gate"]
EVIDENCE = STORED["late"]["evidence"]["report"]
LINKS = ViewLinks("/retry-window", "d", "r")

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += _paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += _paths(inner, (*prefix, index))
    return found


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copied = copy.deepcopy(value)
    holder = copied
    for step in path[:-1]:
        holder = holder[step]
    holder[path[-1]] = new
    return copied


def _render(records: list[Any], evidence: list[Any]) -> str:
    shown = [
        gate_record("retry_gate", -1, value)
        for value in records
        if is_decision_record("retry_gate", value)
    ]
    policy = [("report", -1, policy_rows("report", -1, value)) for value in evidence]
    return run_page(LINKS, policy=policy, records=shown)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), new=JSON)
def test_a_record_with_any_value_anywhere_still_renders(data: st.DataObject, new: Any) -> None:
    paths = _paths(RECORD)
    path = data.draw(st.sampled_from(paths[1:]))
    page = _render([_replaced(RECORD, path, new), RECORD], [EVIDENCE])
    assert "<html" in page and "retry_gate" in page


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), new=JSON)
def test_evidence_with_any_value_anywhere_still_renders(data: st.DataObject, new: Any) -> None:
    path = data.draw(st.sampled_from(_paths(EVIDENCE)[1:]))
    page = _render([RECORD], [_replaced(EVIDENCE, path, new), EVIDENCE])
    assert "<html" in page


@settings(max_examples=200, deadline=None)
@given(value=JSON, extra=st.dictionaries(st.text(max_size=8), JSON, max_size=3))
def test_a_look_alike_return_value_still_renders(value: Any, extra: dict[str, Any]) -> None:
    look_alike = {key: value for key in ("decisions", "fixtures", "asOf", "deadline", "guard")}
    look_alike.update(gate="retry_gate", **extra)
    page = _render([look_alike, RECORD], [value, EVIDENCE])
    assert "<html" in page


def test_guard_targets_are_matched_exactly() -> None:
    record = copy.deepcopy(RECORD)
    for item in record["guard"]:
        item["targets"] = ["pre" + target for target in item["targets"]]
    assert all(row.told is None for row in gate_record("retry_gate", -1, record).rows)
    for item in record["guard"]:
        item["targets"] = 7
    assert all(row.told is None for row in gate_record("retry_gate", -1, record).rows)


def _mapped(evidence: list[Any], paging: Paging) -> str:
    """The run page of one task mapped over as many map indexes as ``evidence`` holds."""
    items = [("load", index, value) for index, value in enumerate(evidence)]
    policy, summaries = policy_sections(items, paging)
    return run_page(LINKS, policy=policy, records=[], summaries=summaries, paging=paging)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), new=JSON, page=st.integers(1, 4))
def test_a_summarised_task_with_any_value_anywhere_still_renders(
    data: st.DataObject, new: Any, page: int
) -> None:
    path = data.draw(st.sampled_from(_paths(EVIDENCE)))  # the whole value too
    evidence = [EVIDENCE] * FULL_DETAIL
    evidence.insert(data.draw(st.integers(0, FULL_DETAIL)), _replaced(EVIDENCE, path, new))
    shown = _mapped(evidence, Paging(page=page, limit=7))
    assert "<html" in shown and 'data-task="load"' in shown
    assert f'data-total="{FULL_DETAIL + 1}"' in shown


def _many_targets(count: int) -> dict[str, Any]:
    record: dict[str, Any] = copy.deepcopy(RECORD)
    rows = record["decisions"]
    record["decisions"] = [copy.deepcopy(rows[index % len(rows)]) for index in range(count)]
    return record


MANY = _many_targets(FULL_DETAIL + 4)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), new=JSON, page=st.integers(1, 4))
def test_a_paged_record_with_any_value_anywhere_still_renders(
    data: st.DataObject, new: Any, page: int
) -> None:
    path = data.draw(st.sampled_from(_paths(MANY)[1:]))
    record = _replaced(MANY, path, new)
    paging = Paging(page=page, limit=10)
    if not is_decision_record("retry_gate", record):
        return  # the store leaves it out: it is not a retry window record
    read = gate_record("retry_gate", -1, record, window=record_window(record, paging))
    shown = run_page(LINKS, policy=[], records=[read], paging=paging)
    assert "<html" in shown and "retry_gate" in shown
    own = task_page(LINKS, task_id="retry_gate", map_index=-1, policy=[], records=[read])
    assert "<html" in own
