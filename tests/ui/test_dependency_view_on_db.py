"""The view's pools as dependencies, read from a real metadata DB by the view's own routes.

The test session's throwaway metadata DB (migrated by ``airflow db migrate``) gets
one DAG run whose task instances keep what a held, probing or released retry
stores under ``retry_window_dependency``: in the task state store (JSON text, as
Airflow keeps it) and in XCom, written with :class:`DependencyRecord` itself.
The view's routes are then called in-process with a session of that DB, through
the view's real store; Airflow's authentication is left out (it is Airflow's,
and the same for every page).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pendulum
import pytest

from tests.records.test_dependency_state import AT, HELD, held

pytestmark = [pytest.mark.airflow]

DAG_ID = "rw_dependency_view"
KEY = "retry_window_dependency"


def _stored(task_id: str, map_index: int, *, store: Any = None, xcom: Any = None) -> dict[str, Any]:
    return {"task_id": task_id, "map_index": map_index, "store": store, "xcom": xcom}


#: per task instance, what it keeps in the task state store and in XCom
KEPT = [
    # positions_api: three held tries; load[1] read last, its store holds a newer value
    # than its XCom (the store is read first, as for the policy's decisions)
    _stored("load", 0, xcom=held(read_at=AT.subtract(seconds=40), held=3).as_dict()),
    _stored(
        "load",
        1,
        store=json.dumps(held(read_at=AT, held=10).as_dict()),
        xcom=held(read_at=AT.subtract(seconds=90), held=1).as_dict(),
    ),
    _stored(
        "load",
        2,
        xcom=held(
            read_at=AT.subtract(seconds=5),
            held=9,
            action="probe",
            decision="retry-eligible",
            hold_until=None,
        ).as_dict(),
    ),
    # legacy_db: closed, read by a task of its own
    _stored(
        "archive",
        -1,
        xcom=held(
            pool="legacy_db",
            state="closed",
            action="run",
            decision="retry-eligible",
            failing_since=None,
            hold_until=None,
            failing_tasks=0,
            successes=4,
        ).as_dict(),
    ),
    # a newer shape than this release reads, and a value a user pushed under the key
    _stored("report", -1, xcom={**HELD, "version": 2}),
    _stored("notify", -1, store=json.dumps("<b>not a record</b>")),
    # a pool whose name and reason hold markup and a credential
    _stored(
        "fetch",
        -1,
        xcom=held(
            pool='<img src=x onerror="alert(1)">',
            reason="dependency-held: https://ops:hunter2@status.example/<script>",
        ).as_dict(),
    ),
]


@pytest.fixture(scope="module")
def run_id(airflow_db: Path) -> Iterator[str]:
    """One DAG run with the task instances of :data:`KEPT` and what they keep."""
    from airflow.models.dagrun import DagRun
    from airflow.models.task_state_store import TaskStateStoreModel
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import insert, select

    run = f"manual__{uuid.uuid4().hex}"
    now = pendulum.now("UTC")
    with create_session() as session:
        session.execute(
            insert(DagRun.__table__).values(
                dag_id=DAG_ID, run_id=run, run_type="manual", run_after=now, state="running"
            )
        )
        run_pk = session.scalar(select(DagRun.id).where(DagRun.run_id == run))
        session.execute(
            insert(TaskInstance.__table__),
            [
                {
                    "id": uuid.uuid4(),
                    "task_id": item["task_id"],
                    "dag_id": DAG_ID,
                    "run_id": run,
                    "map_index": item["map_index"],
                    "state": "up_for_reschedule",
                    "try_number": 2,
                    "max_tries": 3,
                    "pool": "positions_api",
                    "pool_slots": 1,
                }
                for item in KEPT
            ],
        )
        keys = {"dag_run_id": run_pk, "dag_id": DAG_ID, "run_id": run}
        stores = [item for item in KEPT if item["store"] is not None]
        xcoms = [item for item in KEPT if item["xcom"] is not None]
        session.execute(
            insert(TaskStateStoreModel.__table__),
            [
                {
                    **keys,
                    "task_id": item["task_id"],
                    "map_index": item["map_index"],
                    "key": KEY,
                    "value": item["store"],
                }
                for item in stores
            ],
        )
        session.execute(
            insert(XComModel.__table__),
            [
                {
                    **keys,
                    "task_id": item["task_id"],
                    "map_index": item["map_index"],
                    "key": KEY,
                    "value": item["xcom"],
                    "timestamp": now,
                }
                for item in xcoms
            ],
        )
    yield run


def _page(run_id: str, task_id: str | None = None, map_index: str = "-1") -> str:
    from airflow.utils.session import create_session
    from starlette.requests import Request

    from airflow_retrywindow.plugins import app

    request = Request({"type": "http", "root_path": "/retry-window", "headers": []})
    with create_session() as session:
        if task_id is None:
            answer = app.run_view(dag_id=DAG_ID, run_id=run_id, request=request, session=session)
        else:
            answer = app.task_view(
                dag_id=DAG_ID, run_id=run_id, task_id=task_id, request=request,
                session=session, map_index=map_index,
            )  # fmt: skip
    assert answer.status_code == 200
    return bytes(answer.body).decode()


def test_the_store_reads_the_state_store_first_then_xcom(run_id: str) -> None:
    from airflow.utils.session import create_session

    from airflow_retrywindow.plugins.store import RunStore

    with create_session() as session:
        found = RunStore(session, DAG_ID, run_id).dependency_states()
    by_place = {(item.task_id, item.map_index): item.value for item in found}
    assert sorted(by_place) == sorted((item["task_id"], item["map_index"]) for item in KEPT)
    assert by_place[("load", 1)] == held(read_at=AT, held=10).as_dict()  # the store's, not XCom's
    assert by_place[("load", 0)]["held"] == 3  # from XCom: the store holds nothing for it
    assert by_place[("notify", -1)] == "<b>not a record</b>"


def test_the_run_page_shows_each_pools_latest_state(run_id: str) -> None:
    page = _page(run_id)
    assert "<h2>Dependencies · 3 pools</h2>" in page
    assert 'data-pool="positions_api" data-state="open"' in page
    assert 'data-pool="legacy_db" data-state="closed"' in page
    # the latest of positions_api is load[1]'s store value, read at 14:02:11
    assert "<dt>In a retry</dt><dd>10 task instances held or under way now</dd>" in page
    assert "by load[1], try 2: hold, held until 2026-12-04 14:03:00 UTC" in page
    assert "<dt>Failing since</dt><dd>2026-12-04 14:00:03 UTC</dd>" in page
    assert "12 task instances, 0 successes since it began" in page
    assert "<dt>Next probe</dt><dd>2026-12-04 14:03:00 UTC</dd>" in page
    assert "0 task instances, 4 successes since it began" in page
    # what cannot be read is said, naming the task instance, the field and the value
    assert "report (retry_window_dependency): version must be 1, got 2" in page
    assert "notify (retry_window_dependency): the stored value must be an object" in page


def test_a_task_instance_page_shows_its_own_record_beside_its_pools_latest(run_id: str) -> None:
    page = _page(run_id, "load", "0")
    assert "<h2>Dependencies · 3 pools</h2>" in page
    assert (
        "This task instance&#39;s latest, read 2026-12-04 14:01:31 UTC: try 2 hold, "
        "held until 2026-12-04 14:03:00 UTC (dependency-held)"
    ) in page
    probe = _page(run_id, "load", "2")
    assert "This task instance&#39;s latest, read 2026-12-04 14:02:06 UTC: try 2 probe " in probe


def test_stored_markup_and_credentials_never_reach_the_page(run_id: str) -> None:
    for page in (_page(run_id), _page(run_id, "fetch")):
        assert "<img" not in page and "<script>" not in page and "<b>not" not in page
        assert "hunter2" not in page
        assert 'data-pool="&lt;img src=x onerror=&#34;alert(1)&#34;&gt;"' in page


def test_a_dependency_pools_name_that_is_no_pool_is_said_on_the_runs_pages(
    run_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.models.pool import Pool
    from airflow.utils.session import create_session
    from sqlalchemy import delete

    with create_session() as session:
        session.add(Pool(pool="positions_api", slots=4, include_deferred=False))
    try:
        named = {"positions_api": {"round": 30}, "postions_api": "off"}
        monkeypatch.setenv("AIRFLOW__RETRY_WINDOW__DEPENDENCY_POOLS", json.dumps(named))
        for page in (_page(run_id), _page(run_id, "load", "0")):
            assert (
                "[retry_window] dependency_pools names &#39;postions_api&#39;, which is no "
                "pool: its setting applies to nothing."
            ) in page
            assert "names &#39;positions_api&#39;" not in page  # it exists
        # a value the workers cannot use is said too, as they would say it
        monkeypatch.setenv("AIRFLOW__RETRY_WINDOW__DEPENDENCY_POOLS", '["positions_api"]')
        assert "dependency_pools" in _page(run_id).split('class="problem setting">', 1)[1]
    finally:
        with create_session() as session:
            session.execute(delete(Pool).where(Pool.pool == "positions_api"))


def test_without_dependency_pools_the_pages_say_nothing_of_the_settings(run_id: str) -> None:
    assert 'class="problem setting"' not in _page(run_id)
