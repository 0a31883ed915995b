"""What decides by a version, found by reading a module: only version_compat.py may.

A decision by Airflow's version (or any version) is reported where a module:

* reads a version: ``importlib.metadata``'s ``version``, ``__version__`` of Airflow, or
  Airflow's distribution by name;
* parses one: ``packaging``, a regular expression of digits and dots, ``int()`` over a
  ``split(".")``;
* compares one: with a tuple of a few small numbers, or a text such as ``"3.2"``
  (``==``, ``startswith``);
* switches on an import: an ``except ImportError`` (or ``ModuleNotFoundError``) that is not
  one of :data:`IMPORT_SWITCHES`, where what fails to import is no part of Airflow's
  version; or on what one of Airflow's modules has (``hasattr(airflow.sdk, ...)``).
"""

from __future__ import annotations

import ast
import re

#: the one module that decides by Airflow's version
VERSION_MODULE = "airflow_retrywindow/version_compat.py"
#: handlers of ImportError that decide nothing by a version, one function each, and why
IMPORT_SWITCHES = {
    ("airflow_retrywindow/hooks/api_reader.py", "_register_secret"): (
        "no Airflow installed: nothing logs through its masker"
    ),
    ("airflow_retrywindow/timing/retry_settings.py", "airflow_delay_cap"): (
        "no Airflow installed: its documented default stands in"
    ),
    ("airflow_retrywindow/policies/failures.py", "_resolve"): (
        "an exception class the DAG author names by its dotted path"
    ),
    ("airflow_retrywindow/triggers/gated.py", "_trigger_class"): (
        "the trigger class a deferring task names"
    ),
}
#: Airflow's distributions, whose metadata holds its version
DISTRIBUTIONS = frozenset({"apache-airflow", "apache-airflow-core"})
#: a version written as text: ``3.2``, ``3.2.2``
_WRITTEN = re.compile(r"\d+\.\d+(\.\d+)?")
_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError"})
_ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)


def _version_tuple(node: ast.expr) -> bool:
    """``(3, 2)`` or ``(3, 2, 0)``: a few small whole numbers."""
    if not isinstance(node, ast.Tuple) or not 2 <= len(node.elts) <= 4:
        return False
    numbers = [item.value for item in node.elts if isinstance(item, ast.Constant)]
    return (
        len(numbers) == len(node.elts)
        and all(isinstance(number, int) and 0 <= number < 10 for number in numbers[:1])
        and all(isinstance(number, int) for number in numbers)
    )


def _written_version(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and bool(_WRITTEN.fullmatch(node.value))
    )


def _caught(handler: ast.ExceptHandler) -> set[str]:
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return {ast.unparse(kind).rpartition(".")[2] for kind in kinds if kind is not None}


class _Reader(ast.NodeVisitor):
    def __init__(self, where: str) -> None:
        self.where = where
        self.function = ""
        self.found: list[tuple[int, str]] = []

    def _report(self, node: ast.AST, what: str) -> None:
        self.found.append((getattr(node, "lineno", 0), what))

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        outer, self.function = self.function, node.name
        self.generic_visit(node)
        self.function = outer

    visit_AsyncFunctionDef = visit_FunctionDef  # noqa: N815

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".", 1)[0] == "packaging":
                self._report(node, f"parses a version: import {alias.name}")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        names = {alias.name for alias in node.names}
        if module.split(".", 1)[0] == "packaging":
            self._report(node, f"parses a version: from {module}")
        elif module == "importlib.metadata" and "version" in names:
            self._report(node, "reads a version: importlib.metadata.version")
        elif module == "airflow" and "__version__" in names:
            self._report(node, "reads a version: airflow.__version__")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr == "__version__" and ast.unparse(node.value).split(".", 1)[0] == "airflow":
            self._report(node, "reads a version: airflow.__version__")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        text = node.value
        if text in DISTRIBUTIONS:
            self._report(node, f"reads a version: the distribution {text!r}")
        elif isinstance(text, str) and ("\\d" in text or "[0-9]" in text) and "\\." in text:
            self._report(node, f"parses a version: the pattern {text!r}")

    def visit_Compare(self, node: ast.Compare) -> None:
        sides = [node.left, *node.comparators]
        ordered = all(isinstance(op, _ORDER) for op in node.ops)
        if ordered and any(_version_tuple(side) or _written_version(side) for side in sides):
            self._report(node, f"compares a version: {ast.unparse(node)}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        owner = ast.unparse(node.args[0]) if node.args else ""
        if name in ("hasattr", "getattr") and owner.split(".", 1)[0] == "airflow":
            self._report(node, f"switches on what Airflow has: {ast.unparse(node)}")
        if name == "startswith" and any(_written_version(arg) for arg in node.args):
            self._report(node, f"compares a version: {ast.unparse(node)}")
        to_int = name == "map" and bool(node.args) and ast.unparse(node.args[0]) == "int"
        if to_int and any(_splits_dots(arg) for arg in node.args[1:]):
            self._report(node, f"parses a version: {ast.unparse(node)}")
        self.generic_visit(node)

    def visit_GeneratorExp(self, node: ast.GeneratorExp | ast.ListComp) -> None:
        element = node.elt
        to_int = isinstance(element, ast.Call) and ast.unparse(element.func) == "int"
        if to_int and any(_splits_dots(loop.iter) for loop in node.generators):
            self._report(node, f"parses a version: {ast.unparse(node)}")
        self.generic_visit(node)

    visit_ListComp = visit_GeneratorExp  # noqa: N815

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if _caught(node) & _IMPORT_ERRORS and (self.where, self.function) not in IMPORT_SWITCHES:
            self._report(node, f"switches on an import: except {ast.unparse(node.type)}")  # type: ignore[arg-type]
        self.generic_visit(node)


def _splits_dots(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "split"
        and bool(node.args)
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value == "."
    )


def decisions(where: str, source: str) -> list[tuple[int, str]]:
    """Each decision by a version in a module: its line and what it is.

    :param where: the module's path from the repository root.
    :param source: its text.
    """
    reader = _Reader(where)
    reader.visit(ast.parse(source, where))
    return sorted(set(reader.found))
