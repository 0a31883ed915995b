"""One Airflow for the end-to-end modules whose stacks are configured alike.

Booting a stack costs about 19 s of a core (each service imports Airflow; the DAG
processor parses). The modules of each :data:`STACKS` entry need nothing but its
services and their own DAGs, so they share one stack: ``make test`` hands them to one
worker together (:class:`ModulesTogether`), which boots it once, parsing a copy of each
one's DAG folder in a folder of its own, and each module waits for its own DAGs and
triggers runs of its own. Their DAG ids differ, so their runs, task instances and records
do too. The scheduled DAG's (``rw_deadline_alert``) tasks start as the stack boots, beside
the first module's runs. A module's DAGs import the modules beside them by name
(``counted_tries``), as in a DAG folder of their own: every copied folder is on the
services' ``PYTHONPATH``, so the DAG processor, the workers and the triggerer (a
trigger's classpath) find them.

A module that needs a stack of its own keeps starting one with
:func:`devstack.stack.sqlite_stack`: other settings (a secret in the environment, a short
heartbeat timeout, an auth manager, a mail or metrics sink), a proxy in front of the API
server, a worker on a shifted clock, a long outage, or, as for the example DAG, a
scheduler serving nothing else while its days time a lost worker against a running job.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

from devstack.stack import ROOT, AirflowStack, free_port, sqlite_stack

TESTS = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Sharing:
    """Modules that share a stack.

    :param name: the stack's name, and its modules' unit of work.
    :param services: every service one of them needs.
    :param modules: module (its path from the repository root) -> its DAG folder, then the
        files of other folders its DAGs import, copied beside them.
    :param settings: the services' environment, beyond what every stack is given.
    """

    name: str
    services: tuple[str, ...]
    modules: dict[str, tuple[Path, ...]]
    settings: dict[str, str] = field(default_factory=dict)


STACKS = (
    Sharing(
        "shared-stack",
        ("api-server", "scheduler", "dag-processor", "triggerer"),
        {
            "tests/gate/test_gate_stack.py": (
                TESTS / "gate" / "stack_dags",
                TESTS / "gate" / "dags" / "mapped_loads.py",
            ),
            "tests/policy/test_trigger_paths.py": (TESTS / "policy" / "trigger_dags",),
            "tests/policy/test_chain_on_scheduler.py": (
                TESTS / "policy" / "chain_dags",
                TESTS / "policy" / "scheduler_dags" / "counted_tries.py",
            ),
            "tests/policy/test_policy_clear.py": (TESTS / "policy" / "dags",),
            "tests/policy/test_deadline_alert_on_scheduler.py": (
                TESTS / "policy" / "deadline_dags",
            ),
        },
        {
            # pydantic-ai's test model, through a connection: the chains' classifier asks it
            "AIRFLOW_CONN_RW_TEST_MODEL": json.dumps(
                {"conn_type": "pydanticai", "extra": {"model": "test"}}
            ),
        },
    ),
)
#: module (its path from the repository root) -> the stack it shares
MODULES = {module: sharing for sharing in STACKS for module in sharing.modules}
#: a folder of DAGs a module copies into its own, once its other DAGs run (a refused DAG)
LATER = "refused"


class ModulesTogether(LoadScopeScheduling):
    """``--dist loadfile``, but the modules sharing a stack are one unit of work."""

    def _split_scope(self, nodeid: str) -> str:
        module = nodeid.split("::", 1)[0]
        return MODULES[module].name if module in MODULES else module


def _relative(module: str) -> str:
    return str(Path(module).resolve().relative_to(ROOT))


def _folder_name(module: str) -> str:
    """The folder a module's DAGs are copied to, named after their own folder."""
    return "-".join(MODULES[module].modules[module][0].relative_to(ROOT).parts)


@contextmanager
def _boot(sharing: Sharing, home: Path) -> Iterator[AirflowStack]:
    """The stack of ``sharing`` in ``home``: each module's DAG folder, and the files its
    DAGs import, copied into a folder of its own, every one of them on ``PYTHONPATH``."""
    dags = home / "dags"
    folders = []
    for module, (folder, *beside) in sharing.modules.items():
        target = dags / _folder_name(module)
        shutil.copytree(folder, target, ignore=shutil.ignore_patterns("__pycache__", LATER))
        for source in beside:
            shutil.copy(source, target)
        folders.append(str(target))
    settings = {
        **sharing.settings,
        "PYTHONPATH": os.pathsep.join([*folders, os.environ.get("PYTHONPATH", "")]),
        # the triggerer serves its logs on 8794 by default: another stack may hold it
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
    }
    with sqlite_stack(home, sharing.services, [], dags_folder=dags, extra_env=settings) as stack:
        yield stack


class SharedStacks:
    """This worker's shared stacks, each booted when a module first asks for it and
    stopped once its modules' last test ran (:meth:`done`), not idling on to the end."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self._factory = factory
        self._running: dict[str, tuple[AirflowStack, ExitStack]] = {}

    def of(self, module: str) -> AirflowStack:
        """The stack ``module`` (its ``__file__``) shares."""
        sharing = MODULES[_relative(module)]
        if sharing.name not in self._running:
            stops = ExitStack()
            stack = stops.enter_context(_boot(sharing, self._factory.mktemp(sharing.name)))
            self._running[sharing.name] = (stack, stops)
        return self._running[sharing.name][0]

    def done(self, module: str, next_module: str | None) -> None:
        """Stop the stack ``module`` (a node id's path) shares when ``next_module`` shares
        another, or none."""
        sharing = MODULES.get(module)
        if sharing is not None and sharing is not MODULES.get(next_module or ""):
            self._stop(sharing.name)

    def close(self) -> None:
        """Stop every stack still running."""
        for name in list(self._running):
            self._stop(name)

    def _stop(self, name: str) -> None:
        if name in self._running:
            self._running.pop(name)[1].close()


_STACKS: list[SharedStacks] = []


@pytest.fixture(scope="session")
def shared_stacks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedStacks]:
    """This worker's shared stacks; any still running is stopped at the end."""
    stacks = SharedStacks(tmp_path_factory)
    _STACKS.append(stacks)
    try:
        yield stacks
    finally:
        _STACKS.remove(stacks)
        stacks.close()


def stop_when_done(item: pytest.Item, next_item: pytest.Item | None) -> None:
    """After ``item``: stop its shared stack when the next test does not share it."""
    module = item.nodeid.split("::", 1)[0]
    following = next_item.nodeid.split("::", 1)[0] if next_item is not None else None
    for stacks in _STACKS:
        stacks.done(module, following)


def module_folder(stack: AirflowStack, module: str) -> Path:
    """The folder of the shared stack's DAG folder ``module``'s DAGs were copied to.

    :param module: the module's ``__file__``.
    """
    return stack.dags_folder / _folder_name(_relative(module))


def for_module(stacks: SharedStacks, module: str, dag_ids: Iterable[str]) -> AirflowStack:
    """The stack ``module`` shares, once its DAG processor stored the module's DAGs from
    its folder.

    :param module: the module's ``__file__``.
    :raises AssertionError: when a DAG id was stored from another module's folder.
    """
    stack = stacks.of(module)
    copy = module_folder(stack, module).name
    for dag_id in dag_ids:
        # another module's refused DAG is not this one's concern
        stack.wait_for_dag(dag_id, folder=f"{copy}/")
        ((fileloc,),) = stack.rows("select fileloc from dag where dag_id=:d", d=dag_id)
        assert Path(fileloc).parent.name == copy, f"{dag_id} comes from {fileloc}, not {copy}"
    return stack
