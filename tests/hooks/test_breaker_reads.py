"""The reads and the one write a breaker makes, against the local imitation of Airflow's API.

The controller reads every pool, on-call's Variables, a count of failure marks and the
controller's own task; it writes a pool's slots and description. Each is one request, and
each is checked here for what it sends and what it makes of the answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta

import pytest

from airflow_retrywindow.exceptions import AirflowApiError
from airflow_retrywindow.hooks.airflow_api import AirflowApiHook
from airflow_retrywindow.hooks.api_reader import AirflowApi, PoolRow
from tests.breaker.states import opened
from tests.hooks.fake_api import (
    START,
    FakeAirflowApi,
    pool,
    serve,
    stamp,
    task_instance,
    xcom_entry,
)

MARK = "retry_window.breaker_failure.positions_api"


@pytest.fixture
def api() -> FakeAirflowApi:
    return FakeAirflowApi(
        pools=[
            pool("positions_api", 24, occupied=3, description=opened().described("Positions")),
            pool("reports api/v2", 4),
            pool("warehouse", 8, description="the warehouse"),
        ]
    )


@pytest.fixture
def reader(api: FakeAirflowApi, monkeypatch: pytest.MonkeyPatch) -> Iterator[AirflowApi]:
    for served in serve(api):
        monkeypatch.setenv("AIRFLOW_CONN_RW_BREAKER", served.connection())
        yield AirflowApiHook("rw_breaker", page_size=2).get_conn()


def _sent(api: FakeAirflowApi) -> list[tuple[str, str]]:
    """(method, path) of each request after the token."""
    return [(each.method, each.path) for each in api.received if each.path != "/auth/token"]


def test_every_pool_is_read_with_its_description(reader: AirflowApi, api: FakeAirflowApi) -> None:
    found = reader.pools()
    assert sorted(found) == ["positions_api", "reports api/v2", "warehouse"]
    assert found["positions_api"] == PoolRow(
        "positions_api", 24, 3, 0, 21, False, opened().described("Positions")
    )
    assert found["reports api/v2"].description is None
    assert reader.requests == 1 + 2  # a token, then 3 pools in pages of 2
    assert reader.pools(()) == {}  # none asked for: no request
    assert reader.requests == 3


def test_one_pool_is_read_by_its_name_and_a_pool_that_is_none_is_none(
    reader: AirflowApi, api: FakeAirflowApi
) -> None:
    row = reader.pool("reports api/v2")
    assert row is not None and (row.name, row.slots) == ("reports api/v2", 4)
    assert reader.pool("gone") is None
    assert _sent(api) == [
        ("GET", "/api/v2/pools/reports%20api%2Fv2"),
        ("GET", "/api/v2/pools/gone"),
    ]
    api.refuse_every_token = True  # any other refusal is an error, not "no pool"
    with pytest.raises(AirflowApiError, match="pool 'warehouse'"):
        reader.pool("warehouse")


def test_a_pools_slots_and_description_are_set_in_one_patch_that_names_the_pool(
    reader: AirflowApi, api: FakeAirflowApi
) -> None:
    described = opened("reports api/v2", size=4).described("the reports API")
    (before,) = reader.pools({"reports api/v2"}).values()
    row = reader.set_pool(before, 0, described)
    assert (row.name, row.slots, row.open, row.description) == ("reports api/v2", 0, 0, described)
    (sent,) = [each for each in api.received if each.method == "PATCH"]
    assert sent.path == "/api/v2/pools/reports%20api%2Fv2"
    assert sent.query["update_mask"] == ["slots", "description"]
    # the whole pool, as read: what the mask does not name is not changed
    assert sent.body == {
        "name": "reports api/v2", "slots": 0, "description": described, "include_deferred": False,
    }  # fmt: skip
    assert reader.requests == 1 + 2 + 1  # the token, the pools in pages of 2, the change
    # what the pool holds now, as every reader reads it
    assert reader.pools({"reports api/v2"})["reports api/v2"] == row
    with pytest.raises(AirflowApiError, match="the size of pool 'gone'"):
        reader.set_pool(replace(before, name="gone"), 4, "")


def test_the_failure_marks_of_a_pool_are_counted_from_a_moment_on_in_one_request(
    reader: AirflowApi, api: FakeAirflowApi
) -> None:
    def mark(seconds: int, key: str = MARK) -> dict[str, object]:
        entry = xcom_entry(f"call_{seconds}", key)
        return {**entry, "timestamp": stamp(START + timedelta(seconds=seconds))}

    api.xcoms = [mark(5), mark(30), mark(31), mark(90), mark(40, key=MARK + "_v2")]
    wide = AirflowApiHook("rw_breaker", page_size=10).get_conn()
    assert wide.xcom_count(MARK, START + timedelta(seconds=30)) == 3  # at 30 s, 31 s, 90 s
    assert wide.xcom_count(MARK, START + timedelta(seconds=91)) == 0
    assert wide.requests == 1 + 2  # one request each, whatever the marks
    # the newest page only: a page of 2 counts 2 of the 3, in one request still
    assert reader.xcom_count(MARK, START + timedelta(seconds=30)) == 2
    assert reader.requests == 1 + 1
    (sent, *_again) = [each for each in api.received if each.path.endswith("/xcomEntries")]
    assert sent.path == "/api/v2/dags/~/dagRuns/~/taskInstances/~/xcomEntries"
    assert sent.query["xcom_key"] == [MARK]
    assert sent.query["order_by"] == ["-timestamp"]


def test_the_variables_of_a_prefix_are_read_by_key(reader: AirflowApi, api: FakeAirflowApi) -> None:
    api.variables = {
        "retry_window_breaker_positions_api": "open",
        "retry_window_breaker_warehouse": "closed",
        "retry_window_breaker_reports": "",
        "old_retry_window_breaker_positions_api": "open",  # found by the search, not ours
        "unrelated": "x",
    }
    assert reader.variables("retry_window_breaker_") == {
        "retry_window_breaker_positions_api": "open",
        "retry_window_breaker_reports": "",
        "retry_window_breaker_warehouse": "closed",
    }
    assert reader.requests == 1 + 2  # 4 found by the search, in pages of 2
    sent = [each for each in api.received if each.path == "/api/v2/variables"]
    assert {each.query["variable_key_pattern"][0] for each in sent} == {"retry_window_breaker_"}


def test_the_task_instances_of_one_task_in_some_states_are_counted_in_one_request(
    reader: AirflowApi, api: FakeAirflowApi
) -> None:
    def row(dag_id: str, task_id: str, state: str) -> dict[str, object]:
        return {**task_instance(task_id, dag_id=dag_id), "state": state}

    api.task_instances = [
        row("retry_window_pool_breakers", "control", "deferred"),
        row("retry_window_pool_breakers", "control", "success"),
        row("retry_window_pool_breakers", "other", "deferred"),
        row("etl", "control", "deferred"),
    ]
    count = reader.task_instance_count(
        "retry_window_pool_breakers", "control", {"running", "deferred"}
    )
    assert count == 1
    assert reader.requests == 1 + 1
    (sent,) = [each for each in api.received if each.path.endswith("/taskInstances")]
    assert sent.path == "/api/v2/dags/retry_window_pool_breakers/dagRuns/~/taskInstances"
    assert sent.query["task_id"] == ["control"]
    assert sent.query["state"] == ["deferred", "running"]
    assert sent.query["limit"] == ["0"]  # a count: no row is sent
