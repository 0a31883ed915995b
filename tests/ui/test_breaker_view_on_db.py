"""The view's breakers, read from the pools of a real metadata DB by the view's own routes.

The test session's throwaway metadata DB (migrated by ``airflow db migrate``) gets pools
whose descriptions carry a breaker's line as the controller writes it (with
:class:`BreakerState` itself), and one DAG run whose task instances use them. The view's
routes are then called in-process with a session of that DB, through the view's real
store; Airflow's authentication is left out (it is Airflow's, and the same for every page).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pendulum
import pytest

from tests.breaker.states import closed, opened

pytestmark = [pytest.mark.airflow]

DAG_ID = "rw_breaker_view"
MARKUP = '<img src=x onerror="alert(1)">'
#: pool -> (slots, description), as the controller (or nobody) left them
POOLS = {
    # open: no slot, one probe started
    "positions_api": (0, opened().described("Positions API, 24 calls at once")),
    # closed, at its owner's size
    "legacy_db": (8, closed("legacy_db", size=8).described(None)),
    # a breaker pool no controller has written to yet
    "warehouse": (16, "the warehouse"),
    # a pool that carries another pool's line (copied from it): not its breaker
    "copied_db": (4, opened().described(None)),
    # a pool that is no breaker pool, whatever its description says
    "plain_db": (6, opened("plain_db").described(None)),
    # a breaker whose name and reason hold markup and a credential
    MARKUP: (
        0,
        replace(
            opened(MARKUP), reason="refused: https://ops:hunter2@status.example/<script>"
        ).described(None),
    ),
}
#: a breaker pool of the deployment that no task of the run uses
ELSEWHERE = "reports_api"
NAMED = {name: {} for name in ("positions_api", "legacy_db", "warehouse", "copied_db", MARKUP)}
SETTING = "AIRFLOW__RETRY_WINDOW__BREAKER_POOLS"


@pytest.fixture(scope="module")
def run_id(airflow_db: Path) -> Iterator[str]:
    """One DAG run with a task instance in each pool of :data:`POOLS`."""
    from airflow.models.dagrun import DagRun
    from airflow.models.pool import Pool
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import delete, insert

    run = f"manual__{uuid.uuid4().hex}"
    elsewhere = opened(ELSEWHERE).described(None)
    with create_session() as session:
        for name, (slots, description) in {**POOLS, ELSEWHERE: (0, elsewhere)}.items():
            session.add(
                Pool(pool=name, slots=slots, description=description, include_deferred=False)
            )
        session.execute(
            insert(DagRun.__table__).values(
                dag_id=DAG_ID, run_id=run, run_type="manual", run_after=pendulum.now("UTC"),
                state="running",
            )
        )  # fmt: skip
        session.execute(
            insert(TaskInstance.__table__),
            [
                {
                    "id": uuid.uuid4(),
                    "task_id": f"call_{number}",
                    "dag_id": DAG_ID,
                    "run_id": run,
                    "map_index": -1,
                    "state": "scheduled",
                    "try_number": 1,
                    "max_tries": 3,
                    "pool": name,
                    "pool_slots": 1,
                }
                for number, name in enumerate(POOLS)
            ],
        )
    yield run
    with create_session() as session:
        session.execute(delete(Pool).where(Pool.pool.in_([*POOLS, ELSEWHERE])))


def _page(run_id: str, task_id: str | None = None) -> str:
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
                session=session, map_index="-1",
            )  # fmt: skip
    assert answer.status_code == 200
    return bytes(answer.body).decode()


@pytest.fixture
def named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SETTING, json.dumps(NAMED))


def test_the_store_reads_the_runs_pools_with_their_size_and_description(run_id: str) -> None:
    from airflow.utils.session import create_session

    from airflow_retrywindow.plugins.store import RunStore

    with create_session() as session:
        found = RunStore(session, DAG_ID, run_id).run_pools()
    # the run's pools only, in one query: reports_api is used by no task of the run
    assert sorted(found) == sorted((name, *kept) for name, kept in POOLS.items())


@pytest.mark.usefixtures("named")
def test_the_run_page_shows_each_breaker_pool_of_the_run_as_its_description_holds_it(
    run_id: str,
) -> None:
    page = _page(run_id)
    assert "<h2>Breakers · 5 pools</h2>" in page
    assert 'data-pool="positions_api" data-phase="open"' in page
    assert "Pool positions_api: open since 14:00:03Z, 0 of 24 slots; last probe 14:02:11Z" in page
    assert '<p class="reason">3 calls refused, none served</p>' in page
    assert "<dt>Slots</dt><dd>0 of 24</dd>" in page
    assert "<dt>Since</dt><dd>2026-12-04 14:00:03 UTC</dd>" in page
    assert (
        "<dt>Last probe</dt><dd>2026-12-04 14:02:11 UTC, started (1 since it opened)</dd>" in page
    )
    assert "<dt>Next probe</dt><dd>2026-12-04 14:03:11 UTC</dd>" in page
    assert 'data-pool="legacy_db" data-phase="closed"' in page
    assert "<dt>Slots</dt><dd>8 of 8</dd>" in page
    # no controller wrote to it yet, or the line it carries is another pool's: said so
    for unwatched in ("warehouse", "copied_db"):
        assert f'data-pool="{unwatched}" data-phase="unwatched"' in page
    assert "16 slots, as the pool&#39;s owner set them" in page
    assert "No controller has watched this pool yet" in page
    # a pool that is no breaker pool is left out, and so is one the run does not use
    assert 'data-pool="plain_db"' not in page and ELSEWHERE not in page


@pytest.mark.usefixtures("named")
def test_a_task_instance_page_shows_the_runs_breakers_too(run_id: str) -> None:
    page = _page(run_id, "call_0")
    assert "<h2>Breakers · 5 pools</h2>" in page
    assert 'data-pool="positions_api" data-phase="open"' in page


@pytest.mark.usefixtures("named")
def test_stored_markup_and_credentials_never_reach_the_page(run_id: str) -> None:
    for page in (_page(run_id), _page(run_id, "call_5")):
        assert "<img" not in page and "<script>" not in page
        assert "hunter2" not in page
        assert 'data-pool="&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" data-phase="open"' in page


def test_a_breaker_pools_name_that_is_no_pool_is_said_on_the_runs_pages(
    run_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SETTING, json.dumps({**NAMED, "postions_api": {}}))
    for page in (_page(run_id), _page(run_id, "call_0")):
        assert (
            "[retry_window] breaker_pools names &#39;postions_api&#39;, which is no pool: its "
            "breaker holds nothing. Correct the name, or create the pool."
        ) in page
        assert "names &#39;positions_api&#39;" not in page  # it exists
    # a value the workers cannot use is said too, as they would say it
    monkeypatch.setenv(SETTING, '["positions_api"]')
    problem = _page(run_id).split('class="problem setting">', 1)[1]
    assert problem.startswith("[retry_window] breaker_pools = ")


def test_without_breaker_pools_the_pages_show_no_breaker(
    run_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SETTING, raising=False)
    page = _page(run_id)
    assert 'class="problem setting"' not in page
    assert '<section class="breakers">' not in page
