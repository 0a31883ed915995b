"""Store: what the policy, the gate and the sensor left in the metadata DB, read for the view.

The view runs inside Airflow's API server, so it reads the metadata DB through
Airflow's ORM and the request's session, the way Airflow's own task state store
and XCom endpoints do; the models come from
:func:`~airflow_retrywindow.airflow_internals.metadata_tables`, where every private
use of Airflow is kept. This is the only module of the view that reads the DB; it
reads and never writes:

* the policy's decision history: the task state store row under
  :data:`~airflow_retrywindow.records.evidence.EVIDENCE_KEY` (Airflow keeps its
  value as JSON text), or, when a task instance has no such row (a custom state
  store backend keeps values elsewhere), the latest decision in the XCom of the
  same key;
* the pools of the run's task instances: their size and description, which carries a
  breaker pool's breaker (:mod:`~airflow_retrywindow.records.breaker_state`);
* the gates' and sensors' decision records: ``return_value`` XComs that have a
  record's shape (:func:`~airflow_retrywindow.records.decision_record.is_decision_record`)
  and were published by a gate or a sensor. What marks one is the Retry window extra
  link, which every gate and sensor, and every subclass of them, carries in the DAG's
  serialization: a user's task may return a value of the same shape, and that value
  is a look-alike, not a record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from airflow_retrywindow.airflow_internals import metadata_tables, serialized_extra_links
from airflow_retrywindow.links.retry_window import RetryWindowLink
from airflow_retrywindow.records.decision_record import is_decision_record
from airflow_retrywindow.records.evidence import EVIDENCE_KEY
from airflow_retrywindow.version_compat import AIRFLOW_V_3_3_PLUS

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

RETURN_VALUE = "return_value"
#: the ORM models read, imported when the view is
TABLES = metadata_tables(task_state_store=AIRFLOW_V_3_3_PLUS)


@dataclass(frozen=True)
class Stored:
    """One stored value of one task instance.

    :param task_id: the task instance's task id.
    :param map_index: its map index.
    :param value: the value, decoded from JSON.
    """

    task_id: str
    map_index: int
    value: Any


@dataclass(frozen=True)
class RunStore:
    """The stored decisions of one DAG run, read with one session.

    :param session: the request's metadata DB session.
    :param dag_id: the DAG.
    :param run_id: the DAG run.
    """

    session: Session
    dag_id: str
    run_id: str

    def run_exists(self) -> bool:
        """Whether the DAG run exists."""
        found = self.session.scalar(
            select(TABLES.dag_run.id).where(
                TABLES.dag_run.dag_id == self.dag_id, TABLES.dag_run.run_id == self.run_id
            )
        )
        return found is not None

    def task_instance_exists(self, task_id: str, map_index: int) -> bool:
        """Whether the task instance exists in the run."""
        found = self.session.scalar(
            select(TABLES.task_instance.task_id)
            .where(
                TABLES.task_instance.dag_id == self.dag_id,
                TABLES.task_instance.run_id == self.run_id,
                TABLES.task_instance.task_id == task_id,
                TABLES.task_instance.map_index == map_index,
            )
            .limit(1)
        )
        return found is not None

    def policy_evidence(self, task_id: str | None = None, map_index: int = -1) -> list[Stored]:
        """The policy's stored decisions, per task instance, sorted by task id and map index.

        :param task_id: one task instance's task id, or ``None`` for the whole run.
        :param map_index: its map index (with ``task_id``).
        """
        return self._kept(EVIDENCE_KEY, task_id, map_index)

    def run_pools(self) -> list[tuple[str, int, str | None]]:
        """The pools of the run's task instances: (name, size, description), one query."""
        used = select(TABLES.task_instance.pool).where(
            TABLES.task_instance.dag_id == self.dag_id, TABLES.task_instance.run_id == self.run_id
        )
        rows = self.session.execute(
            select(TABLES.pool.pool, TABLES.pool.slots, TABLES.pool.description).where(
                TABLES.pool.pool.in_(used)
            )
        ).all()
        return [(str(row[0]), int(row[1]), row[2]) for row in rows]

    def pool_names(self) -> frozenset[str]:
        """The name of every pool of the deployment (not only the run's)."""
        return frozenset(self.session.scalars(select(TABLES.pool.pool)))

    def decision_records(self, task_id: str | None = None, map_index: int = -1) -> list[Stored]:
        """The gates' and sensors' decision records, sorted by task id and map index.

        :param task_id: one task instance's task id, or ``None`` for the whole run.
        :param map_index: its map index (with ``task_id``).
        """
        return self.return_values(task_id, map_index)[0]

    def return_values(
        self, task_id: str | None = None, map_index: int = -1
    ) -> tuple[list[Stored], list[Stored]]:
        """The decision records, and the look-alikes: values of a record's shape from other tasks.

        :param task_id: one task instance's task id, or ``None`` for the whole run.
        :param map_index: its map index (with ``task_id``).
        """
        shaped = [
            stored
            for stored in self._xcoms(RETURN_VALUE, task_id, map_index)
            if is_decision_record(stored.task_id, stored.value)
        ]
        if not shaped:
            return [], []
        publishers = self.record_publishers()
        if publishers is None:  # no serialized DAG to ask: judged by shape alone, as before
            return shaped, []
        return (
            [stored for stored in shaped if stored.task_id in publishers],
            [stored for stored in shaped if stored.task_id not in publishers],
        )

    def record_publishers(self) -> frozenset[str] | None:
        """The task ids of the run's DAG that publish decision records: its gates and sensors.

        :returns: ``None`` when the DAG version the run was created with has no
            serialization left to read.
        """
        run = self.session.scalar(
            select(TABLES.dag_run).where(
                TABLES.dag_run.dag_id == self.dag_id, TABLES.dag_run.run_id == self.run_id
            )
        )
        version = run.created_dag_version if run is not None else None
        serialized = version.serialized_dag if version else None
        data = serialized.data if serialized is not None else None
        if not isinstance(data, dict):
            return None
        tasks = data.get("dag", {}).get("tasks", [])
        return frozenset(
            str(task["__var"]["task_id"])
            for task in tasks
            if RetryWindowLink.name in serialized_extra_links(task.get("__var", {}))
        )

    def _kept(self, key: str, task_id: str | None, map_index: int) -> list[Stored]:
        """The values of ``key`` in the task state store, or in XCom where the store holds none.

        :param key: the task state store and XCom key.
        :param task_id: one task instance's task id, or ``None`` for the whole run.
        :param map_index: its map index (with ``task_id``).
        """
        found = {
            (row.task_id, row.map_index): Stored(row.task_id, row.map_index, _json(row.value))
            for row in self._state_store_rows(key, task_id, map_index)
        }
        # the XCom holds only the latest value: read it where the store holds nothing
        for stored in self._xcoms(key, task_id, map_index, skip=frozenset(found)):
            found.setdefault((stored.task_id, stored.map_index), stored)
        return [found[place] for place in sorted(found)]

    def _state_store_rows(self, key: str, task_id: str | None, map_index: int) -> list[Any]:
        """The task state store's rows of ``key``: none before Airflow 3.3, which has no task
        state store (nor the policy that writes there); the gates' records are in XCom."""
        model = TABLES.task_state_store
        if model is None:
            return []
        statement = select(model.task_id, model.map_index, model.value).where(
            model.dag_id == self.dag_id, model.run_id == self.run_id, model.key == key
        )
        return list(self.session.execute(self._scoped(statement, model, task_id, map_index)).all())

    def _xcoms(
        self,
        key: str,
        task_id: str | None,
        map_index: int,
        skip: frozenset[tuple[str, int]] = frozenset(),
    ) -> list[Stored]:
        """The XComs of ``key``, decoded; those of the task instances in ``skip`` are not read."""
        if skip:
            # which task instances have one, without loading the values of those skipped
            keys = self.session.execute(
                self._scoped(
                    select(TABLES.xcom.task_id, TABLES.xcom.map_index).where(
                        TABLES.xcom.dag_id == self.dag_id,
                        TABLES.xcom.run_id == self.run_id,
                        TABLES.xcom.key == key,
                    ),
                    TABLES.xcom,
                    task_id,
                    map_index,
                )
            ).all()
            if all((row.task_id, row.map_index) in skip for row in keys):
                return []
        rows = self.session.execute(
            self._scoped(
                select(TABLES.xcom).where(
                    TABLES.xcom.dag_id == self.dag_id,
                    TABLES.xcom.run_id == self.run_id,
                    TABLES.xcom.key == key,
                ),
                TABLES.xcom,
                task_id,
                map_index,
            )
        ).scalars()
        found = [
            Stored(row.task_id, row.map_index, TABLES.xcom.deserialize_value(row))
            for row in rows
            if (row.task_id, row.map_index) not in skip
        ]
        return sorted(found, key=lambda stored: (stored.task_id, stored.map_index))

    @staticmethod
    def _scoped(statement: Any, model: Any, task_id: str | None, map_index: int) -> Any:
        if task_id is None:
            return statement
        return statement.where(model.task_id == task_id, model.map_index == map_index)


def _json(text: object) -> Any:
    """A task state store value: Airflow keeps it as JSON text."""
    if not isinstance(text, (str, bytes)):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text  # shown as unreadable, with what was stored
