"""The ``[retry_window]`` section: listed by Airflow, and each option takes effect.

Options are set the way a deployment sets them: through their
``AIRFLOW__RETRY_WINDOW__...`` environment variables, which Airflow reads on
every lookup.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pendulum
import pytest
from airflow.exceptions import AirflowClusterPolicyViolation
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

from airflow_retrywindow import (
    Deadline,
    RetryWindowGateOperator,
    RetryWindowPolicy,
    RetryWindowSensor,
    configuration,
)
from airflow_retrywindow.configuration import OPTIONS, SECTION
from airflow_retrywindow.hooks.airflow_api import AirflowApiHook
from airflow_retrywindow.links.retry_window import RetryWindowLink
from airflow_retrywindow.policies.cluster_policy import task_policy
from airflow_retrywindow.policies.retry_start import RetryStartCheck

START = pendulum.datetime(2026, 3, 1, tz="UTC")


def env(option: str) -> str:
    return f"AIRFLOW__{SECTION.upper()}__{option.upper()}"


def load(retries: int = 2) -> EmptyOperator:
    """A gated task in the current DAG; ``retries=12`` is more than the gate can express."""
    return EmptyOperator(
        task_id="load",
        retries=retries,
        retry_delay=timedelta(seconds=30),
        retry_policy=RetryWindowPolicy(
            deadline=Deadline.after_data_interval_start(hours=6),
            duration=60,
            validation=10,
            safe_repeat=True,
        ),
    )


def gated(retries: int = 2) -> EmptyOperator:
    """A gated task of a fresh DAG."""
    with DAG(f"rw_settings_{retries}", schedule=None, start_date=START):
        return load(retries)


def gate_and_sensor(**arguments: Any) -> tuple[RetryWindowGateOperator, RetryWindowSensor]:
    with DAG("rw_settings_gate", schedule=None, start_date=START):
        work = load()
        gate = RetryWindowGateOperator(task_id="gate", targets=["load"], guard=[], **arguments)
        sensor = RetryWindowSensor(task_id="wait", target="load", **arguments)
        gate >> work
    return gate, sensor


@pytest.mark.airflow
def test_airflow_config_lists_the_section_with_its_defaults(airflow_db: Path) -> None:
    airflow = Path(sys.executable).with_name("airflow")
    environment = {k: v for k, v in os.environ.items() if not k.startswith(env("").rstrip("_"))}
    done = subprocess.run(
        [str(airflow), "config", "list", "--section", SECTION, "--show-values"],
        capture_output=True, text=True, check=True, env=environment,
    )  # fmt: skip
    assert f"[{SECTION}]" in done.stdout
    for option, spec in OPTIONS.items():
        assert f"{option} = {spec['default']}".rstrip() in done.stdout


def test_policy_checks_enforce_by_default_refuse_the_dag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(env("policy_checks"), raising=False)
    with pytest.raises(AirflowClusterPolicyViolation, match="retries=12"):
        task_policy(gated(retries=12))
    task = gated()
    task_policy(task)
    assert isinstance(task._pre_execute_hook, RetryStartCheck)


def test_policy_checks_warn_logs_and_keeps_the_retry_start_check(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(env("policy_checks"), "warn")
    task = gated(retries=12)
    with caplog.at_level(logging.WARNING):
        task_policy(task)  # does not raise
    assert "policy_checks = warn" in caplog.text and "retries=12" in caplog.text
    assert isinstance(task._pre_execute_hook, RetryStartCheck)


def test_policy_checks_off_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(env("policy_checks"), "OFF")
    task = gated(retries=12)
    task_policy(task)  # does not raise
    assert task._pre_execute_hook is None


def test_a_policy_checks_value_it_does_not_know_refuses_rather_than_switches_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(env("policy_checks"), "disabled")
    with pytest.raises(AirflowClusterPolicyViolation, match=r"policy_checks = 'disabled'"):
        task_policy(gated())
    # a task of nobody else's is never touched, whatever the setting
    with DAG("rw_settings_plain", schedule=None, start_date=START):
        plain = EmptyOperator(task_id="plain")
    task_policy(plain)


def test_the_api_connection_page_size_and_timeout_come_from_the_section(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate, sensor = gate_and_sensor()
    for task in (gate, sensor):
        assert (task.airflow_conn_id, task.page_size, task.api_timeout) == (
            "airflow_api_default",
            1000,
            30.0,
        )
    monkeypatch.setenv(env("default_conn_id"), "airflow_api_gate")
    monkeypatch.setenv(env("api_page_size"), "200")
    monkeypatch.setenv(env("api_timeout"), "7.5")
    gate, sensor = gate_and_sensor()
    for task in (gate, sensor):
        assert (task.airflow_conn_id, task.page_size, task.api_timeout) == (
            "airflow_api_gate",
            200,
            7.5,
        )
    settings = gate.gate_settings()
    assert (settings.conn_id, settings.page_size, settings.timeout) == (
        "airflow_api_gate",
        200,
        7.5,
    )
    # an argument given to the operator wins over the section
    gate, _ = gate_and_sensor(airflow_conn_id="mine", page_size=50, api_timeout=3)
    assert (gate.airflow_conn_id, gate.page_size, gate.api_timeout) == ("mine", 50, 3.0)


@pytest.mark.parametrize(
    ("option", "value"),
    [("api_page_size", "0"), ("api_page_size", "lots"), ("api_timeout", "-1"),
     ("api_timeout", "nan"), ("default_conn_id", " ")],
)  # fmt: skip
def test_a_bad_value_names_the_option_and_the_value(
    monkeypatch: pytest.MonkeyPatch, option: str, value: str
) -> None:
    monkeypatch.setenv(env(option), value)
    with pytest.raises(ValueError, match=rf"\[retry_window\] {option} = '{value.strip()}'"):
        gate_and_sensor()


@pytest.mark.parametrize(
    ("option", "value"),
    [("clock_skew_tolerance", "-1"), ("clock_skew_tolerance", "301"),
     ("clock_skew_tolerance", "soon"), ("api_max_response_bytes", "10"),
     ("api_max_response_bytes", "16MB"), ("gate_timeout", "0"), ("gate_timeout", "inf"),
     ("sensor_short_wait", "-1"), ("sensor_short_wait", "61"), ("sensor_short_wait", "10s")],
)  # fmt: skip
def test_a_bad_clock_size_or_time_limit_names_the_option_and_the_value(
    monkeypatch: pytest.MonkeyPatch, option: str, value: str
) -> None:
    monkeypatch.setenv(env(option), value)
    with pytest.raises(ValueError, match=rf"\[retry_window\] {option} = '{value}' is not valid"):
        getattr(configuration, option)()


def test_the_clock_tolerance_size_cap_and_gate_timeout_come_from_the_section(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for option in ("clock_skew_tolerance", "api_max_response_bytes", "gate_timeout"):
        monkeypatch.delenv(env(option), raising=False)
    assert configuration.clock_skew_tolerance() == 5.0
    assert configuration.api_max_response_bytes() == 16 * 1024 * 1024
    assert configuration.gate_timeout() == 300.0
    monkeypatch.setenv(env("clock_skew_tolerance"), "0")
    monkeypatch.setenv(env("api_max_response_bytes"), "4096")
    monkeypatch.setenv(env("gate_timeout"), "12.5")
    assert configuration.clock_skew_tolerance() == 0.0
    assert configuration.gate_timeout() == 12.5
    monkeypatch.setenv(
        "AIRFLOW_CONN_RW_SETTINGS_API", '{"conn_type": "http", "host": "http://api"}'
    )
    assert AirflowApiHook("rw_settings_api").get_conn().max_response_bytes == 4096


def test_the_sensor_short_wait_comes_from_the_section_where_the_race_is_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow_retrywindow.sensors.retry_window import short_wait

    monkeypatch.delenv(env("sensor_short_wait"), raising=False)
    assert configuration.sensor_short_wait() == 10.0
    assert short_wait("3.3.2") == timedelta(seconds=10)
    monkeypatch.setenv(env("sensor_short_wait"), "2.5")
    assert short_wait("3.3.2") == timedelta(seconds=2.5)
    monkeypatch.setenv(env("sensor_short_wait"), "0")
    assert short_wait("3.3.2") == timedelta(0)
    # checked like any option, where the race is open
    monkeypatch.setenv(env("sensor_short_wait"), "ten")
    with pytest.raises(ValueError, match=r"\[retry_window\] sensor_short_wait = 'ten'"):
        short_wait("3.3.2")


def test_the_links_address_starts_from_the_view_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    key = SimpleNamespace(dag_id="d", run_id="r", task_id="gate", map_index=-1)
    link = RetryWindowLink()
    monkeypatch.delenv(env("view_base_url"), raising=False)
    monkeypatch.delenv("AIRFLOW__API__BASE_URL", raising=False)
    assert link.get_link(None, ti_key=key).startswith("http://localhost:8080/dags/d/runs/r/")  # type: ignore[arg-type]
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "https://api.example/")
    assert link.get_link(None, ti_key=key).startswith("https://api.example/dags/")  # type: ignore[arg-type]
    monkeypatch.setenv(env("view_base_url"), "https://airflow.example/ops/")
    assert link.get_link(None, ti_key=key).startswith("https://airflow.example/ops/dags/")  # type: ignore[arg-type]
