"""Each minor's nox session (noxfile.py): what it runs, and when it fails."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.package.test_import_cycles import PACKAGE

ROOT = PACKAGE.parent


@pytest.fixture(scope="module")
def noxfile() -> Iterator[ModuleType]:
    """noxfile.py, loaded once as nox loads it (it registers its sessions); the PATH it
    extends is put back after the module's tests."""
    pytest.importorskip("nox")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", os.environ.get("PATH", ""))
        spec = importlib.util.spec_from_file_location("noxfile", ROOT / "noxfile.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        patch.setitem(sys.modules, "noxfile", module)  # its dataclasses look it up
        spec.loader.exec_module(module)
        yield module


def _report(folder: Path, *, tests: int, skipped: int, failures: int = 0) -> Path:
    """A pytest JUnit report with these counts, as pytest writes its head."""
    report = folder / "report.xml"
    report.write_text(
        '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" '
        f'errors="0" failures="{failures}" skipped="{skipped}" tests="{tests}" time="1.0"/>'
        "</testsuites>"
    )
    return report


def test_a_session_whose_every_test_skipped_fails(noxfile: ModuleType, tmp_path: Path) -> None:
    counts = noxfile._counts(_report(tmp_path, tests=12, skipped=12))
    assert counts["passed"] == 0
    assert noxfile.nothing_ran(counts) == (
        "no test passed (12 of 12 skipped): the session proves nothing about this minor; "
        "see each skip's reason above"
    )


def test_a_session_with_a_passed_test_stands(noxfile: ModuleType, tmp_path: Path) -> None:
    counts = noxfile._counts(_report(tmp_path, tests=12, skipped=11))
    assert counts["passed"] == 1
    assert noxfile.nothing_ran(counts) is None


def test_the_older_minors_run_the_gates_fail_closed_path_and_its_metrics(
    noxfile: ModuleType,
) -> None:
    # the README says a gate fails closed on 3.1 and 3.2 too, and counts its decisions there
    assert "tests/gate/test_gate_run.py" in noxfile.SUBSET
    assert "tests/metrics/test_metrics_on_airflow.py" in noxfile.SUBSET
    deselected = [arg for arg in noxfile.SUBSET if arg.startswith("--deselect")]
    assert deselected == [
        "--deselect=tests/ui/test_view_on_airflow.py::"
        "test_refused_task_shows_its_decision_and_timeline_in_a_browser"
    ]


def test_the_older_minors_hold_on_an_open_breaker_with_no_retry_policy(
    noxfile: ModuleType,
) -> None:
    # the docs say the gate and the sensor hold on a breaker pool's state on 3.1 and 3.2
    assert "tests/gate/test_pool_open_run.py" in noxfile.SUBSET
    assert "tests/ui/test_breaker_rows.py" in noxfile.SUBSET


#: the pair `make test` runs, beside the sessions: every test on Airflow 3.3 and Python 3.11
SUITE = ("3.3", "3.11")


def _published_pairs() -> set[tuple[str, str]]:
    """The (Airflow minor, Python) pairs the package's index page says are tested."""
    text = (ROOT / "docs" / "pypi-description.md").read_text()
    section = text.split("## Requirements", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (3\.\d+)\.\d+ \| ([0-9., ]+) \|", section, re.MULTILINE)
    return {(airflow, python.strip()) for airflow, pythons in rows for python in pythons.split(",")}


def test_the_index_page_claims_tested_only_the_pairs_something_runs(noxfile: ModuleType) -> None:
    # Airflow 3.3 on Python 3.10 installs, but no session runs it
    run = {(minor.airflow, minor.python) for minor in noxfile.MINORS} | {SUITE}
    assert _published_pairs() == run
