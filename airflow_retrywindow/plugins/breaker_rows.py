"""Breaker rows: each breaker pool the run's task instances use, as its description holds it.

A breaker pool's description carries its breaker's state, written by the controller
(:mod:`~airflow_retrywindow.records.breaker_state`). The view shows, for each pool of the
run that ``[retry_window] breaker_pools`` names, the breaker's state, the slots it gives
against the pool's size, since when, the last probe and why; a breaker pool no controller
has watched yet says so, and so does a name in the setting that is no pool. Every text
shown passes through :func:`~airflow_retrywindow.plugins.decision_rows.shown`.

Nothing here imports Airflow.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from airflow_retrywindow.breaker.settings import BreakerPools
from airflow_retrywindow.plugins.decision_rows import formatted, shown
from airflow_retrywindow.records.breaker_state import BreakerState

#: a breaker pool no controller has written to yet
UNWATCHED = "unwatched"


@dataclass(frozen=True)
class BreakerSection:
    """One breaker pool, as the view shows it.

    :param pool: the pool.
    :param phase: ``closed``, ``open``, ``recovering``, ``limited``, or ``unwatched``.
    :param words: its state in one line.
    :param reason: why it is so.
    :param facts: (name, value) pairs, in the order shown.
    """

    pool: str
    phase: str
    words: str
    reason: str
    facts: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Breakers:
    """The run's breaker pools, and what is wrong with the setting that names them.

    :param sections: one per breaker pool of the run, by pool name.
    :param setting_problems: a name in ``breaker_pools`` that is no pool, or a value
        that cannot be used.
    """

    sections: tuple[BreakerSection, ...] = ()
    setting_problems: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.sections or self.setting_problems)


def breakers(
    pools: Iterable[tuple[str, int, str | None]],
    named: BreakerPools,
    setting_problems: Iterable[str] = (),
) -> Breakers:
    """The breaker pools among ``pools``, each as its description holds it.

    :param pools: the run's pools: (name, size, description).
    :param named: the breaker pools the setting names.
    :param setting_problems: what is wrong with the setting.
    """
    sections = tuple(
        _section(name, size, description)
        for name, size, description in sorted(pools)
        if named.of(name) is not None
    )
    return Breakers(sections, tuple(shown(note) for note in setting_problems))


def unknown_pool_note(name: str) -> str:
    """What the view says of a pool ``[retry_window] breaker_pools`` names that is no pool."""
    return (
        f"[retry_window] breaker_pools names {name!r}, which is no pool: its breaker holds "
        "nothing. Correct the name, or create the pool."
    )


def _section(name: str, size: int, description: str | None) -> BreakerSection:
    state = BreakerState.in_description(description)
    if state is None or state.pool != name:
        return BreakerSection(
            shown(name),
            UNWATCHED,
            f"{size} slots, as the pool's owner set them",
            "No controller has watched this pool yet: deploy pool_breaker_dag() "
            "(docs/dependencies.md), or check that its DAG runs.",
        )
    facts = [
        ("Slots", f"{state.slots} of {state.size}"),
        ("Since", formatted(state.since)),
        ("Checked", formatted(state.checked_at)),
        ("Set by", state.by),
    ]
    if state.last_probe is not None:
        probe = f"{formatted(state.last_probe.at)}, {state.last_probe.outcome}"
        facts.append(("Last probe", f"{probe} ({state.probes} since it opened)"))
    if state.next_probe is not None:
        facts.append(("Next probe", formatted(state.next_probe)))
    return BreakerSection(
        pool=shown(name),
        phase=state.phase,
        words=shown(state.words()),
        reason=shown(state.reason or "No reason was written."),
        facts=tuple((key, shown(value)) for key, value in facts),
    )
