"""One source of truth for a target's estimate: the gate and the sensor take it from the policy.

The DAGs here are built in-process (no scheduler, no server): the argument rules,
the refusals a DAG author sees when the DAG is parsed, and the path from the
policies' values to the fixture and the record's ``estimateSource``.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pendulum
import pytest

from airflow_retrywindow.exceptions import DeadlineError, RetryWindowGateError
from airflow_retrywindow.gate import run as gate_run
from airflow_retrywindow.gate.estimates import resolve_estimates
from airflow_retrywindow.gate.record import build
from airflow_retrywindow.operators.arguments import targets_argument
from airflow_retrywindow.timing.deadline import Deadline
from airflow_retrywindow.timing.work import MAX_OVERRIDE_REASON, EstimateOverride, Work
from tests.gate.fake_reader import FakeReader
from tests.gate.test_pipeline_stages import _row

START = pendulum.datetime(2026, 1, 1, tz="UTC")
SIX = Deadline.after_data_interval_end(hours=6)
FIVE = Deadline.after_data_interval_end(hours=5)
#: the policy's numbers differ from every Work below, so a value's origin shows
POLICY_WORK = Work(
    duration=timedelta(seconds=90), validation=timedelta(seconds=45), safe_repeat=True
)
OTHER = Work(duration=timedelta(minutes=1), validation=timedelta(seconds=30), safe_repeat=True)
ALL_POLICY = {"duration": "policy", "validation": "policy", "safeRepeat": "policy"}


def _policy(deadline: Deadline = SIX, **work: Any) -> Any:
    from airflow_retrywindow import RetryWindowPolicy

    values = {"duration": 90, "validation": 45, "safe_repeat": True, **work}
    return RetryWindowPolicy(deadline=deadline, **values)


def _dag(**policies: Any) -> Any:
    """A DAG with ``load`` (mapped) and ``grp.report`` (in a mapped task group) under
    policies, and ``plain`` without one; ``policies`` replaces a task's policy."""
    from airflow.sdk import DAG, task, task_group

    with DAG("rw_gate_estimates", schedule=None, start_date=START) as dag:

        @task(retries=2, retry_policy=policies.get("load", _policy()))
        def load(part: str) -> str:
            return part

        @task(retries=2, retry_policy=policies.get("report", _policy()))
        def report(part: str) -> str:
            return part

        @task(retries=2)
        def plain() -> str:
            return "plain"

        @task_group
        def grp(part: str) -> None:
            report(part)

        load.expand(part=["a", "b"])
        grp.expand(part=["a"])
        plain()
    return dag


def _gate(dag: Any, **arguments: Any) -> Any:
    from airflow_retrywindow import RetryWindowGateOperator

    with dag:
        return RetryWindowGateOperator(task_id=f"gate_{len(dag.task_dict)}", guard=[], **arguments)


def _sensor(dag: Any, **arguments: Any) -> Any:
    from airflow_retrywindow import RetryWindowSensor

    with dag:
        return RetryWindowSensor(task_id=f"wait_{len(dag.task_dict)}", **arguments)


# -- the arguments ---------------------------------------------------------------------


def test_targets_may_be_a_list_of_task_ids_or_a_mapping() -> None:
    override = Work.override(reason="INC-42", safe_repeat=False)
    assert targets_argument(["load", "grp.report"], "gate") == {"load": None, "grp.report": None}
    assert targets_argument(("load",), "gate") == {"load": None}
    mapping = {"load": OTHER, "report": None, "plain": override}
    assert targets_argument(mapping, "gate") == mapping


@pytest.mark.parametrize(
    ("targets", "message"),
    [
        ([], "targets must be a non-empty list of task ids (their estimates come from"),
        ({}, "targets must be a non-empty list of task ids"),
        ("load", "targets must be a non-empty list of task ids"),
        (["load", "load"], "targets names load more than once"),
        (["load", ""], "targets: task ids must be non-empty strings, got ''"),
        (["gate"], "targets: 'gate' cannot decide about itself"),
        (
            {"load": 60},
            "targets['load'] must be a Work(duration=..., validation=..., safe_repeat=...), a "
            "Work.override(reason=..., ...) or None (the task's RetryWindowPolicy's), got 60",
        ),
    ],
)
def test_bad_targets_are_refused_naming_the_value(targets: object, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        targets_argument(targets, "gate")
    assert message in str(raised.value)


def test_an_override_states_what_it_changes_and_why() -> None:
    override = Work.override(reason="INC-42: rows appended", safe_repeat=False, duration=120)
    assert isinstance(override, EstimateOverride)
    assert override.overridden() == ("duration", "safe_repeat")
    assert override.over(POLICY_WORK) == replace(
        POLICY_WORK, duration=timedelta(seconds=120), safe_repeat=False
    )
    assert Work.override(reason="cutoff", deadline=FIVE).deadline == FIVE


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"reason": "", "safe_repeat": False}, ValueError, "Work.override needs a reason"),
        ({"reason": "   ", "safe_repeat": False}, ValueError, "got '   '"),
        ({"reason": None, "safe_repeat": False}, ValueError, "got None"),
        (
            {"reason": "x" * (MAX_OVERRIDE_REASON + 1), "safe_repeat": False},
            ValueError,
            f"reason must be at most {MAX_OVERRIDE_REASON} characters, got 201",
        ),
        ({"reason": "INC-42"}, ValueError, "Work.override overrides nothing: give at least one"),
        ({"reason": "INC-42", "safe_repeat": "no"}, ValueError, "safe_repeat must be True, False"),
        ({"reason": "INC-42", "duration": 0}, ValueError, "duration must be from 1 to"),
        ({"reason": "INC-42", "validation": "1m"}, ValueError, "validation must be a timedelta"),
        (
            {"reason": "INC-42", "deadline": pendulum.naive(2026, 1, 2)},
            DeadlineError,
            "deadline must be timezone-aware",
        ),
    ],
)
def test_a_bad_override_is_refused(
    arguments: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as raised:
        Work.override(**arguments)
    assert message in str(raised.value)


def test_the_gate_and_the_sensor_need_no_work_and_no_deadline() -> None:
    dag = _dag()
    gate = _gate(dag, targets=["load", "grp.report"])
    sensor = _sensor(dag, target="load")
    assert gate.deadline is None and sensor.deadline is None and sensor.work is None
    assert gate.retry_window_problems() == [] and sensor.retry_window_problems() == []


def test_the_sensor_refuses_a_bad_work() -> None:
    with pytest.raises(ValueError, match=r"^work must be a Work\(duration=.*got 60$"):
        _sensor(_dag(), target="load", work=60)


# -- taking the estimate from the policy -------------------------------------------------


def test_a_list_of_targets_takes_every_value_from_the_policies() -> None:
    dag = _dag(report=_policy(duration=300, validation=0, safe_repeat=False))
    found = resolve_estimates(dag, targets_argument(["load", "grp.report"], "g"), None)
    assert found.works == {
        "load": POLICY_WORK,  # mapped: its policy lives in partial_kwargs
        "grp.report": Work(duration=300, validation=0, safe_repeat=False),  # in a task group
    }
    assert found.deadline == SIX
    assert found.sources == {
        "load": {**ALL_POLICY, "deadline": "policy"},
        "grp.report": {**ALL_POLICY, "deadline": "policy"},
    }


def test_the_same_values_given_twice_are_accepted_and_say_so() -> None:
    found = resolve_estimates(_dag(), {"load": POLICY_WORK, "plain": OTHER}, SIX)
    assert found.works == {"load": POLICY_WORK, "plain": OTHER}
    assert found.sources == {
        "load": dict.fromkeys(
            ("duration", "validation", "safeRepeat", "deadline"), "gate and policy"
        ),
        "plain": dict.fromkeys(("duration", "validation", "safeRepeat", "deadline"), "gate"),
    }


def test_an_override_replaces_only_what_it_names_and_records_the_reason() -> None:
    override = Work.override(reason="INC-42: rows appended twice", safe_repeat=False)
    found = resolve_estimates(_dag(), {"load": override, "plain": OTHER}, None)
    assert found.works["load"] == replace(POLICY_WORK, safe_repeat=False)
    assert found.sources["load"] == {
        "duration": "policy",
        "validation": "policy",
        "safeRepeat": "gate override: INC-42: rows appended twice",
        "deadline": "policy",
    }
    # a target without a policy takes the deadline the others' policies agree on
    assert found.sources["plain"]["deadline"] == "other targets' policies"
    assert found.deadline == SIX


def test_a_deadline_override_lets_the_gate_decide_on_its_own_deadline() -> None:
    dag = _dag()
    targets = {
        "load": Work.override(reason="the regulator's cutoff", deadline=FIVE),
        "grp.report": Work.override(reason="the regulator's cutoff", deadline=FIVE),
    }
    for deadline in (FIVE, None):
        found = resolve_estimates(dag, targets, deadline)
        assert found.deadline == FIVE
        assert {source["deadline"] for source in found.sources.values()} == {
            "gate override: the regulator's cutoff"
        }
        assert found.works["load"] == POLICY_WORK


def test_deadlines_compare_by_value_and_callables_by_identity() -> None:
    def due(context: Any) -> Any:
        return START

    def also_due(context: Any) -> Any:
        return START

    dag = _dag(load=_policy(Deadline.computed(due)), report=_policy(Deadline.computed(due)))
    assert resolve_estimates(dag, {"load": None}, Deadline.computed(due)).deadline == (
        Deadline.computed(due)
    )
    with pytest.raises(RetryWindowGateError, match="the gate's deadline is computed by"):
        resolve_estimates(dag, {"load": None}, Deadline.computed(also_due))
    # a separately built value is the same deadline
    assert resolve_estimates(_dag(), {"load": None}, Deadline.after_data_interval_end(hours=6))


# -- refused when the DAG is parsed --------------------------------------------------------


def test_a_work_that_differs_from_the_policy_is_refused_field_by_field() -> None:
    dag = _dag()
    wrong = Work(
        duration=timedelta(seconds=90), validation=timedelta(seconds=30), safe_repeat=False
    )
    gate = _gate(dag, targets={"load": wrong}, deadline=FIVE)
    assert gate.retry_window_problems() == [
        "targets['load']: validation: the gate's Work says timedelta(seconds=30), the task's "
        "RetryWindowPolicy says timedelta(seconds=45); make them equal, leave the Work out "
        "(targets['load']=None) to take the policy's, or mark the override: "
        "targets['load']=Work.override(reason='...', validation=timedelta(seconds=30))",
        "targets['load']: safe_repeat: the gate's Work says False, the task's RetryWindowPolicy "
        "says True; make them equal, leave the Work out (targets['load']=None) to take the "
        "policy's, or mark the override: targets['load']=Work.override(reason='...', "
        "safe_repeat=False)",
        "targets['load']: deadline: the gate's deadline is data_interval_end + 5:00:00, the "
        "task's RetryWindowPolicy says data_interval_end + 6:00:00; make them equal, leave the "
        "gate's deadline out to take the policy's, or mark the override: "
        "targets['load']=Work.override(reason='...', deadline=<the gate's deadline>)",
    ]
    with pytest.raises(RetryWindowGateError, match=r"^the gate's estimates cannot be settled: "):
        gate.estimates()


def test_the_sensor_names_its_own_arguments() -> None:
    sensor = _sensor(_dag(), target="load", work=OTHER)
    problems = sensor.retry_window_problems()
    assert problems[0].startswith(
        "work: duration: the sensor's Work says timedelta(seconds=60), the task's "
        "RetryWindowPolicy says timedelta(seconds=90); make them equal, leave the Work out "
        "(work=None)"
    )
    assert [problem.split(":")[1] for problem in problems] == [" duration", " validation"]
    assert _sensor(_dag(), target="plain").retry_window_problems() == [
        "work: task 'plain' has no RetryWindowPolicy to take its estimate from; give "
        "work=Work(duration=..., validation=..., safe_repeat=...), or, on "
        "Airflow 3.3 and later, add retry_policy=RetryWindowPolicy(...) to the task",
        "deadline: the sensor has none, and no target has a RetryWindowPolicy to take it from; "
        "pass deadline=...",
    ]


def test_a_target_without_a_policy_needs_a_work() -> None:
    dag = _dag()
    assert _gate(dag, targets=["load", "plain"]).retry_window_problems() == [
        "targets['plain']: task 'plain' has no RetryWindowPolicy to take its estimate from; "
        "give targets['plain']=Work(duration=..., validation=..., safe_repeat=...), or, on "
        "Airflow 3.3 and later, add retry_policy=RetryWindowPolicy(...) to the task"
    ]
    override = Work.override(reason="INC-42", safe_repeat=False)
    assert _gate(dag, targets={"plain": override}, deadline=SIX).retry_window_problems() == [
        "targets['plain']: Work.override(...) replaces values of a RetryWindowPolicy, but task "
        "'plain' has none; give targets['plain']=Work(duration=..., validation=..., "
        "safe_repeat=...)"
    ]


def test_policies_with_different_deadlines_need_the_gates_own() -> None:
    dag = _dag(report=_policy(FIVE))
    gate = _gate(dag, targets=["load", "grp.report"])
    assert gate.retry_window_problems() == [
        "deadline: the gate has none, and its targets' policies give different deadlines "
        "('load': data_interval_end + 6:00:00; 'grp.report': data_interval_end + 5:00:00); "
        "pass the gate's deadline=... and mark each target whose policy differs with "
        "Work.override(reason='...', deadline=...)"
    ]
    override = {"load": Work.override(reason="report's deadline", deadline=FIVE), "plain": OTHER}
    fixed = _gate(dag, targets={**override, "grp.report": None}, deadline=FIVE)
    assert fixed.retry_window_problems() == []
    assert _gate(dag, targets={"plain": OTHER}).retry_window_problems() == [
        "deadline: the gate has none, and no target has a RetryWindowPolicy to take it from; "
        "pass deadline=..."
    ]
    # an override's deadline must be the gate's: a gate decides on one deadline
    assert _gate(dag, targets=override, deadline=SIX).retry_window_problems() == [
        "targets['load']: Work.override gives the deadline data_interval_end + 5:00:00, but the "
        "gate decides on its deadline data_interval_end + 6:00:00; give the same one"
    ]


def test_every_bad_target_is_named_once() -> None:
    gate = _gate(_dag(), targets=["laod", "plain"])
    assert gate.retry_window_problems() == [
        "target 'laod' is not a task of DAG 'rw_gate_estimates'; a gate decides about tasks of "
        "its own DAG run (check the task id, including its task group prefix)",
        "targets['plain']: task 'plain' has no RetryWindowPolicy to take its estimate from; "
        "give targets['plain']=Work(duration=..., validation=..., safe_repeat=...), or, on "
        "Airflow 3.3 and later, add retry_policy=RetryWindowPolicy(...) to the task",
        "deadline: the gate has none, and no target has a RetryWindowPolicy to take it from; "
        "pass deadline=...",
    ]
    # when it runs, a target outside the DAG is never decided without an estimate
    with pytest.raises(RetryWindowGateError, match="target 'laod' is not a task of DAG"):
        resolve_estimates(_dag(), {"laod": None, "load": None}, None)


# -- through the pipeline to the record ------------------------------------------------------


def test_the_policys_values_reach_the_fixture_and_the_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dag = _dag(report=_policy(duration=300, validation=0, safe_repeat=False))
    override = Work.override(reason="INC-7: checks take longer", validation=10)
    gate = _gate(dag, targets={"load": None, "grp.report": override, "plain": OTHER})
    now = pendulum.now("UTC")
    failed = [
        replace(
            _row(task_id, "failed", map_index=index),
            start_date=now.subtract(minutes=5),
            end_date=now.subtract(minutes=4),
            observed_at=now,
        )
        for task_id, index in (("load", 0), ("load", 1), ("grp.report", 0), ("plain", -1))
    ]
    monkeypatch.setattr(gate_run, "_client", lambda settings: FakeReader(failed))
    estimates = gate.estimates()
    context = {
        "dag": dag,
        "dag_run": SimpleNamespace(run_id="manual__1"),
        "data_interval_end": now,
        "data_interval_start": now,
    }
    decided = gate_run.decide_run(gate._gate_settings(estimates), context)
    record = build(
        decided.table, requests=decided.requests, api=decided.api, gate=gate.task_id,
        dag_id=dag.dag_id, run_id="manual__1", try_number=1,
        deadline_rule=estimates.deadline.describe(), work_unit=None,
        estimate_sources=estimates.sources,
    )  # fmt: skip
    assert record["deadline"] == now.add(hours=6).format("YYYY-MM-DDTHH:mm:ss[Z]")
    assert record["deadlineRule"] == "data_interval_end + 6:00:00"
    # every task instance's fixture task: (task id, map index) -> what the model was given
    tasks = {
        (item["taskIds"][task["id"]], item["mapIndexes"].get(task["id"], -1)): task
        for item in record["fixtures"]
        for task in item["fixture"]["tasks"]
    }
    given = {
        key: (task["duration"], task["validation"], task["safeRepeat"])
        for key, task in tasks.items()
    }
    assert given == {
        ("load", 0): (90, 45, True),  # the policy's
        ("load", 1): (90, 45, True),
        ("grp.report", 0): (300, 10, False),  # the policy's, validation overridden
        ("plain", -1): (60, 30, True),  # the gate's Work
    }
    rows = {(row["taskId"], row["mapIndex"]): row for row in record["decisions"]}
    assert rows[("load", 1)]["estimateSource"] == {**ALL_POLICY, "deadline": "policy"}
    assert rows[("grp.report", 0)]["safeRepeat"] is False  # the policy's claim
    assert rows[("grp.report", 0)]["estimateSource"] == {
        "duration": "policy",
        "validation": "gate override: INC-7: checks take longer",
        "safeRepeat": "policy",
        "deadline": "policy",
    }
    assert rows[("plain", -1)]["estimateSource"] == {
        "duration": "gate",
        "validation": "gate",
        "safeRepeat": "gate",
        "deadline": "other targets' policies",
    }


def test_an_override_reason_is_masked_like_any_stored_text() -> None:
    from airflow.sdk.log import mask_secret  # type: ignore[attr-defined]

    mask_secret("hunter2")
    override = Work.override(reason="INC-7 password=hunter2 in the ticket", safe_repeat=False)
    found = resolve_estimates(_dag(), {"load": override}, None)
    assert found.sources["load"]["safeRepeat"] == "gate override: INC-7 password=*** in the ticket"
