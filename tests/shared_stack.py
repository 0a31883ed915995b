"""One Airflow for the end-to-end modules whose stacks are configured alike.

Booting an Airflow (API server, scheduler, DAG processor, triggerer) costs about a minute
of both cores on a loaded 2-core machine. The modules marked with :func:`shared` share one
stack per test worker instead: it starts once, parsing one DAG folder that holds a copy of
each marked module's DAG folder, and each module waits for its own DAGs and triggers runs
of its own. Their DAG ids differ, so their runs, task instances and records do too.

``make test`` hands whole modules to its two workers (``--dist loadfile``); a worker
boots the shared stack when the first marked module it is given needs it, and keeps it
for the others it is given. (Grouping the marked modules onto one worker with
``--dist loadgroup`` would boot it once in all, but pytest-xdist 3.8 groups nothing on
pytest 9.2: the group suffix it writes into ``item._nodeid`` is no longer read.)

A module needing a stack of its own (other settings, a proxy, a shifted clock, an outage)
keeps starting one with :func:`devstack.stack.sqlite_stack`; so does the example DAG's,
whose days time a lost worker against a job still running and want a scheduler that
serves nothing else.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from devstack.stack import ROOT, AirflowStack, sqlite_stack

#: every service any of them needs
SERVICES = ("api-server", "scheduler", "dag-processor", "triggerer")


def shared(dags_folder: Path) -> list[pytest.MarkDecorator]:
    """The marks of a module using the shared stack with the DAGs of ``dags_folder``."""
    return [pytest.mark.shared_stack(dags_folder)]


def dag_folders(items: Iterable[pytest.Item]) -> list[Path]:
    """The DAG folders of the collected modules using the shared stack, in collection order."""
    found: list[Path] = []
    for item in items:
        mark = item.get_closest_marker("shared_stack")
        if mark is not None and mark.args[0] not in found:
            found.append(mark.args[0])
    return found


def assemble(folders: Iterable[Path], dags: Path) -> None:
    """Copy each folder into ``dags``, under its path in the repository (``tests-gate-...``).

    :raises ValueError: when two folders hold a DAG file of the same name, the likeliest
        way for two modules' DAG ids to collide.
    """
    seen: dict[str, Path] = {}
    for folder in folders:
        for path in folder.glob("*.py"):
            if path.name in seen:
                raise ValueError(f"{path.name} is in {seen[path.name]} and {folder}: rename one")
            seen[path.name] = folder
        name = "-".join(folder.resolve().relative_to(ROOT).parts)
        shutil.copytree(folder, dags / name, ignore=shutil.ignore_patterns("__pycache__"))


def boot(items: Iterable[pytest.Item], home: Path) -> Iterator[AirflowStack]:
    """The shared stack of this worker, parsing every marked module's DAGs; stopped after."""
    dags = home / "dags"
    dags.mkdir()
    assemble(dag_folders(items), dags)
    with sqlite_stack(home, SERVICES, [], dags_folder=dags) as stack:
        yield stack


def for_module(stack: AirflowStack, dags_folder: Path, dag_ids: Iterable[str]) -> AirflowStack:
    """The shared stack, once the DAG processor has stored the module's DAGs from its folder.

    :raises AssertionError: when a DAG id was stored from another module's folder.
    """
    copy = "-".join(dags_folder.resolve().relative_to(ROOT).parts)
    for dag_id in dag_ids:
        stack.wait_for_dag(dag_id)
        ((fileloc,),) = stack.rows("select fileloc from dag where dag_id=:d", d=dag_id)
        assert Path(fileloc).parent.name == copy, f"{dag_id} comes from {fileloc}, not {copy}"
    return stack
