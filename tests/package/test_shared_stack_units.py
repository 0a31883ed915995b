"""The modules sharing a stack go to one worker together; every other module stays whole."""

from __future__ import annotations

from tests.shared_stack import MODULES, ModulesTogether


def _scope(nodeid: str) -> str:
    # the scope rule alone: it reads nothing of the scheduler's own state
    return ModulesTogether._split_scope(object.__new__(ModulesTogether), nodeid)


def test_the_modules_sharing_the_stack_are_one_unit_of_work() -> None:
    scopes = {_scope(f"{module}::test_one[case]") for module in MODULES}
    assert len(MODULES) >= 2
    assert len(scopes) == 1


def test_every_other_module_is_a_unit_of_its_own() -> None:
    first = _scope("tests/gate/test_gate_run.py::test_a")
    assert first == _scope("tests/gate/test_gate_run.py::test_b[x::y]")
    assert first == "tests/gate/test_gate_run.py"
    assert first != _scope("tests/gate/test_sensor_run.py::test_a")
    assert first not in {_scope(f"{module}::test_a") for module in MODULES}
