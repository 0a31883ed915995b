"""Dependency rows: each pool's state as a dependency, as the run's task instances stored it.

A retry held, probed or released because its pool is failing keeps what it saw
of the pool under :data:`~airflow_retrywindow.records.dependency_state.KEY`
(:mod:`~airflow_retrywindow.records.dependency_state`). The view shows, per pool,
the latest of those records among the run's task instances (by ``readAt``, the
API server's clock): its state, since when it has been failing, what failed and
succeeded in the window, the held tries and the probes. A stored value that
cannot be read is said, naming the task instance, the field and the value;
it never hides the others and is never guessed at. A gate or a sensor that held a
target on its pool keeps the same record in that target's entry of its decision
record (:func:`held_by_records`), so those count as the target's own. Every text shown passes
through :func:`~airflow_retrywindow.plugins.decision_rows.shown`.

Nothing here imports Airflow.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from airflow_retrywindow.exceptions import RecordError
from airflow_retrywindow.labels import label
from airflow_retrywindow.plugins.decision_rows import formatted, shown
from airflow_retrywindow.records.dependency_state import (
    KEY,
    DependencyRecord,
    latest_per_pool,
)


@dataclass(frozen=True)
class DependencySection:
    """One pool as a dependency: its latest stored record in the run, as the view shows it.

    :param pool: the pool.
    :param state: ``open``, ``recovering`` or ``closed``.
    :param decision: the verdict of the latest record, e.g. ``dependency-held``.
    :param reason: its one-line reason.
    :param facts: (name, value) pairs, in the order shown.
    :param own: what the viewed task instance's own latest record of this pool says,
        when it has one that is not the latest of the pool.
    """

    pool: str
    state: str
    decision: str
    reason: str
    facts: tuple[tuple[str, str], ...]
    own: str | None = None


@dataclass(frozen=True)
class Dependencies:
    """The run's pools as dependencies, and what could not be read.

    :param sections: one per pool, by pool name.
    :param problems: one per stored value that cannot be read.
    :param setting_problems: what is wrong with the ``[retry_window]`` dependency
        settings: a pool they name that is no pool, or a value that cannot be used.
    """

    sections: tuple[DependencySection, ...] = ()
    problems: tuple[str, ...] = ()
    setting_problems: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.sections or self.problems or self.setting_problems)


def dependencies(
    stored: Iterable[tuple[str, int, object]],
    *,
    task_id: str | None = None,
    map_index: int = -1,
    setting_problems: Iterable[str] = (),
) -> Dependencies:
    """Each pool's latest stored record among the run's task instances.

    :param stored: per task instance (task id, map index), its value under the dependency key.
    :param task_id: the task instance the page is about, so that its own record is
        shown beside its pool's latest; ``None`` on the run's page.
    :param map_index: its map index.
    :param setting_problems: what is wrong with the dependency settings
        (:func:`unknown_pool_note`).
    """
    read: list[tuple[str, DependencyRecord]] = []
    own: dict[str, DependencyRecord] = {}
    problems: list[str] = []
    for owner, index, value in stored:
        record, problem = _read(value)
        if record is None:
            problems.append(shown(f"{label(owner, index)} ({KEY}): {problem}"))
            continue
        read.append((label(owner, index), record))
        if (owner, index) == (task_id, map_index):
            own[record.pool] = record
    by = {id(record): owner for owner, record in read}
    sections = tuple(
        _section(record, by[id(record)], own.get(record.pool))
        for record in latest_per_pool([record for _, record in read])
    )
    return Dependencies(sections, tuple(problems), tuple(shown(note) for note in setting_problems))


def unknown_pool_note(name: str) -> str:
    """What the view says of a pool ``[retry_window] dependency_pools`` names that is no pool.

    The retry-start check does not look: it would cost every decision a request.
    """
    return (
        f"[retry_window] dependency_pools names {name!r}, which is no pool: its setting "
        "applies to nothing. Correct the name, or create the pool."
    )


def held_by_records(records: Iterable[object]) -> list[tuple[str, int, object]]:
    """The dependency records the gates' and sensors' decision records hold, per target.

    :param records: stored decision records; each target entry that carries the pool's
        state under :data:`KEY` gives (target task id, its map index, that value).
    """
    found: list[tuple[str, int, object]] = []
    for record in records:
        decisions = record.get("decisions") if isinstance(record, Mapping) else None
        for entry in decisions if isinstance(decisions, list) else ():
            if isinstance(entry, Mapping) and KEY in entry:
                index = entry.get("mapIndex", -1)
                found.append(
                    (
                        str(entry.get("taskId", "?")),
                        index if isinstance(index, int) and not isinstance(index, bool) else -1,
                        entry[KEY],
                    )
                )
    return found


def _read(value: object) -> tuple[DependencyRecord | None, str]:
    """The record a stored value holds, or what cannot be read of it."""
    if isinstance(value, Mapping) and "version" not in value and "latest" in value:
        value = value["latest"]  # a history kept in the task state store
    try:
        return DependencyRecord.read(value), ""
    except RecordError as error:
        return None, str(error)
    except (ValueError, TypeError, OverflowError) as error:
        return None, f"cannot be read: {error}"


def _section(
    record: DependencyRecord, source: str, own: DependencyRecord | None
) -> DependencySection:
    mine = None
    if own is not None and own != record:
        mine = (
            f"This task instance's latest, read {formatted(own.read_at)}: try "
            f"{own.try_number} {own.did(formatted)} ({own.decision})"
        )
    return DependencySection(
        pool=shown(record.pool),
        state=record.state,
        decision=shown(record.decision),
        reason=shown(record.reason or "No reason was stored."),
        facts=tuple((name, shown(value)) for name, value in record.facts(formatted, by=source)),
        own=shown(mine) if mine else None,
    )
