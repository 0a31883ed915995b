"""``evaluate`` as a real process: byte for byte like the reference listing."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest

from tests.cli.cli_runner import EXAMPLES, refusal_lines, run_cli, run_reference

CASE = (EXAMPLES / "case.json").read_bytes()
BOUNDARIES = sorted(path.name for path in (EXAMPLES / "boundaries").glob("*.json"))


def variants(count: int) -> list[bytes]:
    """Valid and invalid fixtures derived from the seed case, always the same ones."""
    rng = random.Random(20240607)
    base = json.loads(CASE)
    found = []
    for _ in range(count):
        payload: Any = copy.deepcopy(base)
        payload["asOf"] = rng.choice([95, 100, 103, 140, 150])
        payload["deadline"] = rng.choice([100, 128, 139, 140, 200])
        payload["policy"]["multiplier"] = rng.randint(1, 5)
        for task in payload["tasks"]:
            task["attempts"] = rng.randint(1, 4)
            task["safeRepeat"] = rng.random() < 0.7
        rng.shuffle(payload["tasks"])
        found.append(json.dumps(payload, indent=rng.choice([None, 2])).encode())
    return found


@pytest.mark.parametrize("name", ["case.json", *BOUNDARIES])
def test_stdout_matches_reference_byte_for_byte(name: str) -> None:
    path = EXAMPLES / "case.json" if name == "case.json" else EXAMPLES / "boundaries" / name
    data = path.read_bytes()

    ours, reference = run_cli(stdin=data), run_reference(data)

    assert ours.returncode == reference.returncode
    assert ours.stdout == reference.stdout
    if reference.returncode == 0:
        assert ours.stderr == b""
        assert ours.stdout.count(b"\n") == 1
    else:
        refusal_lines(ours)


def test_derived_fixtures_match_reference() -> None:
    for data in variants(6):
        ours, reference = run_cli(stdin=data), run_reference(data)
        assert (ours.returncode, ours.stdout) == (reference.returncode, reference.stdout)


def test_evaluate_subcommand_and_file_argument() -> None:
    expected = run_reference(CASE).stdout

    assert run_cli("evaluate", stdin=CASE).stdout == expected
    assert run_cli("evaluate", "-", stdin=CASE).stdout == expected
    from_file = run_cli("evaluate", str(EXAMPLES / "case.json"))
    assert (from_file.returncode, from_file.stdout, from_file.stderr) == (0, expected, b"")


REFUSED = {
    "empty": (b"", "not valid JSON"),
    "not json": (b"{asOf: 1}", "not valid JSON"),
    "null": (b"null", "fixture"),
    "list": (b"[]", "fixture"),
    "nan": (CASE.replace(b'"asOf": 100', b'"asOf": NaN'), "asOf"),
    "bom": (b"\xef\xbb\xbf" + CASE, "not valid JSON"),
    "bad utf-8": (CASE.replace(b'"load"', b'"lo\xffad"'), "UTF-8"),
    "lone bad byte": (b"\xff", "UTF-8"),
    "huge number": (CASE.replace(b'"asOf": 100', b'"asOf": ' + b"9" * 5000), "JSON"),
    "deep nesting": (b"[" * 100_000, "nested too deeply"),
    "deep objects": (b'{"a":' * 50_000, "nested too deeply"),
    "invalid fixture": (
        CASE.replace(b'"attempts": 2', b'"attempts": 0'),
        "tasks[0] (id 'report'): attempts must be an integer from 1 to 10, got 0",
    ),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refusals_have_two_lines_and_match_reference(name: str) -> None:
    data, reason = REFUSED[name]

    ours, reference = run_cli(stdin=data), run_reference(data)

    assert reference.returncode == 2 and reference.stdout == b""
    assert reason in refusal_lines(ours)[1]


def test_input_over_one_million_characters_is_refused() -> None:
    exact = CASE.rstrip() + b" " * (1_000_000 - len(CASE.rstrip()))
    assert len(exact) == 1_000_000

    accepted = run_cli(stdin=exact)
    assert (accepted.returncode, accepted.stdout) == (0, run_reference(exact).stdout)

    over = exact + b" "
    assert run_reference(over).returncode == 2
    assert refusal_lines(run_cli(stdin=over))[1] == "input is larger than 1,000,000 characters"


def test_limit_counts_characters_not_bytes() -> None:
    # 999,998 two-byte characters in a JSON string: 1,000,000 characters, 1,999,998 bytes
    data = b'"' + "\u00e9".encode() * 999_998 + b'"'
    assert len(data.decode()) == 1_000_000

    assert "larger" not in refusal_lines(run_cli(stdin=data))[1]


def test_unreadable_file_is_refused() -> None:
    missing = refusal_lines(run_cli("evaluate", "does/not/exist.json"))
    directory = refusal_lines(run_cli("evaluate", str(EXAMPLES)))

    assert "cannot read 'does/not/exist.json'" in missing[1]
    assert "cannot read" in directory[1]
