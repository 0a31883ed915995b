"""A run with many decisions: summarised per task, paged, replayed once, and small.

The evidence is what a real run stored (``stored_decisions.json``), copied over
as many map indexes as a large mapped task has.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from airflow_retrywindow.links.addresses import ViewLinks
from airflow_retrywindow.plugins.decision_rows import gate_record, policy_rows
from airflow_retrywindow.plugins.page import run_page, task_page
from airflow_retrywindow.plugins.run_summary import (
    FULL_DETAIL,
    MAX_PAGE_ROWS,
    PAGE_ROWS,
    Paging,
    policy_sections,
    record_window,
)
from airflow_retrywindow.records.evidence import HISTORY
from airflow_retrywindow.records.stored_fixture import clear_replays, replay_count

STORED = json.loads((Path(__file__).with_name("stored_decisions.json")).read_text())
LATE, ON_TIME = STORED["late"], STORED["on-time"]
REFUSED = LATE["evidence"]["report"]  # deadline-infeasible
WAITING = ON_TIME["evidence"]["report"]  # wait-backoff
LINKS = ViewLinks("/retry-window", "d", "r")
MIB = 1024 * 1024


def mapped(count: int, *, waiting: frozenset[int] = frozenset()) -> list[tuple[str, int, Any]]:
    """``load`` mapped over ``count`` map indexes: refused, but those in ``waiting`` wait."""
    return [
        ("load", index, copy.deepcopy(WAITING if index in waiting else REFUSED))
        for index in range(count)
    ]


def render(evidence: list[tuple[str, int, Any]], paging: Paging | None = None) -> str:
    paging = paging or Paging()
    policy, summaries = policy_sections(evidence, paging)
    return run_page(LINKS, policy=policy, records=[], summaries=summaries, paging=paging)


def test_a_small_run_is_shown_in_full_as_before() -> None:
    evidence = mapped(FULL_DETAIL)
    policy, summaries = policy_sections(evidence, Paging())
    assert summaries == [] and len(policy) == FULL_DETAIL
    page = render(evidence)
    assert page.count('<article class="decision') == FULL_DETAIL
    assert 'class="paged"' not in page


def test_many_task_instances_are_counted_per_latest_decision() -> None:
    evidence = mapped(FULL_DETAIL + 10, waiting=frozenset({3, 7}))
    evidence.append(("report", -1, copy.deepcopy(REFUSED)))  # another task: in full
    policy, (summary,) = policy_sections(evidence, Paging())
    assert [task for task, _, _ in policy] == ["report"]
    assert summary.task_id == "load" and summary.instances == FULL_DETAIL + 10
    assert summary.counts == (("deadline-infeasible", FULL_DETAIL + 8), ("wait-backoff", 2))
    assert summary.decisions == FULL_DETAIL + 10
    page = render(evidence)
    assert "RetryWindowPolicy · load · 30 task instances · 30 decisions" in page
    assert '<span class="badge wait">wait-backoff</span> 2</li>' in page
    assert page.count('<article class="decision') == 1  # report's, in full


def test_the_summary_links_each_map_index_to_its_own_view() -> None:
    page = render(mapped(FULL_DETAIL + 1))
    for index in range(FULL_DETAIL + 1):
        assert f'href="{LINKS.task("load", index)}"' in page
    assert "load[20]" in page and "the 17:35:05Z deadline" in page


def test_a_summarised_task_is_paged_and_says_what_is_hidden() -> None:
    evidence = mapped(95)
    first = render(evidence, Paging(page=1, limit=40))
    assert "Showing task instances 1 to 40 of 95" in first
    assert "55 more are not shown on this page" in first and "Page 1 of 3" in first
    assert f'href="{LINKS.run}?page=2&amp;limit=40"' in first and "previous" not in first
    assert "load[39]" in first and "load[40]" not in first
    last = render(evidence, Paging(page=3, limit=40))
    assert "Showing task instances 81 to 95 of 95" in last
    assert f'href="{LINKS.run}?page=2&amp;limit=40">previous 40' in last and "next 40" not in last
    beyond = render(evidence, Paging(page=9, limit=40))
    assert "No task instances on page 9: there are 95" in beyond
    assert f'href="{LINKS.run}?page=3&amp;limit=40">previous 40' in beyond


@pytest.mark.parametrize(("page", "limit"), [(0, 10), (1, 0), (1, MAX_PAGE_ROWS + 1)])
def test_paging_out_of_bounds_is_refused_naming_it(page: int, limit: int) -> None:
    with pytest.raises(ValueError, match=r"page must|limit must"):
        Paging(page=page, limit=limit)


def test_paging_windows() -> None:
    assert Paging().limit == PAGE_ROWS
    assert Paging(page=2, limit=10).window(25) == range(10, 20)
    assert Paging(page=3, limit=10).window(25) == range(20, 25)
    assert Paging(page=4, limit=10).window(25) == range(25, 25)
    assert Paging(limit=10).pages(0) == 1 and Paging(limit=10).pages(25) == 3


def test_a_second_render_replays_nothing() -> None:
    clear_replays()
    evidence = mapped(FULL_DETAIL + 5)
    evidence += [("report", -1, copy.deepcopy(WAITING))]
    render(evidence)
    first = replay_count()
    assert first >= 2  # the refusal and the wait, each once
    render(evidence)
    assert replay_count() == first


def test_only_the_shown_rows_are_replayed() -> None:
    clear_replays()
    differing = []
    for index in range(300):  # every map index stored a fixture of its own
        entry = copy.deepcopy(REFUSED)
        entry["decisions"][-1]["fixture"]["asOf"] += index
        differing.append(("load", index, entry))
    render(differing, Paging(limit=10))
    assert replay_count() == 10


def test_a_thousand_map_indexes_with_full_histories_stay_under_a_mebibyte() -> None:
    entry = REFUSED["decisions"][-1]
    history = {"latest": entry, "decisions": [copy.deepcopy(entry) for _ in range(HISTORY)]}
    evidence = [("load", index, history) for index in range(1000)]
    page = render(evidence)
    assert len(page.encode()) < MIB
    assert "1,000 task instances · 20,000 decisions" in page
    assert f"Showing task instances 1 to {PAGE_ROWS} of 1,000" in page
    largest = render(evidence, Paging(limit=MAX_PAGE_ROWS))
    assert len(largest.encode()) < MIB


def test_an_unreadable_task_instance_is_counted_and_noted_and_the_rest_renders() -> None:
    evidence = mapped(FULL_DETAIL + 2)
    evidence[1] = ("load", 1, "garbage")
    evidence[2] = ("load", 2, {"latest": {}, "decisions": [{"schemaVersion": 99}]})
    page = render(evidence)
    assert '<span class="badge error">unreadable</span> 2</li>' in page
    assert "the stored evidence holds no decisions list, got &#39;garbage&#39;" in page
    assert "schemaVersion 99, newer than this release reads" in page
    assert page.count('<span class="badge refuse">deadline-infeasible</span>') >= FULL_DETAIL


def many_targets(count: int) -> dict[str, Any]:
    """The late gate's record, its targets repeated over ``count`` map indexes of one target."""
    record: dict[str, Any] = copy.deepcopy(LATE["records"]["retry_gate"])
    template = record["decisions"]
    record["decisions"] = [
        {**copy.deepcopy(template[index % len(template)]), "mapIndex": index}
        for index in range(count)
    ]
    return record


def test_a_record_with_many_targets_is_counted_and_paged() -> None:
    record = many_targets(60)
    window = record_window(record, Paging(page=2, limit=25))
    assert window == range(25, 50)
    read = gate_record("retry_gate", -1, record, window=window)
    assert len(read.rows) == 25 and read.total_rows == 60 and read.first_row == 25
    assert dict(read.counts) == {
        "deadline-infeasible": 30,
        "reconcile-remote": 10,
        "refresh-observation": 10,
        "validate-output": 10,
    }
    assert record_window(LATE["records"]["retry_gate"], Paging()) is None


def test_the_run_page_lists_a_long_record_without_cards_and_links_the_gates_view() -> None:
    record = many_targets(60)
    paging = Paging(limit=25)
    read = gate_record("retry_gate", -1, record, window=record_window(record, paging))
    page = run_page(LINKS, policy=[], records=[read], paging=paging)
    assert "Showing targets 1 to 25 of 60" in page and "35 more are not shown" in page
    assert f'<a href="{LINKS.task("retry_gate", -1)}">retry_gate&#39;s own view</a>' in page
    assert '<article class="decision' not in page
    assert len(re.findall(r"<tr><td>", page)) == 25


def test_the_gates_own_view_pages_its_cards() -> None:
    record = many_targets(60)
    paging = Paging(page=3, limit=25)
    read = gate_record("retry_gate", -1, record, window=record_window(record, paging))
    page = task_page(
        LINKS, task_id="retry_gate", map_index=-1, policy=[], records=[read], paging=paging
    )
    assert page.count('<article class="decision') == 10
    assert "Showing targets 51 to 60 of 60" in page
    here = LINKS.task("retry_gate", -1)
    assert f'href="{here}&amp;page=2&amp;limit=25">previous 25' in page


def test_policy_rows_of_a_small_run_are_unchanged_by_the_summary() -> None:
    rows = policy_rows("report", -1, REFUSED)
    policy, _ = policy_sections([("report", -1, REFUSED)], Paging())
    assert policy == [("report", -1, rows)]
