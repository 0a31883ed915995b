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
* one paged listing of the pools the targets use, whose descriptions carry the
  breakers of the breaker pools among them
  (:mod:`airflow_retrywindow.records.breaker_state`): no request more for those.

What it read is a frozen :class:`RunSnapshot`, one row per task instance
(:class:`Instance`): the later stages decide from it alone, so they are tested
with a snapshot made by hand instead of a server. The client is passed in;
nothing here imports Airflow. A gate's approval task is read where approvals are
judged (:mod:`airflow_retrywindow.gate.approve`).

**Task instances.** A target that is not mapped has one task instance, map index
``-1``. A mapped task (``.expand()``) or a task inside a mapped task group has one
per map index, ``0`` to ``n - 1``, once Airflow has expanded it (before that, one
with ``-1``). The gate decides each on its own: an :class:`Instance` is what it
decides about. In reasons and status updates an instance is named as Airflow's
UI lists it: ``load`` or ``load[3]`` (:func:`label`); observations use the same
names. The model knows each by an id of its own (:func:`model_ids`): a task that
is not mapped keeps :func:`~airflow_retrywindow.timing.fixtures.model_task_id`; a
map index is ``<task id>-<map index>`` (``load-3``) when that fits the model's
rules and no other instance of the gate has it, otherwise a readable alias that
keeps the map index and ends in a hash (``grp_load-3-1f0e9c2a``).

**Airflow's states.** What each says about a target's latest try:

========================================================  ============================
Airflow state of the latest try                            model state
========================================================  ============================
``success``                                                ``succeeded``
``queued``, ``scheduled``, ``running``, ``deferred``,      ``running``
``up_for_reschedule``, ``restarting``, ``awaiting_input``
``up_for_retry``, ``failed``                               ``retryable``, unless the
                                                           task's ``RetryWindowPolicy``
                                                           classified the failure as
                                                           ``unknown`` or ``terminal``
never tried (``try_number`` 0)                             ``not-attempted`` (no fixture:
                                                           a first run is not a retry)
========================================================  ============================

A task instance reset since its last try (``None``, ``skipped``,
``upstream_failed``, ``removed``: after a manual clear, a skip, an upstream
failure or a DAG change) is judged by that last try, read from the task's
earlier tries. Those are every state of Airflow 3.3's ``TaskInstanceState``; any
other state is refused (:class:`TargetError`) rather than guessed at, since
reading past it could turn a try we do not understand into a first run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from airflow_retrywindow.exceptions import TargetError
from airflow_retrywindow.gate.breaker_hold import BreakerHold
from airflow_retrywindow.labels import UNMAPPED, Instance, label
from airflow_retrywindow.model.bounds import TASK_ID
from airflow_retrywindow.records import evidence
from airflow_retrywindow.records.breaker_state import BreakerState
from airflow_retrywindow.timing.fixtures import model_alias, model_task_id

if TYPE_CHECKING:
    from airflow_retrywindow.breaker.settings import BreakerPools
    from airflow_retrywindow.gate.targets import Target
    from airflow_retrywindow.hooks.api_reader import PoolRow, TaskInstanceRow, XComKey
    from airflow_retrywindow.timing.skew import ClockOffset


def model_id(instance: Instance, *, aliased: bool = False) -> str:
    """The id the model knows ``instance`` by, before other instances are considered.

    :param instance: the task instance.
    :param aliased: give a map index its hashed alias even when the plain id fits
        (used when the plain id is taken).
    """
    if not instance.mapped:
        return model_task_id(instance.task_id)
    suffix = f"-{instance.map_index}"
    plain = instance.task_id + suffix
    if not aliased and TASK_ID.fullmatch(plain):
        return plain
    # the label holds brackets, which no task id does: its hash is the instance's own
    return model_alias(instance.task_id, instance.label, suffix)


def model_ids(instances: Iterable[Instance]) -> dict[Instance, str]:
    """A distinct model id for every instance of one gate, the same for the same instances.

    :param instances: every task instance the gate decides.
    :raises TargetError: when two instances would still share an id (a hash collision).
    """
    ids = {instance: model_id(instance) for instance in instances}
    taken = Counter(ids.values())
    for instance, found in ids.items():
        if instance.mapped and taken[found] > 1:
            # e.g. map index 3 of "load" and a task named "load-3": the map index yields
            ids[instance] = model_id(instance, aliased=True)
    owners: dict[str, list[str]] = {}
    for instance, found in ids.items():
        owners.setdefault(found, []).append(instance.label)
    clashes = {found: names for found, names in owners.items() if len(names) > 1}
    if clashes:
        found, names = next(iter(clashes.items()))
        raise TargetError(
            f"{' and '.join(map(repr, names))} would both be known to the model as {found!r}; "
            "rename one of the tasks"
        )
    return ids


RUNNING_STATES = frozenset(
    {
        "queued",
        "scheduled",
        "running",
        "deferred",
        "up_for_reschedule",
        "restarting",
        "awaiting_input",
    }
)
FAILED_STATES = frozenset({"failed", "up_for_retry"})
SUCCESS_STATES = frozenset({"success"})
#: states of a try that really started
TRIED_STATES = RUNNING_STATES | FAILED_STATES | SUCCESS_STATES
#: states of a task instance that no longer shows its try (or never had one)
RESET_STATES = frozenset({None, "skipped", "upstream_failed", "removed"})


def known_state(row: TaskInstanceRow) -> TaskInstanceRow:
    """``row``, if the gate knows what its state means; a :class:`TargetError` if not."""
    if row.state in TRIED_STATES or row.state in RESET_STATES:
        return row
    raise TargetError(
        f"task {label(row.task_id, row.map_index)!r}: try {row.try_number} is in the Airflow "
        f"state {row.state!r}, "
        "which the gate does not know, so it cannot tell whether the try ran; check the "
        "Airflow version (the gate knows Airflow 3.3's task instance states) and decide "
        "the repeat by hand"
    )


def needs_history(row: TaskInstanceRow | None) -> bool:
    """Whether the row was reset after a try, so the try itself must be read."""
    return row is not None and row.try_number > 0 and known_state(row).state in RESET_STATES


def latest_try(rows: Sequence[TaskInstanceRow]) -> TaskInstanceRow | None:
    """The latest try that really started, among a task's tries."""
    tried = [row for row in rows if known_state(row).state in TRIED_STATES and row.try_number > 0]
    return max(tried, key=lambda row: row.try_number, default=None)


def failed(row: TaskInstanceRow | None) -> bool:
    """Whether the row is of a try that failed (its failure class may be recorded)."""
    return row is not None and row.state in FAILED_STATES


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
    :param breakers: pool name -> its breaker, for the pools the targets use that are
        breaker pools and carry one (none when the read was not asked to check).
    :param requests: REST API requests made.
    :param api: the API's base URL, without credentials.
    :param clock: how far the API server's clock is from this worker's, as the read
        measured it; ``None`` when it was not measured.
    """

    latest_tries: Mapping[Instance, TaskInstanceRow | None]
    xcom_keys: tuple[XComKey, ...] = ()
    evidence: Mapping[Instance, object] = field(default_factory=dict)
    pools: Mapping[str, PoolRow] = field(default_factory=dict)
    breakers: Mapping[str, BreakerHold] = field(default_factory=dict)
    requests: int = 0
    api: str = ""
    clock: ClockOffset | None = None

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
    client: RunReader,
    dag_id: str,
    run_id: str,
    targets: Sequence[Target],
    *,
    breakers: BreakerPools | None = None,
) -> RunSnapshot:
    """Read everything the gate decides the targets of one run from.

    :param client: the REST API client.
    :param dag_id: the run's DAG.
    :param run_id: the run.
    :param targets: the gate's targets.
    :param breakers: the breaker pools; ``None`` takes no pool as a breaker.
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
    pools = dict(client.pools(names))
    held = breakers_of(pools, breakers) if breakers is not None else {}
    return RunSnapshot(latest, keys, values, pools, held, client.requests, client.base_url)


def breakers_of(pools: Mapping[str, PoolRow], breakers: BreakerPools) -> dict[str, BreakerHold]:
    """The breakers the pools' descriptions carry, of the pools that are breaker pools."""
    found: dict[str, BreakerHold] = {}
    for name, row in pools.items():
        settings = breakers.of(name)
        state = BreakerState.in_description(row.description) if settings is not None else None
        if settings is not None and state is not None and state.pool == name:
            found[name] = BreakerHold(state, settings)
    return found


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
