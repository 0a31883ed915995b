"""A REST API reader answered from memory, for the gate's stages without a server."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

import pendulum

from airflow_retrywindow.dependency.fleet import DependencyState, PoolListing, PoolTry
from airflow_retrywindow.dependency.pool_read import read_pool
from airflow_retrywindow.dependency.settings import DependencySettings
from airflow_retrywindow.hooks.api_reader import PoolRow, TaskInstanceRow, XComKey


def pool_row(name: str = "db", slots: int = 2, occupied: int = 0) -> PoolRow:
    return PoolRow(name, slots, occupied, 0, slots - occupied, False)


class FakeReader:
    """The reads of ``AirflowApiHook(...).get_conn()``, answered from memory and logged."""

    def __init__(
        self,
        rows: list[TaskInstanceRow],
        *,
        tries: Mapping[str, list[TaskInstanceRow]] | None = None,
        keys: list[XComKey] | None = None,
        values: Mapping[str, Any] | None = None,
        pools: Mapping[str, PoolRow] | None = None,
        pool_tries: Mapping[str, list[PoolTry] | Exception] | None = None,
    ) -> None:
        self.rows, self.tries, self.keys = rows, tries or {}, keys or []
        self.values = values or {}
        self.pool_rows = {"db": pool_row()} if pools is None else pools
        # pool -> its task instances across DAGs, or what reading them raises
        self.pool_try_rows = pool_tries or {}
        self.calls: list[tuple[Any, ...]] = []
        self.requests = 1  # the token
        self.base_url = "http://api:8080"

    def _made(self, *call: Any) -> None:
        self.calls.append(call)
        self.requests += 1

    def task_instances(
        self, dag_id: str, run_id: str, task_ids: Collection[str]
    ) -> list[TaskInstanceRow]:
        self._made("task_instances", dag_id, run_id, sorted(task_ids))
        return self.rows

    def task_tries(
        self, dag_id: str, run_id: str, task_id: str, map_index: int = -1
    ) -> list[TaskInstanceRow]:
        self._made("task_tries", task_id, map_index)
        return [row for row in self.tries.get(task_id, []) if row.map_index == map_index]

    def xcom_keys(self, dag_id: str, run_id: str, key_prefix: str) -> list[XComKey]:
        self._made("xcom_keys", key_prefix)
        return self.keys

    def xcom_value(
        self, dag_id: str, run_id: str, task_id: str, key: str, map_index: int = -1
    ) -> Any:
        self._made("xcom_value", task_id, key, map_index)
        return self.values.get(task_id if map_index < 0 else f"{task_id}[{map_index}]")

    def pools(self, names: Collection[str]) -> dict[str, PoolRow]:
        self._made("pools", sorted(names))
        return {name: row for name, row in self.pool_rows.items() if name in names}

    def pool_listing(
        self,
        pool: str,
        states: Collection[str],
        *,
        try_numbers: Collection[int] = (),
        ended_since: datetime | None = None,
        order_by: str = "id",
        limit: int = 0,
    ) -> PoolListing:
        """The REST API's listing of ``pool``'s task instances, filtered as the API filters."""
        self._made("pool_listing", pool, sorted(states))
        found = self.pool_try_rows.get(pool, [])
        if isinstance(found, Exception):
            raise found
        matched = [
            item
            for item in found
            if item.state in states
            and (not try_numbers or item.try_number in try_numbers)
            and (
                ended_since is None or (item.end_date is not None and item.end_date >= ended_since)
            )
        ]
        return PoolListing(tuple(ordered(matched, order_by)[:limit]), len(matched))


def ordered(tries: list[PoolTry], order_by: str) -> list[PoolTry]:
    """``tries`` in the listing's order: ``id`` is the order they were made in (here, the
    list's), ``-end_date`` the newest end first."""
    if order_by == "-end_date":
        return sorted(tries, key=lambda item: item.end_date or NEVER, reverse=True)
    return list(tries)


NEVER = pendulum.datetime(1970, 1, 1)


def pool_state(
    pool: str,
    read_at: pendulum.DateTime,
    tries: Sequence[PoolTry],
    *,
    forced: str | None = None,
    settings: DependencySettings | None = None,
) -> DependencyState:
    """``pool``'s state as one read of the REST API's listings of ``tries`` gives it."""
    settings = settings or DependencySettings()
    reader = FakeReader([], pool_tries={pool: list(tries)})
    return read_pool(reader, pool, settings, forced=forced, now=read_at).state(settings)
