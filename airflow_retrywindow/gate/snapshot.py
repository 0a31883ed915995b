"""Read: one snapshot of a DAG run, through Airflow's REST API, before anything is decided.

:func:`read_snapshot` makes every request the gate needs, in this order, and no
other:

* one paged listing of the targets' current task instances, every map index of
  a mapped target included;
* for each task instance reset since its last try (a manual clear), its earlier
  tries;
* once the latest try of any task instance failed, one paged listing of the run's
  ``retry_window.*`` XCom keys (the failure classes the policy recorded, per map
  index), and the evidence value of each failed try whose keys carry no class
  (an older policy's);
* one paged listing of the pools the targets use.

A gate with an approval task reads it separately, and only when an approval
could let held-back work through (:func:`read_approval`): the task's
human-in-the-loop answer, and when that is an approval, the gate's earlier tries.

What it read is a frozen :class:`RunSnapshot`, one row per task instance
(:class:`~airflow_retrywindow.gate.instances.Instance`): the later stages decide
from it alone, so they are tested with a snapshot made by hand instead of a
server. The client is passed in; nothing here imports Airflow.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from airflow_retrywindow.exceptions import TargetError
from airflow_retrywindow.gate.airflow_states import failed, latest_try, needs_history
from airflow_retrywindow.gate.capacity import PoolState
from airflow_retrywindow.gate.instances import UNMAPPED, Instance, label
from airflow_retrywindow.gate.override import may_approve
from airflow_retrywindow.policies import evidence

if TYPE_CHECKING:
    import pendulum

    from airflow_retrywindow.gate.targets import Target
    from airflow_retrywindow.hooks.api_reader import ApprovalRow, PoolRow, TaskInstanceRow, XComKey

#: the XCom keys a RetryWindowPolicy leaves (evidence and failure class)
POLICY_XCOM_PREFIX = "retry_window."
#: the state of a map index dropped when its task was expanded again to fewer indexes
REMOVED = "removed"


class RunReader(Protocol):
    """The reads the gate makes: those of ``AirflowApiHook(...).get_conn()``."""

    requests: int
    base_url: str

    def task_instances(
        self, dag_id: str, run_id: str, task_ids: Collection[str]
    ) -> list[TaskInstanceRow]: ...

    def task_tries(
        self, dag_id: str, run_id: str, task_id: str, map_index: int = UNMAPPED
    ) -> list[TaskInstanceRow]: ...

    def xcom_keys(self, dag_id: str, run_id: str, key_prefix: str) -> list[XComKey]: ...

    def xcom_value(
        self, dag_id: str, run_id: str, task_id: str, key: str, map_index: int = UNMAPPED
    ) -> Any: ...

    def pools(self, names: Collection[str]) -> Mapping[str, PoolRow]: ...


class ApprovalReader(Protocol):
    """The reads of an approval: those of ``AirflowApiHook(...).get_conn()``."""

    requests: int

    def approval(
        self, dag_id: str, run_id: str, task_id: str, map_index: int = UNMAPPED
    ) -> ApprovalRow | None: ...

    def task_tries(
        self, dag_id: str, run_id: str, task_id: str, map_index: int = UNMAPPED
    ) -> list[TaskInstanceRow]: ...


class GateReader(RunReader, ApprovalReader, Protocol):
    """Every read of one gate evaluation, through one client: one token for all."""


@dataclass(frozen=True)
class ApprovalSnapshot:
    """What one read found about a gate's approval task.

    :param answer: the task's human-in-the-loop request and answer, ``None`` when it
        has written none in this run.
    :param previous_decision: when the gate's previous decision in this run was
        made: the end of its latest earlier try that succeeded. ``None`` when there
        is none, or when the answer is no approval (then it is not read).
    :param requests: REST API requests the reader made.
    """

    answer: ApprovalRow | None
    previous_decision: pendulum.DateTime | None
    requests: int


@dataclass(frozen=True)
class RunSnapshot:
    """What one read of a DAG run found about the gate's targets.

    :param latest_tries: task instance -> the row its latest try is judged by: the
        task instance, or for one reset since its last try, the latest of its
        earlier tries that really started; ``None`` when the target has no task
        instance yet. A target missing here is taken as never tried.
    :param xcom_keys: the run's ``retry_window.*`` XCom keys, read when the latest
        try of a task instance failed.
    :param evidence: task instance -> the evidence value of its failed try, read
        when the try's keys carry no failure class.
    :param pools: pool name -> the pool, for the pools the targets use that exist.
    :param requests: REST API requests made.
    :param api: the API's base URL, without credentials.
    """

    latest_tries: Mapping[Instance, TaskInstanceRow | None]
    xcom_keys: tuple[XComKey, ...] = ()
    evidence: Mapping[Instance, object] = field(default_factory=dict)
    pools: Mapping[str, PoolState] = field(default_factory=dict)
    requests: int = 0
    api: str = ""

    def instances(self, task_id: str) -> list[Instance]:
        """The task instances of target ``task_id``, by map index (one, ``-1``, if unmapped)."""
        found = sorted(instance for instance in self.latest_tries if instance.task_id == task_id)
        return found or [Instance(task_id)]

    def latest_try(self, instance: Instance) -> TaskInstanceRow | None:
        """The row the instance's latest try is judged by, ``None`` if it has none."""
        return self.latest_tries.get(instance)

    def keys_of_try(self, instance: Instance) -> list[XComKey]:
        """The XCom keys the latest try of ``instance`` pushed."""
        return keys_of_try(self.xcom_keys, instance, self.latest_try(instance))


def read_snapshot(
    client: RunReader, dag_id: str, run_id: str, targets: Sequence[Target]
) -> RunSnapshot:
    """Read everything the gate decides the targets of one run from.

    :param client: the REST API client.
    :param dag_id: the run's DAG.
    :param run_id: the run.
    :param targets: the gate's targets.
    :raises TargetError: for task instances the gate cannot account for (see
        :func:`instance_rows`), or in a state the gate does not know.
    """
    ids = [target.task_id for target in targets]
    current = instance_rows(client.task_instances(dag_id, run_id, ids), targets)
    latest: dict[Instance, TaskInstanceRow | None] = {}
    for instance, row in current.items():
        if needs_history(row):
            tries = client.task_tries(dag_id, run_id, instance.task_id, instance.map_index)
            latest[instance] = latest_try(tries)
        else:
            latest[instance] = row
    keys: tuple[XComKey, ...] = ()
    values: dict[Instance, object] = {}
    if any(failed(row) for row in latest.values()):
        keys = tuple(client.xcom_keys(dag_id, run_id, POLICY_XCOM_PREFIX))
        for instance, row in latest.items():
            if failed(row) and _needs_evidence(keys_of_try(keys, instance, row)):
                values[instance] = client.xcom_value(
                    dag_id, run_id, instance.task_id, evidence.EVIDENCE_KEY, instance.map_index
                )
    by_id = {target.task_id: target for target in targets}
    names = {pool_of(by_id[instance.task_id], row) for instance, row in latest.items()}
    pools = {name: PoolState.of(pool) for name, pool in client.pools(names).items()}
    return RunSnapshot(latest, keys, values, pools, client.requests, client.base_url)


def instance_rows(
    rows: Sequence[TaskInstanceRow], targets: Sequence[Target]
) -> dict[Instance, TaskInstanceRow | None]:
    """Every task instance of the targets, with its current row (``None``: none yet).

    A target that is not mapped has one, map index ``-1``. A mapped one has one per
    map index once Airflow expanded it, and the single ``-1`` before (or when it
    expanded to nothing). A map index in the ``removed`` state (the task expanded
    again to fewer indexes) has no next attempt and is left out.

    Anything else is refused rather than guessed at, since a task instance left
    out could be taken for one never tried, which would let its work run.

    :param rows: the run's task instances of the targets.
    :param targets: the targets.
    :raises TargetError: for a task instance listed twice or a gap in the map
        indexes (the listing changed while its pages were read), mapped task
        instances of a target the DAG does not map, or both kinds for one target.
    """
    mine: dict[str, list[TaskInstanceRow]] = {target.task_id: [] for target in targets}
    for row in rows:
        if row.task_id in mine:
            mine[row.task_id].append(row)
    found: dict[Instance, TaskInstanceRow | None] = {}
    for target in targets:
        found.update(_instances_of(target, mine[target.task_id]))
    return found


def _instances_of(
    target: Target, rows: Sequence[TaskInstanceRow]
) -> dict[Instance, TaskInstanceRow | None]:
    task_id = target.task_id
    indexes = sorted(row.map_index for row in rows)
    if len(set(indexes)) != len(indexes):
        twice = sorted({index for index in indexes if indexes.count(index) > 1})
        raise TargetError(
            f"target {task_id!r}: the API listed {_names(task_id, twice)} twice; the run "
            "changed while its pages were read. Run the gate again"
        )
    unmapped = next((row for row in rows if row.map_index == UNMAPPED), None)
    mapped = sorted((row for row in rows if row.map_index > UNMAPPED), key=lambda r: r.map_index)
    if mapped and not target.mapped:
        raise TargetError(
            f"target {task_id!r} is not mapped in the DAG, but this run has mapped task "
            f"instances of it ({_names(task_id, indexes)}): the DAG changed after the run "
            "was created, so the gate cannot tell which tries count. Decide the repeat by hand"
        )
    if not mapped:
        # not mapped, or not expanded yet: the one task instance, if any
        return {Instance(task_id): unmapped}
    if unmapped is not None:
        raise TargetError(
            f"target {task_id!r} has both an unexpanded task instance (map_index -1) and "
            f"expanded ones ({_names(task_id, indexes[1:])}) in this run; Airflow keeps "
            "one or the other, so the gate does not guess. Run the gate again"
        )
    missing = sorted(set(range(len(mapped))) - {row.map_index for row in mapped})
    if missing:
        raise TargetError(
            f"target {task_id!r}: the API listed no task instance for "
            f"{_names(task_id, missing)}; the run changed while its pages were read. "
            "Run the gate again"
        )
    live: dict[Instance, TaskInstanceRow | None] = {
        Instance(task_id, row.map_index): row for row in mapped if row.state != REMOVED
    }
    # every map index removed: nothing of the task is left to run again
    return live or {Instance(task_id): None}


def _names(task_id: str, indexes: Sequence[int], shown: int = 5) -> str:
    names = [label(task_id, index) for index in indexes[:shown]]
    more = f" and {len(indexes) - shown} more" if len(indexes) > shown else ""
    return ", ".join(names) + more


def keys_of_try(
    keys: Sequence[XComKey], instance: Instance, row: TaskInstanceRow | None
) -> list[XComKey]:
    """The keys among ``keys`` that the try of ``row`` (of ``instance``) pushed.

    XComs are cleared, per map index, when a try starts, so a key present now was
    pushed by the latest try that started; the timestamp check guards against
    anything else.
    """
    if row is None:
        return []
    return [
        key
        for key in keys
        if key.task_id == instance.task_id
        and key.map_index == instance.map_index
        and (row.start_date is None or key.timestamp >= row.start_date)
    ]


def pool_of(target: Target, row: TaskInstanceRow | None) -> str:
    """The pool of the latest try, or of the target's definition when it has none."""
    return row.pool if row is not None else target.pool


def _needs_evidence(keys: Sequence[XComKey]) -> bool:
    """Whether a failed try's keys name no failure class but hold its evidence."""
    if any(evidence.failure_of_key(key.key) is not None for key in keys):
        return False
    return any(key.key == evidence.EVIDENCE_KEY for key in keys)


def read_approval(
    client: ApprovalReader,
    dag_id: str,
    run_id: str,
    approval: str,
    *,
    gate: str,
    gate_try: int,
) -> ApprovalSnapshot:
    """Read the approval task's answer, and the gate's previous decision when it approves.

    One request for the answer; when it is an approval and the gate ran before in
    this run, one more for the gate's tries.

    :param client: the REST API client.
    :param dag_id: the run's DAG.
    :param run_id: the run.
    :param approval: the approval task's id.
    :param gate: the gate's task id.
    :param gate_try: the gate's try deciding now.
    """
    answer = client.approval(dag_id, run_id, approval)
    previous = None
    if may_approve(answer) and gate_try > 1:
        previous = previous_decision(client.task_tries(dag_id, run_id, gate), gate_try)
    return ApprovalSnapshot(answer, previous, client.requests)


def previous_decision(tries: Sequence[TaskInstanceRow], current: int) -> pendulum.DateTime | None:
    """When the gate's latest earlier successful try ended: its previous decision.

    A try that failed made no decision. A successful try without an end date counts
    as deciding when the API answered, so that no approval given before it counts.

    :param tries: the gate's tries in this run.
    :param current: the try deciding now.
    """
    decided = [row for row in tries if row.try_number < current and row.state == "success"]
    if not decided:
        return None
    latest = max(decided, key=lambda row: row.try_number)
    return latest.end_date or latest.observed_at
