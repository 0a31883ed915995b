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
from airflow_retrywindow.breaker.settings import BreakerSettings
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


@pytest.mark.parametrize(
    ("option", "value"),
    [("api_retries", "0"), ("api_retries", "many"), ("api_retries", "101"),
     ("api_retry_wait_min", "-1"), ("api_retry_wait_max", "601"),
     ("clock_read_limit", "0"), ("clock_read_limit", "10"), ("clock_read_limit", "soon")],
)  # fmt: skip
def test_a_bad_read_retry_setting_names_the_option_and_the_value(
    monkeypatch: pytest.MonkeyPatch, option: str, value: str
) -> None:
    monkeypatch.setenv(env(option), value)
    reader = {
        "api_retries": configuration.api_retries,
        "api_retry_wait_min": configuration.api_retry_wait,
        "api_retry_wait_max": configuration.api_retry_wait,
        "clock_read_limit": configuration.clock_read_limit,
    }[option]
    with pytest.raises(ValueError, match=rf"\[retry_window\] {option} = '{value}' is not valid"):
        reader()


def test_read_retries_default_to_airflows_own_and_may_ask_for_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for option in ("api_retries", "api_retry_wait_min", "api_retry_wait_max", "clock_read_limit"):
        monkeypatch.delenv(env(option), raising=False)
    assert configuration.api_retries() == 5  # [workers] execution_api_retries
    assert configuration.api_retry_wait() == (1.0, 90.0)
    assert configuration.clock_read_limit() == 9.0
    monkeypatch.setenv(env("api_retries"), "8")
    monkeypatch.setenv(env("api_retry_wait_max"), "4")
    assert configuration.api_retries() == 8
    assert configuration.api_retry_wait() == (1.0, 4.0)
    monkeypatch.setenv(env("api_retry_wait_min"), "5")
    with pytest.raises(ValueError, match=r"api_retry_wait_max = 4.0 is not valid: at least"):
        configuration.api_retry_wait()


def test_the_clock_read_limit_stays_below_the_supervisors_heartbeat_tolerance(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # (max_failed_heartbeats - 1) x min_heartbeat_interval: the kill may come no sooner
    assert configuration.heartbeat_tolerance() == (3 - 1) * 5
    monkeypatch.setenv("AIRFLOW__WORKERS__MAX_FAILED_HEARTBEATS", "5")
    monkeypatch.setenv(env("clock_read_limit"), "19.5")
    assert configuration.heartbeat_tolerance() == 20
    assert configuration.clock_read_limit() == 19.5
    monkeypatch.setenv("AIRFLOW__WORKERS__MAX_FAILED_HEARTBEATS", "2")
    with pytest.raises(ValueError, match=r"clock_read_limit = '19.5' .* below 5"):
        configuration.clock_read_limit()
    # left empty, it follows the heartbeat: 1 s below what the supervisor tolerates
    monkeypatch.delenv(env("clock_read_limit"))
    assert configuration.clock_read_limit() == 4.0
    monkeypatch.setenv("AIRFLOW__WORKERS__MAX_FAILED_HEARTBEATS", "3")
    monkeypatch.setenv("AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL", "2")
    assert configuration.clock_read_limit() == 3.0
    monkeypatch.setenv("AIRFLOW__WORKERS__MAX_FAILED_HEARTBEATS", "1")
    with pytest.raises(ValueError, match=r"clock_read_limit = '' .* raise those two"):
        configuration.clock_read_limit()


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


#: a value each option's reader refuses; a new option gets its reader and a line here
BAD = {
    "breaker_pools": '{"positions_api": {"trip_calls": 0}}',
    "policy_checks": "disabled",
    "default_conn_id": " ",
    "api_page_size": "lots",
    "api_timeout": "-1",
    "clock_skew_tolerance": "soon",
    "api_max_response_bytes": "16MB",
    "gate_timeout": "0",
    "api_retries": "many",
    "api_retry_wait_min": "-1",
    "api_retry_wait_max": "601",
    "clock_read_limit": "soon",
    "sensor_short_wait": "61",
    "view_base_url": "airflow.example",
}


def test_every_option_has_one_reader_and_a_bad_value_here() -> None:
    assert set(configuration.READERS) == set(OPTIONS)
    assert set(BAD) == set(configuration.READERS), "add the new option's bad value to BAD"


def test_a_second_reader_or_an_undeclared_option_is_refused() -> None:
    with pytest.raises(ValueError, match="already has a reader"):
        configuration.reads("gate_timeout")(lambda: 1.0)
    with pytest.raises(ValueError, match="not declared"):
        configuration.reads("no_such_option")(lambda: 1.0)


def test_the_defaults_have_no_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    for option in OPTIONS:
        monkeypatch.delenv(env(option), raising=False)
    assert configuration.problems() == []
    configuration.check()  # does not raise


@pytest.mark.parametrize("option", sorted(BAD))
def test_problems_finds_each_bad_option_naming_setting_value_and_variable(
    monkeypatch: pytest.MonkeyPatch, option: str
) -> None:
    monkeypatch.setenv(env(option), BAD[option])
    (problem,) = configuration.problems()
    assert problem.option == option
    text = str(problem)
    assert f"[retry_window] {option} = {BAD[option].strip()!r} is not valid" in text
    assert env(option) in text
    with pytest.raises(configuration.SettingsInvalid, match=env(option)) as raised:
        configuration.check()
    assert [found.option for found in raised.value.problems] == [option]


def test_check_names_every_bad_option_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    for option, value in BAD.items():
        monkeypatch.setenv(env(option), value)
    with pytest.raises(configuration.SettingsInvalid) as raised:
        configuration.check()
    assert {found.option for found in raised.value.problems} == set(BAD)
    for option in BAD:
        assert env(option) in str(raised.value)


@pytest.mark.parametrize(
    ("option", "instead"),
    [
        ("dependency_pools", "use breaker_pools, which names each breaker pool"),
        ("dependency_round", "use the round of each pool in breaker_pools"),
        ("dependency_trip_tasks", "use the trip_calls of each pool in breaker_pools"),
        ("dependency_min_probes", "use nothing: an open breaker opens one probe slot a round"),
        ("dependency_window", "use nothing: a breaker counts each round since the round before"),
    ],
)
def test_a_retired_option_still_set_is_refused_naming_what_replaces_it(
    monkeypatch: pytest.MonkeyPatch, option: str, instead: str
) -> None:
    monkeypatch.setenv(env(option), "30")
    (problem,) = configuration.problems()
    assert problem.option == option
    assert f"[retry_window] {option} = '30' is not valid: it is gone; {instead}" in str(problem)
    assert env(option) in str(problem)
    with pytest.raises(AirflowClusterPolicyViolation, match=f"{option} = '30'"):
        task_policy(gated())


def test_a_breaker_pools_bad_setting_names_the_pool_and_its_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(env("breaker_pools"), '{"positions_api": {"round": 2}}')
    (problem,) = configuration.problems()
    assert "breaker_pools['positions_api'].round = 2 is not valid: a whole number from 5" in str(
        problem
    )
    monkeypatch.setenv(env("breaker_pools"), '{"default_pool": {}}')
    (problem,) = configuration.problems()
    assert "default_pool cannot be a breaker" in str(problem)
    monkeypatch.setenv(env("breaker_pools"), '{"positions_api": {"round": 30}, "warehouse": {}}')
    assert configuration.problems() == []
    named = configuration.breaker_pools()
    assert (named.of("positions_api"), named.of("warehouse"), named.of("other")) == (
        BreakerSettings(round=30), BreakerSettings(), None,
    )  # fmt: skip


def test_a_bad_setting_refuses_a_gated_dag_and_leaves_others_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(env("clock_skew_tolerance"), "soon")
    with pytest.raises(AirflowClusterPolicyViolation) as refused:
        task_policy(gated())
    text = str(refused.value)
    assert "[retry_window] clock_skew_tolerance = 'soon'" in text
    assert env("clock_skew_tolerance") in text
    with DAG("rw_settings_plain_bad", schedule=None, start_date=START):
        plain = EmptyOperator(task_id="plain")
    task_policy(plain)  # nobody else's task is touched


def test_a_bad_setting_under_warn_is_logged_and_the_dag_loads(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(env("policy_checks"), "warn")
    monkeypatch.setenv(env("gate_timeout"), "0")
    task = gated()
    with caplog.at_level(logging.WARNING):
        task_policy(task)
    assert "[retry_window] gate_timeout = '0'" in caplog.text
    assert isinstance(task._pre_execute_hook, RetryStartCheck)


def test_loading_the_cluster_policy_logs_each_bad_setting_and_does_not_raise(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import importlib

    from airflow_retrywindow.policies import cluster_policy

    monkeypatch.setenv(env("clock_skew_tolerance"), "soon")
    monkeypatch.setenv(env("api_page_size"), "0")
    with caplog.at_level(logging.ERROR, logger=cluster_policy.__name__):
        importlib.reload(cluster_policy)  # what each component does when it loads it
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2
    assert "clock_skew_tolerance = 'soon'" in errors[1] and env("clock_skew_tolerance") in errors[1]
    assert "api_page_size = '0'" in errors[0] and env("api_page_size") in errors[0]


def test_loading_the_cluster_policy_with_good_settings_logs_nothing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import importlib

    from airflow_retrywindow.policies import cluster_policy

    for option in OPTIONS:
        monkeypatch.delenv(env(option), raising=False)
    with caplog.at_level(logging.WARNING, logger=cluster_policy.__name__):
        importlib.reload(cluster_policy)
    assert caplog.records == []


def _context(task: Any, try_number: int) -> dict[str, Any]:
    from tests.policy.resumable_jobs import Store, TaskInstance

    now = pendulum.now("UTC")
    return {
        "task": task,
        "ti": TaskInstance(try_number, 2),
        "task_state_store": Store(),
        "data_interval_start": now.subtract(minutes=5),
        "data_interval_end": now,
        "dag": task.dag,
    }


def test_a_bad_setting_refuses_the_policy_decision_before_anything_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # no API server answers here: the refusal comes before the clock is read
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTION_API_SERVER_URL", "http://127.0.0.1:9/execution/")
    monkeypatch.setenv(env("api_page_size"), "0")  # an option the policy itself never reads
    task = gated()
    decision = task.retry_policy.evaluate(ConnectionError("reset"), 1, 2, _context(task, 1))
    assert decision.action.value == "fail"
    assert "api_page_size = '0'" in decision.reason
    assert env("api_page_size") in decision.reason


def test_a_bad_setting_refuses_the_retry_start_decision(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTION_API_SERVER_URL", "http://127.0.0.1:9/execution/")
    monkeypatch.setenv(env("view_base_url"), "airflow.example")
    task = gated()
    check = RetryStartCheck()
    refusal = check.refusal(_context(task, 2))  # try 2: nothing decided it
    assert refusal is not None and "view_base_url = 'airflow.example'" in refusal
    assert env("view_base_url") in refusal


def test_a_bad_setting_refuses_the_gate_and_sensor_decision(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow_retrywindow.exceptions import RetryWindowGateError
    from airflow_retrywindow.gate.run import decide_run

    gate, _ = gate_and_sensor()
    settings = gate.gate_settings()
    monkeypatch.setenv(env("api_timeout"), "-1")
    with pytest.raises(RetryWindowGateError, match=r"api_timeout = '-1'.*API_TIMEOUT"):
        decide_run(settings, {})  # refused before the context is read
