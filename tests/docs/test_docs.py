"""The docs lint cleanly: links and anchors resolve, Python blocks parse, examples run.

README.md and every page under docs/ are read as a user reads them on the
repository's web view: a relative link must name a file that exists, and a
``#fragment`` one of that file's headings; every ```python block must be valid
Python, and every ``>>>`` example must print what the page says.
"""

from __future__ import annotations

import ast
import doctest
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# [text](target) and ![alt](target), the target up to a space or the closing parenthesis
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.MULTILINE)


def _prose(text: str) -> str:
    """The page without its fenced code blocks, whose brackets are code."""
    return FENCE.sub("", text)


def anchors(text: str) -> set[str]:
    """The fragments a page's headings answer to, as GitHub makes them."""
    found: set[str] = set()
    for heading in HEADING.findall(_prose(text)):
        plain = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
        slug = re.sub(r"[^\w\- ]", "", plain.strip().lower().replace("`", "")).replace(" ", "-")
        candidate, n = slug, 1
        while candidate in found:  # repeated headings get -1, -2, ...
            candidate, n = f"{slug}-{n}", n + 1
        found.add(candidate)
    return found


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """Every relative link of ``page`` whose file or heading does not exist.

    :param root: the folder the messages name files from.
    """
    text = page.read_text()
    broken = []
    for target in LINK.findall(_prose(text)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no file {linked.relative_to(root)}")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked.read_text()):
            broken.append(f"{target}: {linked.name} has no heading #{fragment}")
    return broken


def python_blocks(page: Path) -> list[tuple[int, str]]:
    """(line, code) of every ```python block that is not a ``>>>`` session."""
    text = page.read_text()
    return [
        (text[: found.start()].count("\n") + 1, found.group(2))
        for found in FENCE.finditer(text)
        if found.group(1) == "python" and not found.group(2).lstrip().startswith(">>>")
    ]


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    assert broken_links(page) == []


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_python_block_is_valid_python(page: Path) -> None:
    invalid = []
    for line, code in python_blocks(page):
        try:
            ast.parse(code)
        except SyntaxError as error:
            invalid.append(f"line {line + (error.lineno or 0)}: {error.msg}")
    assert invalid == []


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_interactive_example_prints_what_the_page_says(page: Path) -> None:
    # a fence line would read as the last line of an example's expected output
    text = re.sub(r"^```.*$", "", page.read_text(), flags=re.MULTILINE)
    test = doctest.DocTestParser().get_doctest(text, {}, _name(page), str(page), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.failures == 0, f"{runner.failures} of {runner.tries} examples failed"


def test_the_link_check_finds_a_broken_file_and_a_broken_heading(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# A `code` heading\n\n## Twice\n\n## Twice\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#a-code-heading) [ok](other.md#twice-1) [gone](missing.md) "
        "[bad](other.md#nowhere) [web](https://example.org/x)\n```\n[code](not-a-link.md)\n```\n"
    )
    assert broken_links(page, root=tmp_path) == [
        "missing.md: no file missing.md",
        "other.md#nowhere: other.md has no heading #nowhere",
    ]
