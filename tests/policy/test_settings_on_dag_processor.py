"""A bad ``[retry_window]`` setting on a real DAG processor: logged when it starts,
an import error of the gated DAG, and the ungated DAG still loads."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from devstack.stack import AirflowStack, sqlite_stack

pytestmark = [pytest.mark.airflow, pytest.mark.slow]
DAGS = Path(__file__).with_name("settings_dags")
VARIABLE = "AIRFLOW__RETRY_WINDOW__CLOCK_SKEW_TOLERANCE"
MESSAGE = "[retry_window] clock_skew_tolerance = 'soon' is not valid"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowStack]:
    home = tmp_path_factory.mktemp("settings-stack")
    with sqlite_stack(
        home, ["dag-processor"], [], dags_folder=DAGS, extra_env={VARIABLE: "soon"}
    ) as running:
        running.wait_for(
            lambda: (
                bool(running.rows("select 1 from import_error"))
                and bool(
                    running.rows("select 1 from serialized_dag where dag_id='rw_settings_plain'")
                )
            ),
            "the DAG processor to parse both DAG files",
            timeout=180,
        )
        yield running


def test_a_bad_setting_is_an_import_error_of_the_gated_dag_only(stack: AirflowStack) -> None:
    errors = stack.rows("select filename, stacktrace from import_error")
    assert [Path(filename).name for filename, _ in errors] == ["gated.py"]
    ((_, text),) = errors
    assert "AirflowClusterPolicyViolation" in text
    assert MESSAGE in text and VARIABLE in text
    parsed = {row[0] for row in stack.rows("select dag_id from serialized_dag")}
    assert parsed == {"rw_settings_plain"}


def test_the_dag_processor_logs_the_bad_setting_when_it_starts_and_keeps_running(
    stack: AirflowStack,
) -> None:
    logged = (stack.logs / "dag-processor.log").read_text(errors="replace")
    lines = [line for line in logged.splitlines() if MESSAGE in line]
    assert lines, logged[-2000:]
    assert VARIABLE in lines[0]
    assert "every gated decision is refused until it is fixed" in lines[0]
    assert stack.processes["dag-processor"].poll() is None
