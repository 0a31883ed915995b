"""The plugin's Airflow-facing parts, without a running Airflow: registration, imports, the link."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import entry_points
from types import SimpleNamespace

import pytest

from airflow_retrywindow.links.addresses import ui_task_tab
from airflow_retrywindow.plugins.run_summary import Paging

IMPORTS = """
import json, sys
import {modules}
print(json.dumps(sorted(sys.modules)))
"""


def loaded_after(*modules: str) -> list[str]:
    """The modules a fresh interpreter holds after importing ``modules``."""
    done = subprocess.run(
        [sys.executable, "-c", IMPORTS.format(modules=", ".join(modules))],
        capture_output=True,
        text=True,
        check=True,
    )
    return list(json.loads(done.stdout.splitlines()[-1]))


def airflow_in(loaded: list[str]) -> list[str]:
    return [name for name in loaded if name.split(".")[0] in ("airflow", "fastapi")]


def test_rows_timeline_and_page_import_nothing_of_airflow() -> None:
    pure = [
        "airflow_retrywindow.links.addresses",
        "airflow_retrywindow.plugins.breaker_rows",
        "airflow_retrywindow.plugins.decision_rows",
        "airflow_retrywindow.plugins.page",
        "airflow_retrywindow.plugins.run_summary",
        "airflow_retrywindow.plugins.timeline",
        "airflow_retrywindow.records.breaker_state",
        "airflow_retrywindow.records.decision_record",
        "airflow_retrywindow.records.evidence_entry",
        "airflow_retrywindow.records.stored_fixture",
    ]
    assert airflow_in(loaded_after(*pure)) == []


def test_loading_the_plugin_does_not_load_the_api_server() -> None:
    # every Airflow process loads plugins, task processes included
    loaded = loaded_after(
        "airflow_retrywindow.plugins.plugin", "airflow_retrywindow.links.retry_window"
    )
    assert "airflow.api_fastapi.core_api.security" not in loaded
    assert "airflow_retrywindow.plugins.app" not in loaded
    assert "fastapi" not in loaded


def test_the_package_registers_the_plugin_where_airflow_looks() -> None:
    from airflow.plugins_manager import is_valid_plugin

    from airflow_retrywindow.plugins.plugin import RetryWindowPlugin

    (found,) = [
        item for item in entry_points(group="airflow.plugins") if item.name == "retry_window"
    ]
    assert found.load() is RetryWindowPlugin
    assert is_valid_plugin(RetryWindowPlugin)
    plugin = RetryWindowPlugin()
    (app,) = plugin.fastapi_apps
    assert app["url_prefix"] == "/retry-window"
    assert plugin.fastapi_apps[0]["app"] is app["app"]  # built once
    tabs = {view["destination"]: view for view in plugin.external_views}
    assert tabs["task_instance"]["href"] == (
        "/retry-window/dags/{DAG_ID}/runs/{RUN_ID}/tasks/{TASK_ID}?map_index={MAP_INDEX}"
    )
    assert tabs["dag_run"]["href"] == "/retry-window/dags/{DAG_ID}/runs/{RUN_ID}"
    assert tabs["task_instance"]["url_route"] != tabs["dag_run"]["url_route"]


def test_the_gate_and_the_sensor_carry_the_link() -> None:
    from airflow_retrywindow import RetryWindowGateOperator, RetryWindowSensor
    from airflow_retrywindow.get_provider_info import get_provider_info

    for operator in (RetryWindowGateOperator, RetryWindowSensor):
        assert [link.name for link in operator.operator_extra_links] == ["Retry window"]
    assert get_provider_info()["extra-links"] == [
        "airflow_retrywindow.links.retry_window.RetryWindowLink"
    ]


def test_the_link_opens_the_task_instance_tab(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_retrywindow.links.retry_window import RetryWindowLink

    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "https://airflow.example/base/")
    key = SimpleNamespace(
        dag_id="d", run_id="manual__2026-12-02T05:00:00+00:00", task_id="g", map_index=-1
    )
    assert RetryWindowLink().get_link(None, ti_key=key) == (  # type: ignore[arg-type]
        "https://airflow.example/base/dags/d/runs/manual__2026-12-02T05%3A00%3A00%2B00%3A00"
        "/tasks/g/plugin/retry-window"
    )
    assert ui_task_tab("http://h:8080", "d", "r", "g", 3).endswith(
        "/tasks/g/mapped/3/plugin/retry-window"
    )


@pytest.mark.parametrize(
    ("given", "index"), [("{MAP_INDEX}", -1), ("", -1), ("-1", -1), ("0", 0), ("12", 12)]
)
def test_map_index_from_the_tab_address(given: str, index: int) -> None:
    from airflow_retrywindow.plugins.app import _map_index

    assert _map_index(given) == index


@pytest.mark.parametrize("given", ["two", "-2", "1_0", " 3", "9999999999"])
def test_a_bad_map_index_is_refused_naming_it(given: str) -> None:
    from fastapi import HTTPException

    from airflow_retrywindow.plugins.app import _map_index

    with pytest.raises(HTTPException) as refused:
        _map_index(given)
    assert refused.value.status_code == 400
    assert refused.value.detail == f"map_index must be a whole number from -1 up, got {given!r}"


def test_tab_addresses_keep_the_base_path_of_airflow() -> None:
    from airflow_retrywindow.links.addresses import RUN_VIEW_HREF, under_base

    assert under_base("https://host/airflow/", RUN_VIEW_HREF) == (
        "/airflow/retry-window/dags/{DAG_ID}/runs/{RUN_ID}"
    )
    assert under_base("http://localhost:8080", RUN_VIEW_HREF) == RUN_VIEW_HREF


@pytest.mark.parametrize(("page", "limit"), [("0", "10"), ("two", "10"), ("1", "-5"), ("1", "")])
def test_a_bad_page_or_limit_is_refused_naming_it(page: str, limit: str) -> None:
    from fastapi import HTTPException

    from airflow_retrywindow.plugins.app import _paging

    with pytest.raises(HTTPException) as refused:
        _paging(page, limit)
    assert refused.value.status_code == 400
    named = "page" if page in ("0", "two") else "limit"
    assert str(refused.value.detail).startswith(f"{named} must be a whole number from 1 up")


def test_a_limit_over_the_most_rows_a_page_shows_is_capped() -> None:
    from airflow_retrywindow.plugins.app import _paging
    from airflow_retrywindow.plugins.run_summary import MAX_PAGE_ROWS

    assert _paging("3", "100000") == Paging(page=3, limit=MAX_PAGE_ROWS)
