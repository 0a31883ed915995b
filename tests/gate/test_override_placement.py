"""The approval task is checked when the DAG is parsed: what it is and where it sits.

The DAGs are built in this process and checked the way the DAG processor's cluster
policy checks them (``check_dag`` -> the gate's ``retry_window_problems()``); no
Airflow service runs.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pendulum
import pytest

pytestmark = pytest.mark.airflow

START = pendulum.datetime(2026, 1, 1, tz="UTC")
REASON = "reason"


def _dag(arrange: Callable[[Any, Any, Any], None], **approval: Any) -> Any:
    """A gate guarding ``load`` with ``approve_repeat``, wired by ``arrange``."""
    from airflow.providers.standard.operators.hitl import ApprovalOperator
    from airflow.sdk import DAG, Param
    from airflow.sdk.bases.operator import BaseOperator

    from airflow_retrywindow import Deadline, RetryWindowGateOperator, Work

    work = Work(duration=timedelta(minutes=1), validation=timedelta(seconds=30), safe_repeat=True)
    arguments = {
        "task_id": "approve_repeat",
        "subject": "Repeat the load anyway?",
        "params": {REASON: Param("", type="string")},
        **approval,
    }
    with DAG("rw_override_placement", schedule=None, start_date=START) as dag:
        gate = RetryWindowGateOperator(
            task_id="gate",
            targets={"load": work},
            deadline=Deadline.after_data_interval_end(hours=6),
            approval="approve_repeat",
        )
        load = BaseOperator(task_id="load")
        maker = arguments.pop("operator", ApprovalOperator)
        approve = maker(**arguments)
        arrange(gate, load, approve)
    return dag


def _side_by_side(gate: Any, load: Any, approve: Any) -> None:
    gate >> [load, approve]


def _problems(dag: Any) -> list[str]:
    from airflow_retrywindow import check_dag

    return check_dag(dag)


def test_the_pattern_has_no_problem() -> None:
    assert _problems(_dag(_side_by_side)) == []
    # an HITLOperator offering Approve among its options will do as well
    from airflow.providers.standard.operators.hitl import HITLOperator

    hitl = _dag(_side_by_side, operator=HITLOperator, options=["Approve", "Hold"])
    assert _problems(hitl) == []


@pytest.mark.parametrize(
    ("arrange", "approval", "message"),
    [
        (lambda gate, load, approve: gate >> load, {},
         "approval task 'approve_repeat' must be directly downstream of gate 'gate' "
         "(gate >> approve_repeat), so that it asks only after the gate held refused work back"),
        (lambda gate, load, approve: gate >> load >> approve, {},
         "approval task 'approve_repeat' is downstream of guarded task 'load': when the gate "
         "holds 'load' back, the approval is skipped with it and never asks"),
        (lambda gate, load, approve: gate >> approve >> load, {},
         "guarded task 'load' is downstream of approval task 'approve_repeat': every run would "
         "wait for a person"),
        (_side_by_side, {"trigger_rule": "all_done"},
         "approval task 'approve_repeat' has trigger_rule 'all_done', which would ask for an "
         "approval after 'gate' failed, with no refusal to override; use all_success"),
        (_side_by_side, {"params": {}},
         "approval task 'approve_repeat' has no 'reason' param: an approval counts only with a "
         "stated reason"),
        (_side_by_side, {"defaults": "Approve"},
         "approval task 'approve_repeat' defaults to 'Approve': on a response timeout Airflow "
         "would record an approval nobody gave"),
    ],
)  # fmt: skip
def test_a_misplaced_or_unfit_approval_task_is_refused(
    arrange: Callable[[Any, Any, Any], None], approval: dict[str, Any], message: str
) -> None:
    problems = _problems(_dag(arrange, **approval))
    assert len(problems) == 1
    assert problems[0].startswith("rw_override_placement: ")
    assert message in problems[0]


def test_an_approval_task_that_cannot_approve_is_refused() -> None:
    from airflow.providers.standard.operators.hitl import HITLOperator
    from airflow.sdk.bases.operator import BaseOperator

    yes_no = _dag(_side_by_side, operator=HITLOperator, options=["Yes", "No"])
    assert (
        "must offer 'Approve' with one option chosen (multiple=False); it offers "
        in (_problems(yes_no)[0])
    )
    several = _dag(_side_by_side, operator=HITLOperator, options=["Approve", "Hold"], multiple=True)
    assert "it offers ['Approve', 'Hold'] with multiple=True" in _problems(several)[0]

    def plain(**arguments: Any) -> Any:
        return BaseOperator(task_id=arguments["task_id"])

    not_hitl = _dag(_side_by_side, operator=plain)
    assert (
        "approval task 'approve_repeat' is a BaseOperator; it must be an ApprovalOperator, or "
        "an HITLOperator offering 'Approve', and not mapped"
    ) in _problems(not_hitl)[0]


def test_an_approval_task_missing_from_the_dag_is_refused() -> None:
    from airflow.sdk import DAG
    from airflow.sdk.bases.operator import BaseOperator

    from airflow_retrywindow import Deadline, RetryWindowGateOperator, Work

    work = Work(duration=timedelta(minutes=1), validation=timedelta(seconds=30), safe_repeat=True)
    with DAG("rw_override_missing", schedule=None, start_date=START) as dag:
        gate = RetryWindowGateOperator(
            task_id="gate", targets={"load": work}, approval="approve",
            deadline=Deadline.after_data_interval_end(hours=6),
        )  # fmt: skip
        gate >> BaseOperator(task_id="load")
    assert _problems(dag) == [
        "rw_override_missing: approval task 'approve' is not a task of DAG 'rw_override_missing'"
    ]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"approval": "load"}, "approval: 'load' is a target of gate 'gate'; name the task that "
         "asks a person, not the work it approves"),
        ({"approval": "gate"}, "approval: gate 'gate' cannot approve its own refusals"),
        ({"approval": ""}, "approval must be the task id of an approval task, got ''"),
        ({"approval_targets": ["load"]}, "approval_targets needs approval"),
        ({"approval": "ok", "approval_targets": "load"},
         "approval_targets must be a list of target ids, got 'load'"),
        ({"approval": "ok", "approval_targets": []}, "approval_targets names no target"),
        ({"approval": "ok", "approval_targets": ["laod"]},
         "approval_targets names 'laod', not among the targets (load)"),
    ],
)  # fmt: skip
def test_the_gate_refuses_bad_approval_arguments(arguments: dict[str, Any], message: str) -> None:
    from airflow.sdk import DAG

    from airflow_retrywindow import Deadline, RetryWindowGateOperator, Work

    work = Work(duration=timedelta(minutes=1), validation=timedelta(seconds=30), safe_repeat=True)
    with (
        DAG("rw_override_arguments", schedule=None, start_date=START),
        pytest.raises(ValueError) as raised,
    ):
        RetryWindowGateOperator(
            task_id="gate", targets={"load": work},
            deadline=Deadline.after_data_interval_end(hours=6), **arguments,
        )  # fmt: skip
    assert message in str(raised.value)


def test_approval_targets_default_to_every_target() -> None:
    dag = _dag(_side_by_side)
    assert dag.task_dict["gate"].approval_targets == ("load",)


def test_the_approval_is_read_through_the_reader_that_read_the_run() -> None:
    from airflow_retrywindow.gate.approve import gate_override
    from tests.gate.test_override_decisions import ApprovalReader, _answer, _exhausted

    gate = _dag(_side_by_side).task_dict["gate"]
    reader = ApprovalReader(_answer(), gate_tries=[])

    def read(reader: Any) -> Any:
        return gate_override(
            _exhausted("load"), gate.guard, gate.approval, gate.approval_targets, reader,
            dag_id=gate.dag_id, run_id="run", gate_id=gate.task_id, gate_try=1,
        )  # fmt: skip

    override, requests = read(reader)
    # one client for the whole evaluation: its token (counted once, by the run's
    # read) is not asked for again; only the approval's own read is added
    assert [call[0] for call in reader.calls] == ["approval"]
    assert requests == 1
    assert override.released == ("load",)
    # no reader handed over: nothing is released, and the record says why
    unread, _ = read(None)
    assert unread.released == ()
    assert "no reader" in unread.note
