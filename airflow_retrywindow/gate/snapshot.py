"""Read: one snapshot of a DAG run, through Airflow's REST API, before anything is decided.

:func:`read_snapshot` makes every request the gate needs, in this order, and no
other:

* one paged listing of the targets' current task instances;
* for each target reset since its last try (a manual clear), its earlier tries;
* once the latest try of any target failed, one paged listing of the run's
  ``retry_window.*`` XCom keys (the failure classes the policy recorded), and
  the evidence value of each failed try whose keys carry no class (an older
  policy's);
* one paged listing of the pools the targets use.

What it read is a frozen :class:`RunSnapshot`: the later stages decide from it
alone, so they are tested with a snapshot made by hand instead of a server.
The client is passed in; nothing here imports Airflow.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from airflow_retrywindow.exceptions import RetryWindowGateError
from airflow_retrywindow.gate.airflow_states import failed, latest_try, needs_history
from airflow_retrywindow.gate.capacity import PoolState
from airflow_retrywindow.policies import evidence

if TYPE_CHECKING:
    from airflow_retrywindow.gate.targets import Target
    from airflow_retrywindow.hooks.airflow_api import PoolRow, TaskInstanceRow, XComKey

#: the XCom keys a RetryWindowPolicy leaves (evidence and failure class)
POLICY_XCOM_PREFIX = "retry_window."


class RunReader(Protocol):
    """The reads the gate makes: those of ``AirflowApiHook(...).get_conn()``."""

    requests: int
    base_url: str

    def task_instances(
        self, dag_id: str, run_id: str, task_ids: Collection[str]
    ) -> list[TaskInstanceRow]: ...

    def task_tries(self, dag_id: str, run_id: str, task_id: str) -> list[TaskInstanceRow]: ...

    def xcom_keys(self, dag_id: str, run_id: str, key_prefix: str) -> list[XComKey]: ...

    def xcom_value(self, dag_id: str, run_id: str, task_id: str, key: str) -> Any: ...

    def pools(self, names: Collection[str]) -> Mapping[str, PoolRow]: ...


@dataclass(frozen=True)
class RunSnapshot:
    """What one read of a DAG run found about the gate's targets.

    :param latest_tries: target id -> the row its latest try is judged by: its
        task instance, or for one reset since its last try, the latest of its
        earlier tries that really started; ``None`` when it has no task instance.
    :param xcom_keys: the run's ``retry_window.*`` XCom keys, read when the latest
        try of a target failed.
    :param evidence: target id -> the evidence value of its failed try, read when
        the try's keys carry no failure class.
    :param pools: pool name -> the pool, for the pools the targets use that exist.
    :param requests: REST API requests made.
    :param api: the API's base URL, without credentials.
    """

    latest_tries: Mapping[str, TaskInstanceRow | None]
    xcom_keys: tuple[XComKey, ...] = ()
    evidence: Mapping[str, object] = field(default_factory=dict)
    pools: Mapping[str, PoolState] = field(default_factory=dict)
    requests: int = 0
    api: str = ""

    def latest_try(self, task_id: str) -> TaskInstanceRow | None:
        """The row target ``task_id``'s latest try is judged by, ``None`` if it has none."""
        return self.latest_tries.get(task_id)

    def keys_of_try(self, task_id: str) -> list[XComKey]:
        """The XCom keys the latest try of ``task_id`` pushed."""
        return keys_of_try(self.xcom_keys, task_id, self.latest_try(task_id))


def read_snapshot(
    client: RunReader, dag_id: str, run_id: str, targets: Sequence[Target]
) -> RunSnapshot:
    """Read everything the gate decides the targets of one run from.

    :param client: the REST API client.
    :param dag_id: the run's DAG.
    :param run_id: the run.
    :param targets: the gate's targets.
    :raises RetryWindowGateError: for a target with only mapped task instances.
    :raises TargetError: for a task instance in a state the gate does not know.
    """
    ids = [target.task_id for target in targets]
    current = unmapped_rows(client.task_instances(dag_id, run_id, ids), ids)
    latest: dict[str, TaskInstanceRow | None] = {}
    for task_id in ids:
        row = current.get(task_id)
        if needs_history(row):
            row = latest_try(client.task_tries(dag_id, run_id, task_id))
        latest[task_id] = row
    keys: tuple[XComKey, ...] = ()
    values: dict[str, object] = {}
    if any(failed(latest[task_id]) for task_id in ids):
        keys = tuple(client.xcom_keys(dag_id, run_id, POLICY_XCOM_PREFIX))
        for task_id in ids:
            row = latest[task_id]
            if failed(row) and _needs_evidence(keys_of_try(keys, task_id, row)):
                values[task_id] = client.xcom_value(dag_id, run_id, task_id, evidence.EVIDENCE_KEY)
    names = {pool_of(target, latest[target.task_id]) for target in targets}
    pools = {name: PoolState.of(pool) for name, pool in client.pools(names).items()}
    return RunSnapshot(latest, keys, values, pools, client.requests, client.base_url)


def unmapped_rows(
    rows: Sequence[TaskInstanceRow], task_ids: Collection[str]
) -> dict[str, TaskInstanceRow]:
    """task id -> its task instance, for the targets that have one yet.

    A target whose task instances are all mapped (``map_index`` 0, 1, ...: it sits
    in a mapped task group) has none the gate can decide about; it is refused
    rather than taken for a task never tried, which would let its work run.

    :param rows: the run's task instances of the targets.
    :param task_ids: the targets.
    :raises RetryWindowGateError: naming the first such target.
    """
    found = {row.task_id: row for row in rows if row.map_index == -1}
    for task_id in task_ids:
        indexes = sorted(row.map_index for row in rows if row.task_id == task_id)
        if task_id not in found and indexes:
            raise RetryWindowGateError(
                f"target {task_id!r} has only mapped task instances in this run (map_index "
                f"{', '.join(map(str, indexes[:5]))}{', ...' if len(indexes) > 5 else ''}), "
                "none with map_index -1 to decide about; it is probably inside a mapped task "
                "group. Target tasks outside mapped task groups"
            )
    return found


def keys_of_try(
    keys: Sequence[XComKey], task_id: str, row: TaskInstanceRow | None
) -> list[XComKey]:
    """The keys among ``keys`` that the try of ``row`` (of task ``task_id``) pushed.

    XComs are cleared when a try starts, so a key present now was pushed by the
    latest try that started; the timestamp check guards against anything else.
    """
    if row is None:
        return []
    return [
        key
        for key in keys
        if key.task_id == task_id
        and key.map_index == -1
        and (row.start_date is None or key.timestamp >= row.start_date)
    ]


def pool_of(target: Target, row: TaskInstanceRow | None) -> str:
    """The pool of the target's latest try, or of its definition when it has none."""
    return row.pool if row is not None else target.pool


def _needs_evidence(keys: Sequence[XComKey]) -> bool:
    """Whether a failed try's keys name no failure class but hold its evidence."""
    if any(evidence.failure_of_key(key.key) is not None for key in keys):
        return False
    return any(key.key == evidence.EVIDENCE_KEY for key in keys)
