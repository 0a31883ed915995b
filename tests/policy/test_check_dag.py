"""Settings the gate cannot express are refused before any run: in tests and at parse time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BAD_DAGS = Path(__file__).with_name("bad_dags")
GOOD_DAGS = Path(__file__).with_name("dags")

PARSE = """
import sys
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
for path, error in bag.import_errors.items():
    print("IMPORT ERROR", path, error)
print("DAGS", sorted(bag.dag_ids))
"""


def _parse(folder: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", PARSE, str(folder)], capture_output=True, text=True, check=True
    )
    return done.stdout


@pytest.mark.airflow
def test_dag_processor_refuses_unexpressible_settings(airflow_db: Path) -> None:
    output = _parse(BAD_DAGS)
    assert "IMPORT ERROR" in output
    assert "retry window gate: task 'too_many': retries=12 means 13 runs" in output
    assert "DAGS []" in output


@pytest.mark.airflow
def test_dag_processor_accepts_expressible_settings(airflow_db: Path) -> None:
    output = _parse(GOOD_DAGS)
    assert "IMPORT ERROR" not in output
    assert "rw_backoff" in output


def test_check_dag_reports_only_gated_tasks() -> None:
    from airflow.sdk import DAG

    from airflow_retrywindow import check_dag

    namespace: dict[str, object] = {}
    source = (BAD_DAGS / "unexpressible_retries.py").read_text()
    exec(compile(source, "unexpressible_retries.py", "exec"), namespace)
    dags = [value for value in namespace.values() if isinstance(value, DAG)]
    assert len(dags) == 1
    problems = check_dag(dags[0])
    assert len(problems) == 1
    assert problems[0].startswith("rw_unexpressible: task 'too_many': retries=12")


@pytest.mark.parametrize(
    ("alerts", "expected"),
    [
        ([], None),
        (["positions ready"], ""),
        (["positions ready", "regulator cutoff"], None),
    ],
)
def test_check_dag_reports_a_deadline_alert_the_dag_does_not_have(
    alerts: list[str], expected: str | None
) -> None:
    from datetime import timedelta

    import pendulum
    from airflow.sdk import DAG, DeadlineAlert, DeadlineReference, SyncCallback, task

    from airflow_retrywindow import Deadline, RetryWindowPolicy, check_dag

    callback = SyncCallback("tests.policy.deadline_dags.never_called")
    declared = [
        DeadlineAlert(
            reference=DeadlineReference.DAGRUN_LOGICAL_DATE,
            interval=timedelta(hours=30),
            callback=callback,
            name=name,
        )
        for name in alerts
    ]
    policy = RetryWindowPolicy(
        deadline=Deadline.dag_alert(),
        duration=timedelta(minutes=5),
        validation=timedelta(0),
        safe_repeat=True,
    )
    with DAG(
        "rw_alert_check",
        schedule=None,
        start_date=pendulum.datetime(2026, 12, 1, tz="UTC"),
        deadline=declared or None,
    ) as dag:

        @task(retry_policy=policy, retries=1)
        def load() -> None: ...

        load()

    problems = check_dag(dag)
    if expected is not None:  # exactly one alert: the policy's deadline resolves
        assert problems == []
        return
    assert len(problems) == 1
    assert problems[0].startswith("rw_alert_check: task 'load': ")
    assert "alert" in problems[0]
