"""The package's rooms import only the rooms below them, in the order docs/architecture.md states.

The order is read from the ``layers`` block of docs/architecture.md, highest room
first; the imports are read from the source with ``ast`` (``TYPE_CHECKING`` and
imports inside functions included), so the map cannot drift from the code. A room
is a subpackage (``gate/``) or a module (``metrics.py``); a module of a subpackage
listed on its own (``dependency/check.py``) sits where it is listed, not with its
room. Rooms on one line may import each other.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.package.test_import_cycles import PACKAGE, module_names, package_graph

ROOT = PACKAGE.name
DOC = PACKAGE.parent / "docs" / "architecture.md"
#: imports of the root package load a submodule lazily (``from airflow_retrywindow import
#: metrics``) or read its version: they point at that submodule, not at the root
ROOT_IMPORT = ROOT


def stated_layers(text: str) -> list[list[str]]:
    """The rooms of each line of the ``layers`` block, highest first."""
    found = re.search(r"```layers\n(.*?)```", text, re.DOTALL)
    assert found, f"{DOC.name} has no ```layers block"
    return [line.split() for line in found.group(1).splitlines() if line.strip()]


def module_of(room: str) -> str:
    """``gate/`` -> ``airflow_retrywindow.gate``; ``dependency/check.py`` -> its module."""
    if room == "__init__.py":
        return ROOT
    return ".".join([ROOT, *room.removesuffix("/").removesuffix(".py").split("/")])


def layer_of(module: str, layers: list[list[str]]) -> int | None:
    """The line (0 = highest) of the most specific room holding ``module``."""
    best: tuple[int, int] | None = None  # (specificity, line)
    for line, rooms in enumerate(layers):
        for room in rooms:
            name = module_of(room)
            holds = module == name or (room.endswith("/") and module.startswith(name + "."))
            if holds and (best is None or len(name) > best[0]):
                best = (len(name), line)
    return None if best is None else best[1]


def upward_arrows(layers: list[list[str]], graph: dict[str, set[str]] | None = None) -> list[str]:
    """Each import of ``graph`` (the package's, by default) that runs up ``layers``."""
    graph = package_graph() if graph is None else graph
    arrows = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets - {ROOT_IMPORT}):
            here, there = layer_of(module, layers), layer_of(target, layers)
            if here is not None and there is not None and there < here:
                arrows.append(f"{module} -> {target}")
    return arrows


def test_the_architecture_places_every_module() -> None:
    layers = stated_layers(DOC.read_text())
    assert [name for name in sorted(module_names()) if layer_of(name, layers) is None] == []
    rooms = [room for line in layers for room in line]
    assert len(rooms) == len(set(rooms)), "a room is listed twice"


def test_no_import_runs_up_the_stated_order() -> None:
    assert upward_arrows(stated_layers(DOC.read_text())) == []


def test_the_check_finds_an_upward_import() -> None:
    # the cluster policy imports the trigger's deferral: placing triggers/ above
    # policies/ makes that arrow run up
    layers = [["triggers/"], ["policies/"], ["__init__.py"]]
    found = upward_arrows(layers)
    assert f"{ROOT}.policies.cluster_policy -> {ROOT}.triggers.deferral" in found


def test_the_gate_and_the_notifier_importing_the_policys_modules_run_up() -> None:
    # they find a task's window in records/composition.py: any module of policies/,
    # those listed on their own included, is above them
    policies = [name for name in module_names() if name.startswith(f"{ROOT}.policies.")]
    readers = [f"{ROOT}.gate.targets", f"{ROOT}.gate.estimates", f"{ROOT}.notifications.lookup"]
    planted = {reader: set(policies) for reader in readers}
    found = upward_arrows(stated_layers(DOC.read_text()), planted)
    assert len(policies) > 1
    expected = [f"{reader} -> {name}" for reader in sorted(readers) for name in sorted(policies)]
    assert found == expected


def test_a_module_listed_on_its_own_sits_apart_from_its_room() -> None:
    layers = [["dependency/check.py"], ["gate/"], ["dependency/"]]
    assert layer_of(f"{ROOT}.dependency.check", layers) == 0
    assert layer_of(f"{ROOT}.dependency.fleet", layers) == 2
    assert layer_of(f"{ROOT}.metrics", layers) is None


def test_the_doc_block_is_read_line_by_line() -> None:
    assert stated_layers("x\n```layers\ngate/\nrecords/  metrics.py\n```\n") == [
        ["gate/"],
        ["records/", "metrics.py"],
    ]
    assert Path(DOC).is_file()
