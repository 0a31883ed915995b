"""Bad configuration is refused clearly: when the operator is built, or when the DAG is parsed."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pendulum
import pytest

BAD_DAGS = Path(__file__).with_name("bad_dags")
# the DAG files there import tests.gate.placement_parts: parse them from the work tree
ROOT = Path(__file__).resolve().parents[2]
PARSE = """
import sys
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
for path, error in sorted(bag.import_errors.items()):
    print("IMPORT ERROR", path.rsplit("/", 1)[-1], error.strip().splitlines()[-1])
print("DAGS", sorted(bag.dag_ids))
"""


@pytest.mark.airflow
def test_the_dag_processor_refuses_misplaced_gates(airflow_db: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PARSE, str(BAD_DAGS)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    errors = {
        line.split(" ")[2]: line.split(" ", 3)[3]
        for line in done.stdout.splitlines()
        if line.startswith("IMPORT ERROR")
    }
    assert errors["bad_target.py"].endswith(
        "retry window gate: target 'laod' is not a task of DAG 'rw_gate_bad_target'; a gate "
        "decides about tasks of its own DAG run (check the task id, including its task group "
        "prefix)"
    )
    assert "target 'ghost' is not a task of DAG 'rw_gate_bad_sensor'" in errors["bad_sensor.py"]
    assert (
        "guarded task 'load' has trigger_rule 'all_done', which would let it run after 'gate' "
        "failed or was skipped, without a decision; use all_success" in errors["bad_rule.py"]
    )
    assert (
        "guarded task 'load' must be directly downstream of gate 'gate'"
        in errors["not_downstream.py"]
    )
    # mapped targets are decided per map index; retries that differ per index are not
    assert errors["mapped_retries.py"].endswith(
        "retry window gate: target 'copy' maps retries per map index; the gate reads one set "
        "of retry settings for every map index, so set them in partial() instead"
    )
    # one source of truth for an estimate: a gate that contradicts a policy is refused
    assert errors["estimate_conflict.py"].endswith(
        "retry window gate: targets['load']: safe_repeat: the gate's Work says True, the task's "
        "RetryWindowPolicy says False; make them equal, leave the Work out "
        "(targets['load']=None) to take the policy's, or mark the override: "
        "targets['load']=Work.override(reason='...', safe_repeat=True)"
    )
    assert errors["no_estimate.py"].endswith(
        "retry window gate: targets['load']: task 'load' has no RetryWindowPolicy to take its "
        "estimate from; give targets['load']=Work(duration=..., validation=..., "
        "safe_repeat=...), or, on Airflow 3.3 and later, add retry_policy=RetryWindowPolicy(...) "
        "to the task"
    )
    assert errors["deadline_conflict.py"].endswith(
        "retry window gate: deadline: the gate has none, and its targets' policies give "
        "different deadlines ('load': data_interval_end + 6:00:00; 'report': "
        "data_interval_end + 4:00:00); pass the gate's deadline=... and mark each target whose "
        "policy differs with Work.override(reason='...', deadline=...)"
    )
    good = ("good_gate.py", "good_mapped.py", "good_estimates.py")
    assert not [name for name in good if name in errors]
    dags = "DAGS ['rw_gate_good', 'rw_gate_good_estimates', 'rw_gate_good_mapped']"
    assert dags in done.stdout


def _gate(**overrides: Any) -> Any:
    from airflow.sdk import DAG

    from airflow_retrywindow import Deadline, RetryWindowGateOperator, Work

    arguments: dict[str, Any] = {
        "task_id": "gate",
        "targets": {
            "load": Work(
                duration=timedelta(minutes=1), validation=timedelta(seconds=30), safe_repeat=True
            )
        },
        "deadline": Deadline.after_data_interval_end(hours=6),
        **overrides,
    }
    with DAG("rw_gate_arguments", schedule=None, start_date=pendulum.datetime(2026, 1, 1)):
        return RetryWindowGateOperator(**arguments)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"targets": {}}, "targets must be a non-empty list of task ids"),
        ({"targets": {"load": 60}}, "targets['load'] must be a Work("),
        ({"targets": {"gate": None}}, "targets: 'gate' cannot decide about itself"),
        ({"guard": ["append"]}, "guard['append'] depends on 'append', which is not among"),
        ({"guard": {"reload": ["load", "nope"]}}, "guard['reload'] depends on 'nope'"),
        ({"guard": "load"}, "guard must be a list of task ids or a mapping"),
        ({"deadline": pendulum.naive(2026, 1, 2)}, "deadline must be timezone-aware"),
        ({"budget": 200}, "budget must be a Budget(limit=..., estimate=..., unit=...)"),
        ({"observations": 42}, "observations must be a mapping of task id to observation"),
        ({"work_unit": ["2026-01-01"]}, "work_unit must be a mapping of names to values"),
        ({"max_observation_age": -1}, "max_observation_age must be from 0 to"),
        ({"airflow_conn_id": ""}, "airflow_conn_id must be a connection id"),
        ({"page_size": 0}, "page_size must be a whole number from 1 to 1000, got 0"),
        ({"api_timeout": 0}, "api_timeout must be a positive number of seconds, got 0"),
        ({"ignore_downstream_trigger_rules": "yes"}, "ignore_downstream_trigger_rules must be"),
    ],
)
def test_the_gate_refuses_bad_arguments(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=None) as raised:
        _gate(**overrides)
    assert message in str(raised.value)


def test_the_sensor_refuses_bad_arguments() -> None:
    from airflow.sdk import DAG

    from airflow_retrywindow import Deadline, RetryWindowSensor, Work

    work = Work(duration=timedelta(minutes=1), validation=timedelta(seconds=30), safe_repeat=True)
    deadline = Deadline.after_data_interval_end(hours=6)
    with DAG("rw_gate_sensor_arguments", schedule=None, start_date=pendulum.datetime(2026, 1, 1)):
        with pytest.raises(ValueError, match="mode='reschedule' needs deferrable=False"):
            RetryWindowSensor(
                task_id="a", target="load", work=work, deadline=deadline, mode="reschedule"
            )
        with pytest.raises(ValueError, match="target must be a task id"):
            RetryWindowSensor(task_id="b", target="", work=work, deadline=deadline)
        with pytest.raises(ValueError, match=r"^work must be a Work"):
            RetryWindowSensor(
                task_id="c",
                target="load",
                work=timedelta(1),  # type: ignore[arg-type]
                deadline=deadline,
            )
        sensor = RetryWindowSensor(
            task_id="d", target="load", work=work, deadline=deadline, deferrable=False,
            mode="reschedule",
        )  # fmt: skip
        assert sensor.mode == "reschedule"
        assert sensor.retry_window_problems() == [
            "target 'load' is not a task of DAG 'rw_gate_sensor_arguments'; a gate decides "
            "about tasks of its own DAG run (check the task id, including its task group prefix)"
        ]


def test_default_args_fill_the_arguments_the_gate_and_the_sensor_share() -> None:
    from airflow.sdk import DAG

    from airflow_retrywindow import RetryWindowGateOperator, RetryWindowSensor

    shared = {"api_timeout": 7.0, "page_size": 50, "airflow_conn_id": "rw_from_default_args"}
    with DAG(
        "rw_gate_default_args",
        schedule=None,
        start_date=pendulum.datetime(2026, 1, 1),
        default_args=shared,
    ):
        gate = RetryWindowGateOperator(task_id="gate", targets=["load"])
        sensor = RetryWindowSensor(task_id="wait", target="load", page_size=20)
    assert (gate.api_timeout, gate.page_size, gate.airflow_conn_id) == tuple(shared.values())
    # an argument given to the task wins over default_args
    assert (sensor.api_timeout, sensor.page_size) == (7.0, 20)
    assert sensor.airflow_conn_id == "rw_from_default_args"
