"""CI's chains beside the suite end at CI's deadline: a hung one fails CI with its log.

``.ci/run`` starts its chains and waits for them with the functions of ``.ci/beside``;
here they run with a deadline a second away, on chains that hang.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: far past the chains' deadline (1 s) and their time to stop (1 s more): a chain left
#: running holds the script until this ends it, and the test fails
HUNG = 600


def run_chains(tmp_path: Path, *chains: tuple[str, str]) -> subprocess.CompletedProcess[str]:
    """``.ci/beside``'s functions, as ``.ci/run`` calls them, on ``chains`` (name, command)
    with a deadline one second away; the script prints ``status N`` at the end."""
    (tmp_path / ".test-runs").mkdir()
    started = "\n".join(f"start_beside {name} {_quoted(command)}" for name, command in chains)
    script = f"""
        set -euo pipefail
        ci_deadline=$((SECONDS + 1))
        source {ROOT / ".ci" / "beside"}
        {started}
        trap stop_beside EXIT
        status=0
        wait_beside || status=$?
        trap - EXIT
        echo "status $status"
    """
    return subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "CI_KILL_AFTER": "1"}, check=False,
        capture_output=True, text=True, timeout=HUNG / 2,
    )  # fmt: skip


def _quoted(command: str) -> str:
    return "'" + command.replace("'", "'\\''") + "'"


def test_a_hung_chain_is_stopped_at_the_deadline_and_fails_ci_with_its_log(
    tmp_path: Path,
) -> None:
    done = run_chains(
        tmp_path,
        ("finished", "echo finished its work"),
        ("hung", f"echo started its work; sleep {HUNG}"),
        # one that ignores SIGTERM is killed after CI_KILL_AFTER
        ("deaf", f"trap '' TERM; echo deaf to SIGTERM; sleep {HUNG}"),
    )
    assert done.returncode == 0, done.stderr
    output = done.stdout.splitlines()
    assert output[-1] == "status 1"
    for name, line in (("finished", "finished its work"), ("hung", "started its work")):
        assert output[output.index(f"==> [ci] output of {name}") + 1] == line
    assert "deaf to SIGTERM" in output
    assert "==> [ci] finished failed" not in done.stderr
    for name, status in (("hung", 124), ("deaf", 137)):
        assert f"==> [ci] {name} was stopped at CI's deadline" in done.stderr
        assert f"==> [ci] {name} failed (exit status {status})" in done.stderr


def test_chains_that_end_in_time_pass(tmp_path: Path) -> None:
    done = run_chains(tmp_path, ("quick", "echo quick"), ("also", "true"))
    assert done.stdout.splitlines()[-1] == "status 0", done.stderr
    assert done.stderr == ""


def test_ci_runs_its_chains_and_its_suite_under_the_deadline() -> None:
    run = (ROOT / ".ci" / "run").read_text()
    assert "source .ci/beside" in run
    assert run.count("start_beside ") >= 3 and "wait_beside" in run
    assert 'timeout --kill-after="$kill_after" "$((ci_deadline - SECONDS))"' in run
    assert "ci_deadline=$((started + 40 * 60" in run
