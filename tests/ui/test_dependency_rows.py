"""The run's pools as dependencies, as the view shows them: latest per pool, escaped, unbroken.

The stored values are written by :class:`DependencyRecord` itself, the class the
retry-start check stores them with; nothing here runs Airflow.
"""

from __future__ import annotations

import copy
from typing import Any

import pendulum
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_retrywindow.links.addresses import ViewLinks
from airflow_retrywindow.plugins.decision_rows import policy_rows
from airflow_retrywindow.plugins.dependency_rows import dependencies, held_by_records
from airflow_retrywindow.plugins.page import run_page, task_page
from tests.records.test_dependency_state import AT, HELD, held
from tests.ui.test_view_survives_any_value import EVIDENCE, JSON, _paths, _replaced

LINKS = ViewLinks("/retry-window", "positions", "r")


def stored(task_id: str, map_index: int = -1, **changed: Any) -> tuple[str, int, object]:
    return task_id, map_index, held(**changed).as_dict()


def test_each_pool_shows_its_latest_record_by_read_time() -> None:
    found = dependencies(
        [
            stored("load", 0, read_at=AT.subtract(seconds=40), held=3),
            stored("load", 1, read_at=AT, held=10),  # the latest of positions_api
            stored("load", 2, read_at=AT.subtract(seconds=5), held=9),
            stored(
                "archive",
                pool="legacy_db",
                state="closed",
                action="run",
                decision="retry-eligible",
                failing_since=None,
                hold_until=None,
                failing_tasks=1,
                successes=7,
            ),
        ]
    )
    assert found.problems == ()
    assert [(section.pool, section.state) for section in found.sections] == [
        ("legacy_db", "closed"),
        ("positions_api", "open"),
    ]
    facts = dict(found.sections[1].facts)
    assert facts == {
        "State": "failing: retries are held, a few run as probes each round",
        "Failing since": "2026-12-04 14:00:03 UTC",
        "Failing": "12 task instances, 0 successes since it began",
        "In a retry": "10 task instances held or under way now",
        "Waits": "in the triggerer, holding no worker",
        "Probes": "2 this round (rounds of 60 s, this one from 2026-12-04 14:02:00 UTC)",
        "Next probe": "2026-12-04 14:03:00 UTC",
        "Read": "2026-12-04 14:02:11 UTC (the API server's clock) by load[1], try 2: hold, "
        "held until 2026-12-04 14:03:00 UTC",
    }
    assert found.sections[1].decision == "dependency-held"
    closed = dict(found.sections[0].facts)
    assert closed["Failing since"] == "-"
    assert closed["Failing"] == "1 task instance, 7 successes since it began"


def test_the_viewed_task_instance_sees_its_own_record_beside_its_pools_latest() -> None:
    values = [
        stored("load", 0, read_at=AT.subtract(seconds=40), held=3),
        stored("load", 1, read_at=AT),
    ]
    (section,) = dependencies(values, task_id="load", map_index=0).sections
    assert dict(section.facts)["Read"].startswith(
        "2026-12-04 14:02:11 UTC (the API server's clock) by load[1]"
    )
    assert section.own == (
        "This task instance's latest, read 2026-12-04 14:01:31 UTC: try 2 hold, "
        "held until 2026-12-04 14:03:00 UTC (dependency-held)"
    )
    # its own record is the latest: nothing to say beside it
    assert dependencies(values, task_id="load", map_index=1).sections[0].own is None


def test_a_forced_state_says_who_forced_it() -> None:
    (section,) = dependencies([stored("load", forced="open")]).sections
    assert dict(section.facts)["State"].endswith(
        "(forced open by the Variable retry_window_dependency_positions_api)"
    )


def test_an_unreadable_value_is_named_and_the_others_still_show() -> None:
    newer = {**HELD, "version": 2}
    found = dependencies([("load", 0, newer), ("load", 1, "held"), stored("load", 2)])
    assert found.problems == (
        "load[0] (retry_window_dependency): version must be 1, got 2",
        "load[1] (retry_window_dependency): the stored value must be an object, got 'held'",
    )
    assert [section.pool for section in found.sections] == ["positions_api"]
    page = run_page(LINKS, policy=[], records=[], dependencies=found)
    assert "load[0] (retry_window_dependency): version must be 1, got 2" in page
    assert 'data-pool="positions_api" data-state="open"' in page


def test_a_history_kept_in_the_task_state_store_shows_its_latest() -> None:
    history = {"latest": held(held=7).as_dict(), "decisions": [HELD]}
    (section,) = dependencies([("load", -1, history)]).sections
    assert dict(section.facts)["In a retry"] == "7 task instances held or under way now"


def test_the_task_page_shows_the_dependencies_before_the_decisions() -> None:
    found = dependencies([stored("load")], task_id="load")
    page = task_page(
        LINKS, task_id="report", map_index=-1, policy=policy_rows("report", -1, EVIDENCE),
        records=[], dependencies=found,
    )  # fmt: skip
    assert page.index('<section class="dependencies">') < page.index('<section class="policy">')
    assert "<h2>Dependencies · 1 pool</h2>" in page
    assert '<span class="badge wait">dependency-held</span>' in page  # waiting, not refused
    assert '<span class="badge refuse">open</span> Pool positions_api' in page
    assert "<dt>In a retry</dt><dd>10 task instances held or under way now</dd>" in page


def test_pages_without_a_dependency_record_have_no_dependencies_section() -> None:
    empty = dependencies([])
    assert not empty
    for page in (
        run_page(LINKS, policy=[], records=[], dependencies=empty),
        task_page(LINKS, task_id="t", map_index=-1, policy=[], records=[], dependencies=empty),
    ):
        assert "dependencies" not in page


def test_every_stored_text_is_escaped_and_masked() -> None:
    pool = '<script>alert("pool")</script>'
    reason = "dependency-held: see https://ops:hunter2@status.example/<b>"
    found = dependencies([stored("load", pool=pool, reason=reason, decision="<i>held</i>")])
    page = run_page(LINKS, policy=[], records=[], dependencies=found)
    assert "<script>" not in page and "<b>" not in page and "<i>" not in page
    assert "&lt;script&gt;alert(&#34;pool&#34;)&lt;/script&gt;" in page
    assert "hunter2" not in page
    assert "status.example/&lt;b&gt;" in page


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), new=JSON, page=st.sampled_from(["run", "task"]))
def test_a_dependency_value_with_any_value_anywhere_still_renders(
    data: st.DataObject, new: Any, page: str
) -> None:
    path = data.draw(st.sampled_from(_paths(HELD)))  # the whole value too
    values = [("load", 0, _replaced(copy.deepcopy(HELD), path, new)), stored("load", 1)]
    found = dependencies(values, task_id="load", map_index=0)
    assert len(found.sections) + len(found.problems) >= 1
    if page == "run":
        shown = run_page(LINKS, policy=[], records=[], dependencies=found)
    else:
        shown = task_page(
            LINKS, task_id="load", map_index=0, policy=[], records=[], dependencies=found
        )
    assert "<html" in shown and 'data-pool="positions_api"' in shown


def test_times_on_the_page_are_utc_wall_clock() -> None:
    later = pendulum.datetime(2026, 12, 4, 16, 2, 11, tz="Europe/Berlin")  # 15:02:11 UTC
    (section,) = dependencies([stored("load", read_at=later, hold_until=None)]).sections
    assert dict(section.facts)["Read"] == (
        "2026-12-04 15:02:11 UTC (the API server's clock) by load, try 2: hold"
    )


def test_a_gate_that_held_a_target_on_its_pool_shows_the_pool_in_the_run() -> None:
    record = {
        "decisions": [
            {"taskId": "load", "mapIndex": 2, "retry_window_dependency": held(held=4).as_dict()},
            {"taskId": "archive", "decision": "retry-now"},  # not in a failing pool
            "not an entry",
        ]
    }
    found = held_by_records([record, {"no": "decisions"}, None])
    assert found == [("load", 2, held(held=4).as_dict())]
    sections = dependencies(found).sections
    assert [(s.pool, s.state, s.decision) for s in sections] == [
        ("positions_api", "open", "dependency-held")
    ]
    page = run_page(LINKS, policy=[], records=[], dependencies=dependencies(found))
    assert 'data-pool="positions_api"' in page and "load[2]" in page
