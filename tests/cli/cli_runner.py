"""Running the command line and the reference listing as real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
REFERENCE = ROOT / "tests" / "reference" / "reference_model.py"


def environment() -> dict[str, str]:
    """The current environment, with the work tree importable first."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop("PYTHONWARNINGS", None)
    return env


def run_python(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """``python ARGS`` in the work tree with ``stdin`` as its input."""
    return subprocess.run(
        [sys.executable, *args],
        input=stdin,
        capture_output=True,
        env=environment(),
        cwd=ROOT,
        timeout=60,
        check=False,
    )


def run_cli(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """``python -m airflow_retrywindow ARGS`` with ``stdin`` as its input."""
    return run_python("-m", "airflow_retrywindow", *args, stdin=stdin)


def run_reference(stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    """The reference listing run as ``python3 run.py < case.json``."""
    return subprocess.run(
        [sys.executable, str(REFERENCE)],
        input=stdin,
        capture_output=True,
        env=environment(),
        timeout=60,
        check=False,
    )


def refusal_lines(process: subprocess.CompletedProcess[bytes]) -> list[str]:
    """The stderr lines of a refused input, checking the refusal's shape on the way."""
    assert process.returncode == 2
    assert process.stdout == b""
    text = process.stderr.decode()
    assert "Traceback" not in text
    lines = text.splitlines()
    assert len(lines) == 2 and text.endswith("\n")
    assert lines[0] == "Invalid retry fixture"
    return lines
