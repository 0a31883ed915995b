"""The modules sharing a stack go to one worker together; every other module stays whole."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.shared_stack import MODULES, STACKS, ModulesTogether, SharedStacks, Sharing


def _scope(nodeid: str) -> str:
    # the scope rule alone: it reads nothing of the scheduler's own state
    return ModulesTogether._split_scope(object.__new__(ModulesTogether), nodeid)


def test_the_modules_sharing_a_stack_are_one_unit_of_work() -> None:
    for sharing in STACKS:
        scopes = {_scope(f"{module}::test_one[case]") for module in sharing.modules}
        assert len(sharing.modules) >= 2
        assert scopes == {sharing.name}
    assert len({sharing.name for sharing in STACKS}) == len(STACKS)


def test_every_other_module_is_a_unit_of_its_own() -> None:
    first = _scope("tests/gate/test_gate_run.py::test_a")
    assert first == _scope("tests/gate/test_gate_run.py::test_b[x::y]")
    assert first == "tests/gate/test_gate_run.py"
    assert first != _scope("tests/gate/test_sensor_run.py::test_a")
    assert first not in {_scope(f"{module}::test_a") for module in MODULES}


def test_a_shared_stack_stops_after_the_last_test_sharing_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (first,) = STACKS
    # a second shared stack, for the move from one to another
    second = Sharing("other-stack", first.services, {"tests/x/test_other.py": (Path("x"),)})
    monkeypatch.setitem(MODULES, "tests/x/test_other.py", second)
    stopped: list[str] = []
    stacks = SharedStacks(factory=None)  # type: ignore[arg-type]  # boots nothing here
    for sharing in (first, second):
        stops = ExitStack()
        stops.callback(stopped.append, sharing.name)
        stacks._running[sharing.name] = (None, stops)  # type: ignore[assignment]
    one, other = list(first.modules)[:2]
    elsewhere = next(iter(second.modules))
    stacks.done(one, other)  # the next test shares the same stack: it keeps running
    assert stopped == []
    stacks.done(other, elsewhere)  # the next one shares another
    assert stopped == [first.name]
    stacks.done(elsewhere, None)  # the last test of the worker
    assert stopped == [first.name, second.name]
    stacks.done("tests/gate/test_gate_run.py", None)  # a module of its own stops nothing
    stacks.close()
    assert stopped == [first.name, second.name]
