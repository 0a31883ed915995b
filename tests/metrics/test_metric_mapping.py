"""From decisions to metric names and values, without Airflow.

The policy's metrics come from the model's real result on the seed exercise, the
gate's from decision records in the shape :mod:`airflow_retrywindow.gate.record`
documents.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from airflow_retrywindow import metrics
from airflow_retrywindow.model import evaluate
from airflow_retrywindow.model.decisions import Decision
from tests.model.fixture_strategies import seed_case
from tests.notifications.stored import approval, overridden_record

TAGS = {"dag_id": "sales", "task_id": "load", "decided_by": "retry-policy"}


def lines(found: list[metrics.Metric]) -> list[tuple[str, str, int]]:
    """(name, kind, value) of each metric, in order."""
    return [(metric.name, metric.kind, metric.value) for metric in found]


@pytest.mark.parametrize(
    ("value", "word"),
    [
        ("wait-backoff", "wait_backoff"),
        ("capacity-infeasible", "capacity_infeasible"),
        ("not-attempted", "not_attempted"),
        ("retryable", "retryable"),
        ("Wait-Backoff", "other"),
        ("retry.eligible", "other"),
        ("deadline infeasible", "other"),
        ("", "other"),
        ("x" * 41, "other"),
        (None, "other"),
        (7, "other"),
    ],
)
def test_only_short_lower_case_words_enter_a_name(value: object, word: str) -> None:
    assert metrics.metric_word(value) == word


@pytest.mark.parametrize("decision", [*Decision, "not-attempted"])
def test_a_refusal_is_counted_for_every_decision_that_lets_no_attempt_start(
    decision: Decision | str,
) -> None:
    value = str(decision)
    found = metrics.decision_metrics(value, None, TAGS)
    refusing = isinstance(decision, Decision) and not decision.allows_retry
    expected = [(f"retry_window.decision.{value.replace('-', '_')}", "counter", 1)]
    if refusing:
        expected.append(("retry_window.refused", "counter", 1))
    assert lines(found) == expected
    assert found[0].tags == TAGS
    if refusing:
        assert found[1].tags == {**TAGS, "decision": value}


@pytest.mark.parametrize(("slack", "gauges"), [(-305, [-305]), (0, [0]), (12, [12]), (None, [])])
def test_slack_is_a_gauge_when_an_attempt_is_scheduled(
    slack: int | None, gauges: list[int]
) -> None:
    found = metrics.decision_metrics("retry-eligible", slack, TAGS)
    assert [m.value for m in found if m.kind == metrics.GAUGE] == gauges
    assert all(m.name == "retry_window.slack_seconds" for m in found if m.kind == metrics.GAUGE)


def test_a_boolean_is_not_a_slack() -> None:
    assert metrics.decision_metrics("retry-eligible", True, TAGS)[1:] == []  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("task", "failure", "expected"),
    [
        (
            "report",
            "retryable",
            [
                ("retry_window.failed_attempt.retryable", "counter", 1),
                ("retry_window.decision.wait_backoff", "counter", 1),
                # deadline 140, estimated finish 128
                ("retry_window.slack_seconds", "gauge", 12),
            ],
        ),
        (
            "append",
            "unknown",
            [
                ("retry_window.failed_attempt.unknown", "counter", 1),
                ("retry_window.decision.reconcile_remote", "counter", 1),
                ("retry_window.refused", "counter", 1),
            ],
        ),
    ],
)
def test_policy_metrics_follow_the_models_result(
    task: str, failure: str, expected: list[tuple[str, str, int]]
) -> None:
    fixture = seed_case()
    entry = next(item for item in evaluate(fixture)["tasks"] if item["id"] == task)
    found = metrics.policy_metrics(
        entry, fixture, dag_id="sales", task_id=task, decided_by="retry-start", failure=failure
    )
    assert lines(found) == expected
    assert {m.tags["decided_by"] for m in found} == {"retry-start"}
    assert {m.tags["task_id"] for m in found} == {task}


def _row(task_id: str, decision: str, slack: int | None, verdict: str, pool: str) -> dict[str, Any]:
    """A target's row of a decision record, with the keys the metrics read (and a few more)."""
    return {
        "taskId": task_id,
        "decision": decision,
        "reason": f"{decision}: ...",
        "backoffSeconds": None if slack is None else 60,
        "slackSeconds": slack,
        "capacity": {"verdict": verdict, "reason": "...", "poolSlots": 1, "pool": pool},
    }


def _record(budget: str | None) -> dict[str, Any]:
    """A gate's record over three targets: one late, one in a missing pool, one not tried.

    The shape is :mod:`airflow_retrywindow.gate.record`'s; the end-to-end test
    reads the records a real gate and sensor pushed.
    """
    return {
        "gate": "gate",
        "dagId": "sales",
        "runId": "r",
        "decisions": [
            _row("load", "deadline-infeasible", -305, "fits-now", "db"),
            _row("export", "wait-backoff", 120, "capacity-infeasible", "gone"),
            _row("fresh", "not-attempted", None, "fits-now", "db"),
        ],
        "budget": None if budget is None else {"verdict": budget, "reason": "...", "unit": "GB"},
    }


def test_gate_metrics_follow_the_decision_record() -> None:
    found = metrics.gate_metrics(_record("budget-exceeded"), decided_by="gate")
    assert lines(found) == [
        ("retry_window.decision.deadline_infeasible", "counter", 1),
        ("retry_window.refused", "counter", 1),
        ("retry_window.slack_seconds", "gauge", -305),
        ("retry_window.capacity.fits_now", "counter", 1),
        ("retry_window.decision.wait_backoff", "counter", 1),
        ("retry_window.slack_seconds", "gauge", 120),
        ("retry_window.capacity.capacity_infeasible", "counter", 1),
        ("retry_window.decision.not_attempted", "counter", 1),
        ("retry_window.capacity.fits_now", "counter", 1),
        ("retry_window.budget.budget_exceeded", "counter", 1),
    ]
    first = {"dag_id": "sales", "task_id": "load", "decided_by": "gate", "gate_id": "gate"}
    assert found[0].tags == first
    assert found[2].tags == {**first, "decision": "deadline-infeasible"}
    assert found[6].tags == {**first, "task_id": "export", "pool": "gone"}
    assert found[-1].tags == {"dag_id": "sales", "task_id": "gate", "decided_by": "gate"}


def test_a_gate_without_a_budget_has_no_budget_metric() -> None:
    found = metrics.gate_metrics(_record(None), decided_by="sensor")
    assert not [m for m in found if m.name.startswith("retry_window.budget.")]
    assert {m.tags["decided_by"] for m in found} == {"sensor"}


def test_an_approved_override_is_counted_by_the_targets_it_released() -> None:
    """A record the gate's own stages built: ``load`` refused, released by an approval."""
    found = metrics.gate_metrics(overridden_record(), decided_by="gate")
    (approved,) = [m for m in found if m.name == "retry_window.override.approved"]
    assert (approved.kind, approved.value) == ("counter", 1)
    # the count is the value, not a tag: the series stay one per gate
    assert approved.tags == {"dag_id": "positions", "task_id": "retry_gate", "decided_by": "gate"}
    # the model's refusal is still counted as the model took it
    load = [m.name for m in found if m.tags.get("task_id") == "load"]
    assert load[:2] == ["retry_window.decision.attempts_exhausted", "retry_window.refused"]


def test_two_released_targets_add_two() -> None:
    record = {**_record(None), "override": {"applied": True, "targets": ["load", "export"]}}
    found = metrics.gate_metrics(record, decided_by="gate")
    assert [(m.name, m.value) for m in found if m.name.startswith("retry_window.override.")] == [
        ("retry_window.override.approved", 2)
    ]


@pytest.mark.parametrize(
    "entry",
    [
        None,
        overridden_record(approval(("Reject",)))["override"],  # no override: nothing to count
        {"applied": "true", "targets": ["load"]},
        {"applied": True, "targets": "load"},
        {"applied": True, "targets": []},
        "approved",
    ],
    ids=["no approval task", "rejected", "applied text", "targets text", "no target", "text"],
)
def test_only_a_stored_applied_override_is_counted(entry: object) -> None:
    record = {**_record(None), "override": entry}
    found = metrics.gate_metrics(record, decided_by="gate")
    assert not [m for m in found if m.name.startswith("retry_window.override.")]
    assert len(found) == len(metrics.gate_metrics(_record(None), decided_by="gate"))


def test_gate_errors_and_retry_start_refusals_name_the_task() -> None:
    error = metrics.gate_error_metrics(dag_id="sales", task_id="gate", decided_by="gate")
    refused = metrics.retry_start_refused_metrics(dag_id="sales", task_id="load")
    assert lines(error) == [("retry_window.gate_error", "counter", 1)]
    assert lines(refused) == [("retry_window.retry_start.refused", "counter", 1)]
    assert refused[0].tags == {"dag_id": "sales", "task_id": "load", "decided_by": "retry-start"}


@pytest.mark.parametrize(("is_open", "value"), [(True, 1), (False, 0)])
def test_a_breaker_pools_gauges_are_its_slots_and_one_while_it_is_open(
    is_open: bool, value: int
) -> None:
    found = metrics.breaker_metrics("positions_api", slots=6, size=24, is_open=is_open)
    assert lines(found) == [
        ("retry_window.breaker.slots", "gauge", 6),
        ("retry_window.breaker.open", "gauge", value),
    ]
    # the pool is a tag, never part of the name: a pool's name is free text
    assert [metric.tags for metric in found] == [{"pool": "positions_api", "size": "24"}] * 2


def test_the_breaker_metrics_have_the_agreed_names() -> None:
    assert (
        metrics.BREAKER_SLOTS, metrics.BREAKER_OPEN, metrics.BREAKER_PROBE, metrics.BREAKER_TRIP,
    ) == (
        "retry_window.breaker.slots", "retry_window.breaker.open", "retry_window.breaker.probe",
        "retry_window.breaker.trip",
    )  # fmt: skip
    assert {
        metrics.BREAKER_SLOTS, metrics.BREAKER_OPEN, metrics.BREAKER_PROBE, metrics.BREAKER_TRIP,
    } <= set(metrics.NAMES)  # fmt: skip


def test_a_breaker_sender_never_raises(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    with caplog.at_level(logging.WARNING, logger="airflow_retrywindow.metrics"):
        metrics.breaker_trip({}, "positions_api")  # no task in the context
        metrics.breaker_trip(None, "positions_api")  # type: ignore[arg-type]
        metrics.breaker_trip({"ti": object()}, "positions_api")
        metrics.breaker_state("positions_api", slots=0, size=24, is_open="yes")  # type: ignore[arg-type]
    logged = caplog.text + capsys.readouterr().out
    for cause in (
        "KeyError: 'dag'",
        "ValueError: no task context, so the metric's task is unknown",
        "AttributeError: 'object' object has no attribute 'dag_id'",
        "ValueError: open must be true or false, got 'yes'",
    ):
        assert f"Retry window metrics were not sent: {cause}" in logged


def test_a_sender_never_raises_and_says_why_nothing_was_sent(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    with caplog.at_level(logging.WARNING, logger="airflow_retrywindow.metrics"):
        metrics.gate_decided({"dagId": "sales"}, by="gate")  # no "gate", no "decisions"
        metrics.gate_error(None, by="retry-policy")
        metrics.policy_decided({}, {}, {}, by="retry-policy", failure="unknown")
    # once Airflow is imported its logging setup may take over from pytest's handler
    logged = caplog.text + capsys.readouterr().out
    for cause in (
        "KeyError: 'gate'",
        "ValueError: no task context, so the metric's task is unknown",
        "KeyError: 'dag'",
    ):
        assert f"Retry window metrics were not sent: {cause}" in logged


def test_the_mapping_imports_no_airflow() -> None:
    code = textwrap.dedent(
        """
        import sys
        from airflow_retrywindow import metrics
        found = metrics.decision_metrics("deadline-infeasible", -5, {"dag_id": "d"})
        print([m.name for m in found])
        print(sorted(m for m in sys.modules if m.split(".")[0] == "airflow"))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == [
        "['retry_window.decision.deadline_infeasible', 'retry_window.refused', "
        "'retry_window.slack_seconds']",
        "[]",
    ]
