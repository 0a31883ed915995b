"""What the package uses of Airflow that is not Airflow's public API, found by reading it.

Every module of the package but ``airflow_internals.py`` is read with ``ast``. A use is
reported when it names, outside the public API below:

* a module of Airflow (an import, ``from airflow import models``, an attribute chain
  ``airflow.utils.state``, or a string such as ``import_module("airflow.jobs")``); only
  :data:`PUBLIC` modules, :data:`PUBLIC_TREES` and the names of :data:`PUBLIC_NAMES` are
  public: ``airflow.models``, ``airflow.utils``, ``airflow.jobs``, ``airflow.serialization``,
  the API server's ``airflow.api_fastapi`` (but its auth managers) and the Task SDK's
  submodules are not;
* a private name (``_something``), as an attribute of anything but ``self`` or ``cls`` or as
  a string, unless that one use is of the package's own name (:data:`OWN`): six of the
  package's private names are private attributes of Airflow's classes too (``_task_instance``,
  ``_deadline``, ...), so a name is never allowed everywhere;
* the task runner's internal names (:data:`INTERNAL_NAMES`);
* an attribute or a module whose name is computed (``getattr(ti, name)``,
  ``import_module(path)``), unless the name is read from a literal or a constant of the module,
  or that one use is listed in :data:`COMPUTED` with why it reaches nothing of Airflow's.

Airflow's public API: its "Public Interface of Airflow" page (the ``airflow.sdk``
namespace, the exceptions, cluster policies, plugins, triggers, auth managers) and the
providers' modules. A use listed in :data:`OLDER_MINORS` is the public way of an older
minor that the version module alone imports.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

#: Airflow's public modules, each with its names (submodules not included)
PUBLIC = {
    "airflow.sdk": "the Task SDK, Airflow 3's public interface: airflow.sdk.__all__",
    "airflow.sdk.exceptions": "the Task SDK's exceptions (3.2 on)",
    "airflow.sdk.types": "the Task SDK's protocols, which the public interface page names",
    "airflow.sdk.observability.stats": "Stats, where 3.2's deprecation of airflow.stats points",
    "airflow.exceptions": "the public exceptions",
    "airflow.configuration": "Airflow's configuration: the only one of 3.1 and the API server",
    "airflow.plugins_manager": "AirflowPlugin, the base of plugins",
    "airflow.policies": "the cluster policies' hook marker",
    "airflow.triggers.base": "BaseTrigger and its events, the base of triggers",
}
#: public modules with each of their non-private submodules
PUBLIC_TREES = {
    "airflow.providers": "each provider's operators, triggers, hooks and compat layer",
    "airflow.api_fastapi.auth.managers": "the auth manager interface and its resource details",
    "airflow_client": "the REST API's generated client",
}
#: public modules of which only these names are public
PUBLIC_NAMES = {"airflow.sdk.log": frozenset({"mask_secret"})}
#: what only an older minor's public API has, imported only by the version module
OLDER_MINORS = {
    ("airflow_retrywindow/version_compat.py", "airflow.stats"): "3.1's Stats",
    ("airflow_retrywindow/version_compat.py", "airflow.sdk.definitions.deadline"): (
        "3.1's DeadlineReference, which its airflow.sdk does not export"
    ),
}
#: the package's own private names used on something other than self, one use each
OWN = {
    ("airflow_retrywindow/model/value.py", "_values"): "Value.__eq__ compares another Value",
    ("airflow_retrywindow/records/decision_facts.py", "_read"): "DecisionFacts built in steps",
    ("airflow_retrywindow/records/decision_facts.py", "_with_breaker"): "as _read",
    ("airflow_retrywindow/triggers/gated.py", "_inner"): "the GatedTrigger it just built",
}
#: computed attribute or module names, one function each, and why they reach nothing of
#: Airflow's private
COMPUTED = {
    ("airflow_retrywindow/__init__.py", "__getattr__"): "the package's own lazy exports",
    ("airflow_retrywindow/records/composition.py", "_inside"): (
        "the search for a window held out of sight walks a DAG author's objects"
    ),
    ("airflow_retrywindow/records/composition.py", "_attributes"): "as _inside",
    ("airflow_retrywindow/version_compat.py", "__getattr__"): "MOVED, checked above",
    ("airflow_retrywindow/cli/plan.py", "_budget_option"): "the command line's own options",
    ("airflow_retrywindow/notifications/notifier.py", "deliver"): (
        "the wrapped notifier's attributes fill= names, checked to exist"
    ),
    ("airflow_retrywindow/notifications/notifier.py", "_fill_argument"): "as deliver",
    ("airflow_retrywindow/policies/failures.py", "_resolve"): (
        "an exception class the DAG author names by its dotted path"
    ),
    ("airflow_retrywindow/policies/read_only.py", "__getattr__"): (
        "the try's task instance, read for a resumable job's own status read"
    ),
    ("airflow_retrywindow/triggers/gated.py", "_trigger_class"): (
        "the trigger class a deferring task names"
    ),
}
#: the task runner's internal names, which do not start with an underscore
INTERNAL_NAMES = frozenset({"SUPERVISOR_COMMS", "InProcessSupervisorComms"})
#: private names of the standard library's named tuples, which are their public API
STANDARD = frozenset({"_replace", "_fields", "_asdict", "_make", "_field_defaults"})
#: roots of the modules checked
FOREIGN_ROOTS = ("airflow", "airflow_client")
#: calls that read, set or test an attribute by a name given as their second argument
ATTRIBUTE_CALLS = frozenset({"getattr", "hasattr", "setattr", "delattr", "__setattr__"})
#: calls that import a module named by their first argument
IMPORT_CALLS = frozenset({"import_module", "__import__", "find_spec"})
_PRIVATE = re.compile(r"_[A-Za-z0-9][A-Za-z0-9_]*")
_DUNDER = re.compile(r"__\w+__")
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")


def private(name: str) -> bool:
    """Whether ``name`` is private: one leading underscore, not a dunder."""
    return bool(_PRIVATE.fullmatch(name)) and not _DUNDER.fullmatch(name)


def public(path: str) -> bool:
    """Whether the dotted ``path`` (a module, or a module's name) is Airflow's public API."""
    parts = path.split(".")
    if any(private(part) for part in parts[1:]):
        return False
    if path == "airflow":
        return True  # the package itself: what is read from it is checked by its path
    for cut in range(len(parts), 0, -1):
        module, rest = ".".join(parts[:cut]), parts[cut:]
        if module in PUBLIC_TREES:
            return True
        if module in PUBLIC:
            return len(rest) <= 1
        if module in PUBLIC_NAMES:
            return not rest or (len(rest) == 1 and rest[0] in PUBLIC_NAMES[module])
    return False


def _foreign(path: str) -> bool:
    return path.split(".", 1)[0] in FOREIGN_ROOTS


def _on_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def _callee(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _strings(node: ast.expr | None, constants: dict[str, list[str]]) -> list[str] | None:
    """The strings ``node`` can be, when it is a literal or a constant; else ``None``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        found: list[str] = []
        for item in node.elts:
            strings = _strings(item, constants)
            if strings is None:
                return None
            found.extend(strings)
        return found
    if isinstance(node, ast.Dict):
        return _strings(ast.Tuple(elts=[key for key in node.keys if key is not None]), constants)
    keys = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    if keys and node.func.attr in ("items", "keys") and not node.args:  # type: ignore[union-attr]
        return _strings(node.func.value, constants)  # type: ignore[union-attr]  # a dict's keys
    return None


def _loops(tree: ast.AST, constants: dict[str, list[str]]) -> dict[str, list[str]]:
    """What each loop's (or comprehension's) first name in ``tree`` runs over, where known."""
    found: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        loops = [node] if isinstance(node, ast.For) else getattr(node, "generators", [])
        for loop in loops:
            target = loop.target
            first = target.elts[0] if isinstance(target, ast.Tuple) else target
            values = _strings(loop.iter, constants)
            if isinstance(first, ast.Name) and values is not None:
                found.setdefault(first.id, []).extend(values)
    return found


@dataclass
class Module:
    """One module read: where it is (from the repository root), its tree, and the strings
    its module-level constants hold."""

    where: str
    tree: ast.Module
    constants: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for node in self.tree.body:
            target = node.target if isinstance(node, ast.AnnAssign) else None
            targets = node.targets if isinstance(node, ast.Assign) else [target]
            value = getattr(node, "value", None)
            for name in targets:
                found = _strings(value, self.constants) if value is not None else None
                if isinstance(name, ast.Name) and found is not None:
                    self.constants[name.id] = found

    def uses(self) -> list[tuple[int, str]]:
        """Each use of Airflow outside its public API: its line and what it is."""
        return _Reader(self).read()


class _Reader(ast.NodeVisitor):
    """Walks one module, knowing the function it is in and the strings already judged."""

    def __init__(self, module: Module) -> None:
        self.module = module
        self.function = ""
        self.constants = module.constants  # and the loops of the function read
        self.found: list[tuple[int, str]] = []
        self.judged: set[int] = set()  # strings that name an attribute of self
        self.chained: set[int] = set()  # attributes inside a longer airflow.x.y chain

    def read(self) -> list[tuple[int, str]]:
        self.visit(self.module.tree)
        return sorted(set(self.found))

    def _report(self, node: ast.AST, what: str) -> None:
        self.found.append((getattr(node, "lineno", 0), what))

    def _allowed(self, table: dict[tuple[str, str], str], key: str) -> bool:
        return (self.module.where, key) in table

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        outer = self.function, self.constants
        self.function = node.name
        self.constants = {**self.module.constants, **_loops(node, self.module.constants)}
        self.generic_visit(node)
        self.function, self.constants = outer

    visit_AsyncFunctionDef = visit_FunctionDef  # noqa: N815

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if _foreign(alias.name) and not self._path_allowed(alias.name):
                self._report(node, f"import {alias.name}")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level or not _foreign(module):
            return
        for alias in node.names:
            path = f"{module}.{alias.name}"
            if alias.name in INTERNAL_NAMES or not self._path_allowed(path):
                self._report(node, f"import {alias.name} from {module}")

    def _path_allowed(self, path: str) -> bool:
        return public(path) or any(
            where == self.module.where and (path == module or path.startswith(f"{module}."))
            for where, module in OLDER_MINORS
        )

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.value, ast.Attribute):
            self.chained.add(id(node.value))
        dotted = ast.unparse(node)
        outermost = id(node) not in self.chained and _DOTTED.fullmatch(dotted)
        if outermost and _foreign(dotted) and not self._path_allowed(dotted):
            self._report(node, f"attribute chain {dotted}")
        name = node.attr
        if name in INTERNAL_NAMES:
            self._report(node, f"name {name}")
        elif self._foreign_private(name) and not _on_self(node.value):
            self._report(node, f"attribute .{name}")
        self.generic_visit(node)

    def _foreign_private(self, name: str) -> bool:
        """Whether ``name`` is private and not the package's own in this one use."""
        return private(name) and name not in STANDARD and not self._allowed(OWN, name)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in INTERNAL_NAMES:
            self._report(node, f"name {node.id}")

    def visit_Call(self, node: ast.Call) -> None:
        callee = _callee(node)
        if callee in ATTRIBUTE_CALLS and len(node.args) >= 2:
            self._attribute_call(node, callee)
        elif callee in IMPORT_CALLS and node.args:
            self._import_call(node, callee)
        self.generic_visit(node)

    def _import_call(self, node: ast.Call, callee: str) -> None:
        if _strings(node.args[0], self.constants) is None:
            self._computed(node, f"{callee}() of a computed module name")

    def _attribute_call(self, node: ast.Call, callee: str) -> None:
        owner, name = node.args[0], node.args[1]
        if _on_self(owner):
            self.judged.add(id(name))
            return
        names = _strings(name, self.constants)
        if names is None:
            self._computed(node, f"{callee}() of a computed attribute name")
            return
        for text in names:
            if self._foreign_private(text):
                self._report(node, f"{callee}() of {text!r}")
        self.judged.add(id(name))

    def _computed(self, node: ast.Call, what: str) -> None:
        if not self._allowed(COMPUTED, self.function):
            self._report(node, what)

    def visit_Constant(self, node: ast.Constant) -> None:
        text = node.value
        if not isinstance(text, str) or id(node) in self.judged:
            return
        module = _DOTTED.fullmatch(text) and _foreign(text) and not self._path_allowed(text)
        if text in INTERNAL_NAMES or self._foreign_private(text) or module:
            self._report(node, f"string {text!r}")


def read(where: str, source: str) -> Module:
    """A module of the package, ``where`` its path from the repository root."""
    return Module(where, ast.parse(source, where))


def modules(package: Path, skip: Path) -> list[Module]:
    """Every module of ``package`` but ``skip``, read."""
    return [
        read(str(path.relative_to(package.parent)), path.read_text(encoding="utf-8"))
        for path in sorted(package.rglob("*.py"))
        if path != skip
    ]
