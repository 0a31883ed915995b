"""The Retry window view's routes: a FastAPI application the API server mounts.

Every route is behind Airflow's own authentication and DAG-level authorization
(``requires_access_dag``, through :mod:`~airflow_retrywindow.airflow_internals`): the
UI's iframe sends the session cookie, API clients send a bearer token, and a user who may
not read the DAG's runs, task instances and XComs gets a 403 before anything of the DAG is
looked up.

Both pages show the run's breaker pools first: each one's breaker, as its description
holds it (:mod:`~airflow_retrywindow.plugins.breaker_rows`).

* ``GET /dags/{dag_id}/runs/{run_id}?page=&limit=``: every decision of the run; a
  task with many task instances and a record with many targets are summarised
  and paged (:mod:`~airflow_retrywindow.plugins.run_summary`);
* ``GET /dags/{dag_id}/runs/{run_id}/tasks/{task_id}?map_index=&page=&limit=``: one
  task instance (a record with many targets is paged);
* ``GET /dags/{dag_id}/runs/{run_id}/tasks/{task_id}/fixtures/{name}.json?map_index=``:
  a stored fixture, exactly as the model evaluated it.
"""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING, Annotated

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request, Response, status

from airflow_retrywindow import airflow_internals, configuration
from airflow_retrywindow.exceptions import RecordError
from airflow_retrywindow.links.addresses import MAP_INDEX_PLACEHOLDER, ViewLinks
from airflow_retrywindow.plugins.breaker_rows import Breakers, breakers, unknown_pool_note
from airflow_retrywindow.plugins.decision_rows import (
    GateRecord,
    gate_record,
    policy_rows,
    stored_fixture,
)
from airflow_retrywindow.plugins.page import fixture_json, run_page, task_page
from airflow_retrywindow.plugins.run_summary import (
    MAX_PAGE_ROWS,
    PAGE_ROWS,
    Paging,
    policy_sections,
    record_window,
)
from airflow_retrywindow.plugins.store import RunStore, Stored
from airflow_retrywindow.records.decision_record import look_alike_note

#: the page loads nothing and runs no script: the style sheet and the picture are inline
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        "form-action 'none'; base-uri 'none'; frame-ancestors 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

if TYPE_CHECKING:
    from sqlalchemy.orm import Session as SessionDep
else:
    # a route's argument FastAPI fills with the request's session (the API server's own)
    SessionDep = airflow_internals.api_session()

# the view shows runs, task instances and what they stored in XCom
_READ = [
    Depends(airflow_internals.dag_read_access(entity))
    for entity in (DagAccessEntity.RUN, DagAccessEntity.TASK_INSTANCE, DagAccessEntity.XCOM)
]
_MAP_INDEX = Annotated[str, Query(description="the task instance's map index; -1 when not mapped")]
_PAGE = Annotated[str, Query(description="which page of a summarised list, from 1")]
_LIMIT = Annotated[
    str, Query(description=f"rows of a summarised list per page, 1 to {MAX_PAGE_ROWS}")
]

_WHOLE = re.compile(r"-?[0-9]{1,9}")

router = APIRouter(dependencies=_READ)


@router.get("/dags/{dag_id}/runs/{run_id}")
def run_view(
    *,
    dag_id: str,
    run_id: str,
    request: Request,
    session: SessionDep,
    page: _PAGE = "1",
    limit: _LIMIT = str(PAGE_ROWS),
) -> Response:
    """Every decision of one DAG run; many task instances of one task are summarised."""
    paging = _paging(page, limit)
    store = _run(session, dag_id, run_id)
    policy, summaries = policy_sections(
        [(stored.task_id, stored.map_index, stored.value) for stored in store.policy_evidence()],
        paging,
    )
    published, look_alikes = store.return_values()
    page_html = run_page(
        _links(request, dag_id, run_id),
        policy=policy,
        records=[_record(stored, paging) for stored in published],
        summaries=summaries,
        paging=paging,
        notes=[look_alike_note(stored.task_id, stored.map_index) for stored in look_alikes],
        breakers=_breakers(store),
    )
    return _page(page_html)


@router.get("/dags/{dag_id}/runs/{run_id}/tasks/{task_id}")
def task_view(
    *,
    dag_id: str,
    run_id: str,
    task_id: str,
    request: Request,
    session: SessionDep,
    map_index: _MAP_INDEX = "-1",
    page: _PAGE = "1",
    limit: _LIMIT = str(PAGE_ROWS),
) -> Response:
    """The decisions about one task instance, and its own decision record."""
    index = _map_index(map_index)
    paging = _paging(page, limit)
    store = _task_instance(session, dag_id, run_id, task_id, index)
    policy = [
        row
        for stored in store.policy_evidence(task_id, index)
        for row in policy_rows(task_id, index, stored.value)
    ]
    published, look_alikes = store.return_values(task_id, index)
    page_html = task_page(
        _links(request, dag_id, run_id),
        task_id=task_id,
        map_index=index,
        policy=policy,
        records=[_record(stored, paging) for stored in published],
        paging=paging,
        notes=[look_alike_note(stored.task_id, stored.map_index) for stored in look_alikes],
        breakers=_breakers(store),
    )
    return _page(page_html)


@router.get("/dags/{dag_id}/runs/{run_id}/tasks/{task_id}/fixtures/{name}.json")
def fixture_file(
    *,
    dag_id: str,
    run_id: str,
    task_id: str,
    name: str,
    session: SessionDep,
    map_index: _MAP_INDEX = "-1",
) -> Response:
    """A stored fixture, as the file ``airflow-retrywindow evaluate`` replays."""
    index = _map_index(map_index)
    store = _task_instance(session, dag_id, run_id, task_id, index)
    evidence = store.policy_evidence(task_id, index)
    records = store.decision_records(task_id, index)
    try:
        found = stored_fixture(
            name,
            task_id=task_id,
            map_index=index,
            evidence=evidence[0].value if evidence else None,
            record=records[0].value if records else None,
        )
    except RecordError as error:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(error)) from None
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no stored fixture {name!r}")
    filename, fixture = found
    return Response(
        fixture_json(fixture),
        media_type="application/json",
        headers={**SECURITY_HEADERS, "Content-Disposition": f'attachment; filename="{filename}"'},
    )


@cache
def view_app() -> FastAPI:
    """The view's application, built once per process."""
    app = FastAPI(
        title="Retry window",
        description="Every retry window decision of a DAG run, with its timeline and fixture.",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.include_router(router)
    return app


def _record(stored: Stored, paging: Paging) -> GateRecord:
    """A decision record; one with many targets is read one page of targets at a time."""
    window = record_window(stored.value, paging)
    return gate_record(stored.task_id, stored.map_index, stored.value, window=window)


def _breakers(store: RunStore) -> Breakers:
    """The run's breaker pools, and what is wrong with ``[retry_window] breaker_pools``,
    read as the workers read it."""
    try:
        named = configuration.breaker_pools()
    except ValueError as error:
        return Breakers(setting_problems=(str(error),))
    problems = []
    if named.pools:  # nothing named: no query
        existing = store.pool_names()
        problems = [unknown_pool_note(name) for name in sorted(named.pools) if name not in existing]
    return breakers(store.run_pools(), named, problems)


def _paging(page: str, limit: str) -> Paging:
    """The ``page`` and ``limit`` query parameters, checked."""
    for name, text in (("page", page), ("limit", limit)):
        if _WHOLE.fullmatch(text) is None or int(text) < 1:
            raise HTTPException(
                status.HTTP_400_BAD_REQUEST,
                f"{name} must be a whole number from 1 up, got {text[:40]!r}",
            )
    return Paging(page=int(page), limit=min(int(limit), MAX_PAGE_ROWS))


def _map_index(text: str) -> int:
    """The ``map_index`` query parameter; the UI leaves its placeholder for unmapped tasks."""
    if text in ("", MAP_INDEX_PLACEHOLDER):
        return -1
    if _WHOLE.fullmatch(text) is None or int(text) < -1:
        raise HTTPException(
            status.HTTP_400_BAD_REQUEST,
            f"map_index must be a whole number from -1 up, got {text[:40]!r}",
        )
    return int(text)


def _run(session: SessionDep, dag_id: str, run_id: str) -> RunStore:
    store = RunStore(session, dag_id, run_id)
    if not store.run_exists():
        raise HTTPException(status.HTTP_404_NOT_FOUND, "DAG run not found")
    return store


def _task_instance(
    session: SessionDep, dag_id: str, run_id: str, task_id: str, map_index: int
) -> RunStore:
    store = _run(session, dag_id, run_id)
    if not store.task_instance_exists(task_id, map_index):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "task instance not found")
    return store


def _links(request: Request, dag_id: str, run_id: str) -> ViewLinks:
    # the path the API server mounted the view at, with [api] base_url's path in front
    return ViewLinks(str(request.scope.get("root_path", "")).rstrip("/"), dag_id, run_id)


def _page(html: str) -> Response:
    return Response(html, media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS)
