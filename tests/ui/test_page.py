"""The rendered page: self-contained, escaped, and showing what a refusal needs to be understood."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

from airflow_retrywindow.links.addresses import ViewLinks
from airflow_retrywindow.plugins.decision_rows import gate_record, policy_rows
from airflow_retrywindow.plugins.page import fixture_json, run_page, task_page
from airflow_retrywindow.records.decision_record import look_alike_note
from tests.notifications.stored import approval, overridden_record

STORED = json.loads((Path(__file__).with_name("stored_decisions.json")).read_text())
LATE = STORED["late"]
LINKS = ViewLinks("/base/retry-window", "retry_window_example", LATE["runId"])


def report_page() -> str:
    rows = policy_rows("report", -1, LATE["evidence"]["report"])
    return task_page(LINKS, task_id="report", map_index=-1, policy=rows, records=[])


def test_a_refused_task_shows_decision_reason_timeline_and_replay() -> None:
    page = report_page()
    assert 'data-decision="deadline-infeasible"' in page
    assert "deadline-infeasible: next attempt would start 17:35:09Z" in page
    assert "<svg" in page and 'data-kind="deadline"' in page and 'class="tl-late"' in page
    assert "29 s after the deadline 17:35:05Z" in page
    assert "1 of 4" in page and "retryable" in page
    assert (
        'href="/base/retry-window/dags/retry_window_example/runs/manual__2026-12-02'
        '/tasks/report/fixtures/policy-0.json?map_index=-1" download="report-try-1.json"'
    ) in page
    assert "$ airflow-retrywindow explain --origin 2026-12-02T17:34:55Z report-try-1.json" in page
    assert "$ airflow-retrywindow evaluate report-try-1.json" in page
    assert "replays to the stored result" in page


def test_the_page_loads_nothing_and_runs_nothing() -> None:
    page = report_page()
    assert "<script" not in page and "<link" not in page and "src=" not in page
    assert "@import" not in page and "url(" not in page
    # the only absolute address is the SVG namespace, which is a name, not a request
    assert set(re.findall(r"https?://[^\s\"'<]+", page)) == {"http://www.w3.org/2000/svg"}
    assert "--refuse:" in page  # the shipped style sheet, inlined


def test_every_value_is_escaped() -> None:
    evil = "<script>alert(1)</script>"
    stored = copy.deepcopy(LATE["evidence"]["report"])
    stored["decisions"][0]["reason"] = f'deadline-infeasible: "><img src=x onerror=alert(1)> {evil}'
    rows = policy_rows(evil, -1, stored)
    links = ViewLinks("/retry-window", f"dag{evil}", f"run{evil}")
    page = task_page(links, task_id=evil, map_index=-1, policy=rows, records=[])
    assert "<script>" not in page and "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "%3Cscript%3E" in page  # in addresses, as a path segment


def test_the_gate_record_shows_targets_capacity_and_status_update() -> None:
    record = gate_record("retry_gate", -1, LATE["records"]["retry_gate"])
    page = task_page(LINKS, task_id="retry_gate", map_index=-1, policy=[], records=[record])
    assert "Gate retry_gate · try 1" in page
    assert page.count('<article class="decision') == 6
    assert "fits-now: needs 1 slot of pool &#39;positions_db&#39;" in page
    assert "business_date=2026-12-02" in page
    assert "No job was submitted, cancelled or observed by the gate" in page
    assert "/tasks/retry_gate/fixtures/record-0.json?map_index=-1" in page


def test_the_run_page_holds_every_decision_of_the_run() -> None:
    policy = [
        (task_id, -1, policy_rows(task_id, -1, stored))
        for task_id, stored in sorted(LATE["evidence"].items())
    ]
    records = [gate_record(task_id, -1, value) for task_id, value in LATE["records"].items()]
    page = run_page(LINKS, policy=policy, records=records)
    for task_id in LATE["evidence"]:
        assert f'href="{LINKS.task(task_id, -1)}"' in page
    assert "RetryWindowPolicy · 4 decisions" in page
    assert "Gate retry_gate" in page and "Sensor load_retry_window" in page


def test_empty_views_say_so() -> None:
    page = task_page(LINKS, task_id="extract_positions", map_index=-1, policy=[], records=[])
    assert "No retry window decision is recorded for this task instance" in page
    assert "No retry window decision is recorded for this run" in run_page(
        LINKS, policy=[], records=[]
    )


def test_a_fixture_file_is_the_stored_fixture() -> None:
    stored = LATE["evidence"]["report"]["decisions"][0]["fixture"]
    assert json.loads(fixture_json(stored)) == stored


def test_a_mapped_target_is_named_with_its_map_index() -> None:
    record = copy.deepcopy(LATE["records"]["load_retry_window"])
    record["decisions"][0]["mapIndex"] = 2
    read = gate_record("load_retry_window", 4, record)
    page = task_page(LINKS, task_id="load_retry_window", map_index=4, policy=[], records=[read])
    assert "load[2] · decided by load_retry_window" in page
    assert "map index 4" in page
    assert "/tasks/load_retry_window/fixtures/record-0.json?map_index=4" in page


def gate_page(record: dict[str, object]) -> str:
    read = gate_record("retry_gate", -1, record)
    return task_page(LINKS, task_id="retry_gate", map_index=-1, policy=[], records=[read])


def _block(page: str, start: str, end: str) -> str:
    """The part of ``page`` from ``start`` to the first ``end`` after it."""
    at = page.index(start)
    return page[at : page.index(end, at) + len(end)]


def test_an_approved_override_is_marked_apart_from_the_models_decision() -> None:
    page = gate_page(overridden_record())
    block = _block(page, '<div class="override applied"', "</div>")
    assert "<h3>Approved override</h3>" in block
    assert (
        "Refused by the model, overridden by ops_lead at 2026-12-01 05:39:00 UTC: vendor re-sent "
        "the feed (OPS-4411) (targets load)"
    ) in block
    assert "The model&#39;s decisions below are unchanged: load attempts-exhausted." in block
    # the model's badge stays, the override is marked beside it, in the table and the article
    assert (
        '<span class="badge refuse">attempts-exhausted</span> '
        '<span class="badge override">overridden</span>'
    ) in page
    article = _block(page, '<article class="decision refuse" data-task="load"', "</article>")
    assert 'data-decision="attempts-exhausted" data-overridden' in article
    assert '<p class="override applied">Refused by the model, overridden by ops_lead' in article
    guard = _block(page, '<ul class="guard">', "</ul>")
    assert "<li>rerun_load may run only because of the approved override (refused by the " in guard
    assert "eligible" not in block + guard
    assert page.count('class="badge override"') == 2  # load only: report needed no override


def test_each_decision_shows_the_sources_of_its_estimate() -> None:
    page = gate_page(overridden_record())
    assert (
        "<dt>Estimate</dt><dd>duration, validation, deadline from load&#39;s policy; safe "
        "repeat: gate override — INC-4211: the vendor confirmed the load replaces, not "
        "appends</dd>"
    ) in page
    assert (
        "<dt>Estimate</dt><dd>duration, validation, safe repeat, deadline from retry_gate and "
        "report&#39;s policy (the same)</dd>"
    ) in page


def test_no_override_is_a_note_not_a_block() -> None:
    page = gate_page(overridden_record(approval(("Reject",))))
    assert (
        '<p class="override none">No override through approve_repeat: ops_lead rejected at '
        "2026-12-01 05:39:00Z.</p>"
    ) in page
    assert "Approved override" not in page and 'class="badge override"' not in page
    assert "data-overridden" not in page


def test_override_texts_are_escaped() -> None:
    evil = '"><img src=x onerror=alert(1)>'
    record = overridden_record(approval(name=f"<b>{evil}</b>", reason=f"because {evil}"))
    record["decisions"][0]["estimateSource"]["safeRepeat"] = f"gate override: {evil}"
    page = gate_page(record)
    assert "<img" not in page and "<b>" not in page
    assert "overridden by &lt;b&gt;&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    assert "because &#34;&gt;&lt;img" in page
    assert "safe repeat: gate override — &#34;&gt;&lt;img" in page


def test_a_look_alike_of_a_record_is_named_as_not_a_record_and_escaped() -> None:
    note = look_alike_note("<lookalike>", 3)
    for page in (
        run_page(LINKS, policy=[], records=[], notes=[note]),
        task_page(LINKS, task_id="x", map_index=-1, policy=[], records=[], notes=[note]),
    ):
        assert "&lt;lookalike&gt;[3]: its return value has the keys of a decision record" in page
        assert "so it is not a retry window record" in page
        assert "<lookalike>" not in page
