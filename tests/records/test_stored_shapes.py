"""Every shape this release stores is read back by this release's readers.

The fixtures in ``stored/`` were written by the release's own code (see
``stored/README.md`` and ``stored/make_stored.py``), in the exact shape the
metadata DB keeps: the policy's evidence (task state store and XCom) and the
gate's and the sensor's ``return_value`` records. Each is read here by every
reader of stored records (``records/``, the view's rows, the notifier's notices,
``explain``), with the fields it must have, and each stored fixture replays to
its stored result. A later change of the readers must keep all of them reading.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# the readers of what is stored, in one place: a reader that moves is one line here
from airflow_retrywindow.cli import main as command_line
from airflow_retrywindow.model import evaluate
from airflow_retrywindow.notifications.notice import from_evidence, from_gate_record
from airflow_retrywindow.plugins.decision_rows import gate_record, policy_rows
from airflow_retrywindow.records import evidence
from airflow_retrywindow.records.estimate_source import EstimateSource
from airflow_retrywindow.records.override import OverrideEntry
from airflow_retrywindow.records.reconciliation import Reconciliation
from airflow_retrywindow.records.schema import SCHEMA_VERSION, VERSION_KEY, version_problem
from airflow_retrywindow.records.try_start import TRY_START_KEY, TryStart

STORED = Path(__file__).with_name("stored")
#: the task every policy fixture is about
TASK = "load"


def stored(name: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads((STORED / f"{name}.json").read_text(encoding="utf-8"))
    return value


@dataclass(frozen=True)
class Entry:
    """What a policy fixture's latest entry must say, checked by hand against the code.

    :param check: ``retry-policy`` or ``retry-start``.
    :param action: what Airflow was told.
    :param failure: the failure class kept, ``None`` for a gate error.
    :param decision: the model's decision, or ``gate-error``.
    :param start: what the stored history says of the next try (``start_permission``).
    :param job: the reconciliation's outcome, when a job was read.
    :param marker: the try-start marker kept: (try, what it expects), when kept.
    :param extra: keys only this entry has.
    """

    check: str
    action: str
    failure: str | None
    decision: str
    start: str
    job: str | None = None
    marker: tuple[int, str] | None = None
    extra: frozenset[str] = frozenset()


ENTRIES = {
    "policy_decision_retry": Entry(
        "retry-policy", "retry", "retryable", "wait-backoff", evidence.DECIDED,
        extra=frozenset({"jitter"}),
    ),
    "policy_decision_refused": Entry(
        "retry-policy", "fail", "terminal", "repair-cause", evidence.UNDECIDED
    ),
    "policy_gate_error": Entry("retry-policy", "fail", None, "gate-error", evidence.UNDECIDED),
    "policy_gate_error_handed_over": Entry(
        "retry-policy", "default", None, "gate-error", evidence.DECIDED
    ),
    "retry_start_refused": Entry(
        "retry-start", "fail", "unknown", "reconcile-remote", evidence.UNDECIDED
    ),
    "policy_reconciliation": Entry(
        "retry-policy", "retry", "unknown", "observe-running", evidence.REREAD,
        job="active", marker=(1, "submit"),
    ),
    "retry_start_run": Entry(
        "retry-start", "run", "unknown", "observe-running", evidence.STARTED,
        job="active", marker=(2, "reconnect"),
    ),
}  # fmt: skip


@dataclass(frozen=True)
class Record:
    """What a gate's or sensor's fixture record must say.

    :param decisions: (task id, map index) -> the model's decision.
    :param guard: guarded task -> its action.
    :param override: whether an approval's override was applied; ``None``: no entry.
    :param action: the sensor's action; ``None`` for a gate.
    """

    decisions: Mapping[tuple[str, int], str]
    guard: Mapping[str, str]
    override: bool | None = None
    action: str | None = None


RECORDS = {
    "gate_record_guard": Record(
        {("load", 0): "reconcile-effects", ("load", 1): "reconcile-remote",
         ("report", -1): "retry-eligible"},
        {"rerun_load": "skip", "rerun_report": "run"},
    ),
    "gate_record_override": Record(
        {("load", 0): "reconcile-effects", ("load", 1): "reconcile-effects",
         ("report", -1): "attempts-exhausted"},
        {"rerun_load": "skip", "rerun_report": "run"},
        override=True,
    ),
    "sensor_record_run": Record(
        {("load", -1): "retry-eligible"}, {"rerun_load": "run"}, action="run"
    ),
    "sensor_record_timeout": Record(
        {("load", -1): "wait-backoff"}, {"rerun_load": "wait"}, action="timeout"
    ),
}  # fmt: skip


def test_every_fixture_is_checked_and_every_kind_has_one() -> None:
    on_disk = {path.stem for path in STORED.glob("*.json")}
    assert on_disk == set(ENTRIES) | set(RECORDS)
    checks = {(entry.check, entry.action) for entry in ENTRIES.values()}
    assert {("retry-start", "run"), ("retry-start", "fail"), ("retry-policy", "retry")} <= checks
    assert any(entry.job for entry in ENTRIES.values())
    assert any(entry.decision == "gate-error" for entry in ENTRIES.values())


# -- the policy's evidence -------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_the_policys_evidence_is_read_as_stored(name: str) -> None:
    kept, wanted = stored(name), ENTRIES[name]
    history = kept["taskStateStore"][evidence.EVIDENCE_KEY]
    latest = history["latest"]
    assert history["decisions"][-1] == latest
    assert kept["xcom"][evidence.EVIDENCE_KEY] == latest  # the gate reads the XCom copy
    assert (latest[VERSION_KEY], version_problem(latest)) == (SCHEMA_VERSION, None)
    assert (latest["check"], latest["action"], latest["failure"]) == (
        wanted.check, wanted.action, wanted.failure,
    )  # fmt: skip
    assert wanted.extra <= set(latest)
    failure_keys = {key for key in kept["xcom"] if evidence.failure_of_key(key)}
    if wanted.failure is None or wanted.action == "run":
        assert failure_keys == set()  # nothing failed: no class for the gate to read
    else:
        assert failure_keys == {evidence.failure_key(wanted.failure)}
        assert kept["xcom"][evidence.failure_key(wanted.failure)] == latest["tryNumber"]
    assert evidence.start_permission(history, _next_try(latest)) == wanted.start

    (row,) = policy_rows(TASK, -1, history)
    assert row.problem is None
    assert (row.decision, row.check, row.action) == (wanted.decision, wanted.check, wanted.action)
    notice = from_evidence(latest, TASK)
    assert (notice.decision, notice.refused, notice.job_problem) == (
        wanted.decision, wanted.action == "fail", None,
    )  # fmt: skip


def _next_try(latest: Mapping[str, Any]) -> int:
    """The try the stored history is asked about: this one again after a start, else the next."""
    number = int(latest["tryNumber"])
    return number if latest["check"] == "retry-start" and latest["action"] == "run" else number + 1


@pytest.mark.parametrize("name", sorted(name for name, entry in ENTRIES.items() if entry.job))
def test_a_reconciliation_and_the_try_start_marker_are_read_as_stored(name: str) -> None:
    kept, wanted = stored(name), ENTRIES[name]
    latest = kept["taskStateStore"][evidence.EVIDENCE_KEY]["latest"]
    job = Reconciliation.of(latest["reconciliation"])
    assert (job.outcome, job.allows, job.job_id) == (wanted.job, "reconnect", "load_a1")
    (row,) = policy_rows(TASK, -1, kept["taskStateStore"][evidence.EVIDENCE_KEY])
    assert row.reconciliation == job
    assert from_evidence(latest, TASK).job == job
    marker = TryStart.of(kept["taskStateStore"][TRY_START_KEY])
    assert marker is not None and (marker.try_number, marker.expects) == wanted.marker


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_a_stored_entry_replays_to_its_stored_result(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    latest = stored(name)["taskStateStore"][evidence.EVIDENCE_KEY]["latest"]
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(latest), encoding="utf-8")
    explained = command_line(["explain", str(path)])
    out, err = capsys.readouterr()
    if ENTRIES[name].decision == "gate-error":
        assert "fixture" not in latest
        assert explained == 2
        assert "holds no fixture to explain" in err
        return
    assert evaluate(latest["fixture"]) == latest["result"]
    (row,) = policy_rows(TASK, -1, {"latest": latest, "decisions": [latest]})
    assert row.replay is not None and row.replay.replays
    assert (explained, err) == (0, "")
    assert f"Stored decision about try {latest['tryNumber']} ({latest['check']})" in out
    assert ENTRIES[name].decision in out


# -- the gate's and the sensor's records -------------------------------------------------


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_a_record_is_read_as_stored(name: str) -> None:
    record, wanted = stored(name)["xcom"]["return_value"], RECORDS[name]
    assert (record[VERSION_KEY], version_problem(record)) == (SCHEMA_VERSION, None)
    assert record.get("action") == wanted.action
    found = {(row["taskId"], row["mapIndex"]): row["decision"] for row in record["decisions"]}
    assert found == wanted.decisions
    assert {item["taskId"]: item["action"] for item in record["guard"]} == wanted.guard

    shown = gate_record(record["gate"], -1, record)
    assert shown.problem is None
    assert shown.kind == ("sensor" if wanted.action else "gate")
    assert {(row.task_id, row.map_index): row.decision for row in shown.rows} == wanted.decisions
    assert all(row.problem is None and row.estimate for row in shown.rows)
    notices = from_gate_record(record)
    assert {notice.decision for notice in notices} == set(wanted.decisions.values())
    for row in record["decisions"]:
        sources = EstimateSource.of(row["estimateSource"], task_id=row["taskId"], decided_by="g")
        assert [field for field, _ in sources.sources][:4] == [
            "duration", "validation", "safeRepeat", "deadline",
        ]  # fmt: skip
    if wanted.override is None:
        assert "override" not in record
    else:
        override = OverrideEntry.of(record["override"])
        assert override.applied is wanted.override
        assert (override.approver, override.targets) == ("Ops Lead (id ops_lead)", ("report",))
        assert any(row.override for row in shown.rows)


def test_an_estimate_override_is_read_as_stored() -> None:
    record = stored("gate_record_guard")["xcom"]["return_value"]
    report = next(row for row in record["decisions"] if row["taskId"] == "report")
    source = EstimateSource.of(report["estimateSource"], task_id="report", decided_by="retry_gate")
    assert source.overridden
    assert "safe repeat: gate override — INC-4211" in source.line()


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_a_records_fixtures_replay_to_their_stored_results(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = stored(name)["xcom"]["return_value"]
    assert record["fixtures"]
    for index, item in enumerate(record["fixtures"]):
        assert evaluate(item["fixture"]) == item["result"]
        path = tmp_path / f"{name}-{index}.json"
        path.write_text(json.dumps(item["fixture"]), encoding="utf-8")
        assert command_line(["explain", "--origin", item["origin"], str(path)]) == 0
        out, err = capsys.readouterr()
        assert err == ""
        assert all(decided["decision"] in out for decided in item["result"]["tasks"])
    shown = gate_record(record["gate"], -1, record)
    assert all(row.replay is not None and row.replay.replays for row in shown.rows)
