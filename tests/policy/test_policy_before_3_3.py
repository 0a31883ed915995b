"""Before Airflow 3.3 a ``RetryWindowPolicy`` is refused when its DAG is parsed, saying why.

Retry policies arrived in Airflow 3.3; on 3.1 and 3.2 a DAG file that builds one is
an import error naming the installed Airflow and what to use instead, while a DAG of
gates and sensors parses. The parse runs on whichever Airflow this virtualenv holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_retrywindow import Deadline, RetryWindowPolicy, version_compat
from airflow_retrywindow.exceptions import UnsupportedAirflowVersion
from tests.package.test_version_compat import run_script

DAGS = Path(__file__).with_name("version_dags")
REASON = "retry policies arrived in Airflow 3.3"
#: DagBag moved to the DAG processor's package in 3.2; the parse tries the newer place first
PARSE = """
import json, sys
try:
    from airflow.dag_processing.dagbag import DagBag
except ImportError:
    from airflow.models.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
errors = {path.rsplit("/", 1)[-1]: error for path, error in bag.import_errors.items()}
print(json.dumps({"dags": sorted(bag.dag_ids), "errors": errors}))
"""


def _policy() -> RetryWindowPolicy:
    deadline = Deadline.after_data_interval_end(hours=6)
    return RetryWindowPolicy(deadline=deadline, duration=60, validation=30, safe_repeat=True)


@pytest.mark.parametrize("installed", ["3.1.8", "3.2.2"])
def test_building_the_policy_before_3_3_says_why_and_what_to_do(
    monkeypatch: pytest.MonkeyPatch, installed: str
) -> None:
    monkeypatch.setattr(version_compat, "installed_version", lambda: installed)
    with pytest.raises(UnsupportedAirflowVersion) as refused:
        _policy()
    assert str(refused.value) == (
        "RetryWindowPolicy cannot gate retries here: retry policies arrived in Airflow 3.3 "
        f"(AIP-105); this Airflow is {installed}. Gate the retry with a "
        "RetryWindowGateOperator or a RetryWindowSensor in front of the task instead, giving "
        "it the estimate as work=Work(duration=..., validation=..., safe_repeat=...), or "
        "upgrade Airflow to 3.3 or later"
    )


def test_the_policy_is_built_from_3_3(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(version_compat, "installed_version", lambda: "3.3.0")
    if not version_compat.AIRFLOW_V_3_3_PLUS:
        pytest.skip("a real policy needs Airflow 3.3's RetryPolicy, which this Airflow lacks")
    assert _policy().work.duration.total_seconds() == 60


@pytest.fixture(scope="module")
def parsed() -> dict[str, Any]:
    """The version DAGs as this Airflow's DagBag parses them, in a fresh interpreter."""
    return run_script(PARSE, str(DAGS))


def test_a_dag_of_gates_and_sensors_parses_on_every_airflow(parsed: dict[str, Any]) -> None:
    assert "rw_gate_any_version" in parsed["dags"]
    assert "rw_gate_any_version.py" not in parsed["errors"]


def test_a_dag_with_the_policy_is_an_import_error_before_3_3(parsed: dict[str, Any]) -> None:
    errors: dict[str, str] = parsed["errors"]
    if version_compat.AIRFLOW_V_3_3_PLUS:
        assert "rw_policy_needs_3_3" in parsed["dags"]
        assert errors == {}
        return
    assert "rw_policy_needs_3_3" not in parsed["dags"]
    error = errors["rw_policy_needs_3_3.py"]
    assert "UnsupportedAirflowVersion" in error
    assert f"{REASON} (AIP-105); this Airflow is {version_compat.installed_version()}" in error
    assert "RetryWindowGateOperator or a RetryWindowSensor" in error
