"""Every stored shape is built by its class in ``records/``: no other module builds one.

A module outside ``airflow_retrywindow/records/`` that stores a value (the task
state store's ``set``, or ``xcom_push``) must hand over what a records class
built: a call such as ``record.as_dict()`` or ``evidence.appended(...)``, or a
name bound from one. A dict it builds itself (a dict display, ``{**x, ...}``,
``dict(...)``, a comprehension), directly or through a local name, is how a
writer and its reader drift apart, and fails this test. Values that are not
records (a try number, a job id) are not dicts and pass.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import airflow_retrywindow

PACKAGE = Path(airflow_retrywindow.__file__).parent
RECORDS = PACKAGE / "records"
#: the methods that store a value, and the position of the value among their arguments
STORING = {"set": 1, "xcom_push": 1}
#: the keyword the value may be given by
VALUE_KEYWORDS = ("value",)


def _stored_value(call: ast.Call) -> ast.expr | None:
    """The value argument of a storing call, or ``None`` when it is not one."""
    if not isinstance(call.func, ast.Attribute) or call.func.attr not in STORING:
        return None
    for keyword in call.keywords:
        if keyword.arg in VALUE_KEYWORDS:
            return keyword.value
    position = STORING[call.func.attr]
    return call.args[position] if len(call.args) > position else None


def _built_here(value: ast.expr) -> bool:
    """Whether ``value`` is a dict its own module builds."""
    if isinstance(value, (ast.Dict, ast.DictComp)):
        return True
    return (
        isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict"
    )


def _bindings(scope: ast.AST) -> dict[str, list[ast.expr]]:
    """Every value a local name is bound to in ``scope`` (a function or a module)."""
    found: dict[str, list[ast.expr]] = {}
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name):
                found.setdefault(target.id, []).append(value)
    return found


def _self_built(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """``path:line`` of each storing call in ``path`` whose value the module builds itself."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    scopes = [
        node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    problems: list[str] = []
    for scope in [tree, *scopes]:
        bound = _bindings(scope)
        for node in ast.walk(scope):
            value = _stored_value(node) if isinstance(node, ast.Call) else None
            if value is None:
                continue
            candidates = (bound.get(value.id, []) if isinstance(value, ast.Name) else [value]) or [
                value
            ]
            if any(_built_here(candidate) for candidate in candidates):
                problems.append(f"{path.relative_to(root)}:{node.lineno}")
    return sorted(set(problems))


def _outside_records() -> list[Path]:
    return sorted(
        path for path in PACKAGE.rglob("*.py") if RECORDS not in path.parents and path != RECORDS
    )


def test_no_module_outside_records_stores_a_dict_it_built() -> None:
    problems = sorted({line for path in _outside_records() for line in _self_built(path)})
    assert problems == [], (
        "these store a dict built outside airflow_retrywindow/records/: build it with the "
        f"shape's class in records/ instead: {problems}"
    )


@pytest.mark.parametrize(
    "source",
    [
        "def f(ti, record):\n    ti.xcom_push(key='k', value={**record, 'action': 'timeout'})\n",
        "def f(store):\n    store.set('k', {'tryNumber': 1})\n",
        "def f(store):\n    marker = dict(tryNumber=1)\n    store.set('k', marker)\n",
        "def f(ti, rows):\n    ti.xcom_push(key='k', value={r: 1 for r in rows})\n",
    ],
)
def test_a_dict_built_outside_records_is_found(tmp_path: Path, source: str) -> None:
    module = tmp_path / "probe.py"
    module.write_text(source, encoding="utf-8")
    assert _self_built(module, root=tmp_path) == ["probe.py:" + _line(source)]


@pytest.mark.parametrize(
    "source",
    [
        "def f(ti, entry):\n    ti.xcom_push(key='k', value=entry['tryNumber'])\n",
        "def f(store, marker):\n    store.set('k', marker.as_dict())\n",
        "def f(store, history, entry):\n    store.set('k', evidence.appended(history, entry))\n",
        "def f(ti, record):\n    ti.xcom_push(key='return_value', value=record)\n",
    ],
)
def test_a_value_a_records_class_built_passes(tmp_path: Path, source: str) -> None:
    module = tmp_path / "probe.py"
    module.write_text(source, encoding="utf-8")
    assert _self_built(module, root=tmp_path) == []


def _line(source: str) -> str:
    """The line of the storing call in a probe."""
    for number, text in enumerate(source.splitlines(), start=1):
        if ".set(" in text or "xcom_push(" in text:
            return str(number)
    raise AssertionError("the probe stores nothing")
