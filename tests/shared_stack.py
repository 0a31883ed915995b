"""One Airflow for the end-to-end modules whose stacks are configured alike.

Booting a stack costs about 20 s of a core (each service imports Airflow; the DAG
processor parses). The modules in :data:`MODULES` need nothing but the services and
their own DAGs, so they share one stack: ``make test`` hands them to one worker
together (:class:`ModulesTogether`), which boots it once, parsing a copy of each one's
DAG folder, and each module waits for its own DAGs and triggers runs of its own.
Their DAG ids differ, so their runs, task instances and records do too.

A module that needs a stack of its own keeps starting one with
:func:`devstack.stack.sqlite_stack`: other settings (a secret in the environment, a short
heartbeat timeout, an auth manager, a mail or metrics sink), a proxy in front of the API
server, a worker on a shifted clock, a long outage, or, as for the example DAG, a
scheduler serving nothing else while its days time a lost worker against a running job.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

from devstack.stack import ROOT, AirflowStack, sqlite_stack

TESTS = Path(__file__).resolve().parent
#: module (its path from the repository root) -> its DAG folder
MODULES = {
    "tests/policy/test_policy_clear.py": TESTS / "policy" / "dags",
    "tests/policy/test_deadline_alert_on_scheduler.py": TESTS / "policy" / "deadline_dags",
}
#: every service one of them needs
SERVICES = ("api-server", "scheduler", "dag-processor")


class ModulesTogether(LoadScopeScheduling):
    """``--dist loadfile``, but the modules sharing the stack are one unit of work."""

    def _split_scope(self, nodeid: str) -> str:
        module = nodeid.split("::", 1)[0]
        return "shared-stack" if module in MODULES else module


def _copy_folders(folders: Iterable[Path], dags: Path) -> None:
    """Copy each folder into ``dags``, under its path in the repository."""
    for folder in dict.fromkeys(folders):
        name = "-".join(folder.relative_to(ROOT).parts)
        shutil.copytree(folder, dags / name, ignore=shutil.ignore_patterns("__pycache__"))


@pytest.fixture(scope="session")
def shared_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowStack]:
    """This worker's shared stack, parsing every sharing module's DAGs; stopped at the end."""
    home = tmp_path_factory.mktemp("shared-stack")
    dags = home / "dags"
    dags.mkdir()
    _copy_folders(MODULES.values(), dags)
    with sqlite_stack(home, SERVICES, [], dags_folder=dags) as stack:
        yield stack


def for_module(stack: AirflowStack, module: str, dag_ids: Iterable[str]) -> AirflowStack:
    """The shared stack, once its DAG processor stored ``module``'s DAGs from its folder.

    :param module: the module's ``__file__``.
    :raises AssertionError: when a DAG id was stored from another module's folder.
    """
    name = str(Path(module).resolve().relative_to(ROOT))
    copy = "-".join(MODULES[name].relative_to(ROOT).parts)
    for dag_id in dag_ids:
        stack.wait_for_dag(dag_id)
        ((fileloc,),) = stack.rows("select fileloc from dag where dag_id=:d", d=dag_id)
        assert Path(fileloc).parent.name == copy, f"{dag_id} comes from {fileloc}, not {copy}"
    return stack
