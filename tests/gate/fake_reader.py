"""A REST API reader answered from memory, for the gate's stages without a server."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from airflow_retrywindow.hooks.api_reader import PoolRow, TaskInstanceRow, XComKey
from airflow_retrywindow.records.breaker_state import BreakerState


def pool_row(
    name: str = "db", slots: int = 2, occupied: int = 0, breaker: BreakerState | None = None
) -> PoolRow:
    """A pool as ``GET /pools`` lists it; a breaker pool's description carries ``breaker``."""
    description = breaker.described(f"{name}: owned by the data platform") if breaker else None
    return PoolRow(name, slots, occupied, 0, slots - occupied, False, description)


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
    ) -> None:
        self.rows, self.tries, self.keys = rows, tries or {}, keys or []
        self.values = values or {}
        self.pool_rows = {"db": pool_row()} if pools is None else pools
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
