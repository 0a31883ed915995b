"""Where the value of a credential name is in a text, whatever the syntax around it.

A name, then ``=`` or ``:`` (or ``%3D``, ``%3A``), with the quotes of a JSON or
Python dict on either side (raw, backslash-escaped or ``%22``/``%27``), is a
candidate; it counts when
:func:`~airflow_retrywindow.credential_names.is_credential_name` says so. Its
value runs:

* to the closing quote, when it is quoted;
* to the end of the line after a ``:``, on a header line (a name that starts its
  line) and for a cookie anywhere (``Cookie: a=1; b=2``: its value is a list of
  pairs);
* otherwise to the next space, ``&``, ``;``, ``,``, quote or bracket (a query
  string, a fragment, a DSN, a ``;``-separated connection string).

A name joined by ``:`` to what follows is a key at the start of a line, or in
the middle of one when it is written like a key (capitalised, or with a ``-`` or
``_`` in it) after a space, a bracket, a comma, a ``;`` or a quote: in
``https://host/v1/token: 500`` the ``token`` is a path's last segment, in ``the
API needs credentials: give ...`` a sentence's word, and the message after either
is no credential.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from airflow_retrywindow.credential_names import (
    fold,
    is_credential_name,
    may_name_a_credential,
    sensitive_names,
)

# a name (letters, digits, '_', '.', '-', raw or percent-encoded), where a name starts
# (not inside another one, but right after a percent-encoded character), then what
# joins it to its value
_NAMED = re.compile(
    r"(?:(?<=%[0-9A-Fa-f]{2})|(?<![A-Za-z0-9_.%-]))"
    r"(?P<name>(?:[A-Za-z0-9_.-]|%5[Ff]|%2[DdEe])+)"
    r"(?P<close>\\?[\"']|%2[27])?"
    r"[ \t]*(?P<join>[:=]|%3[AaDd])[ \t]*"
    r"(?P<open>\\?[\"']|%2[27])?"
)
# an unquoted value: up to a space, '&', ';', ',', a quote or a closing bracket, raw or
# percent-encoded
_UNQUOTED = re.compile(r"(?:[^\s&;,'\"<>)}\]%]|%(?!26|3[Bb]|2[027Cc]))+")
# what may come right before a name joined by ':' (a key, not a path's last segment)
_KEY_BEFORE = (" ", "\t", "\n", "\r", "{", "(", "[", ",", ";", '"', "'", "\\n", "%22", "%27")
_LINE_BREAKS = ("\n", "\r", "\\n", "\\r")
#: how far back from a name its line start or the key's opening is looked for: a long
#: text is not copied once per name in it (further back than this, a name counts as
#: starting its line, and its value runs to the end of the line)
_LOOK_BACK = 80


def credential_spans(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, quote) of each credential value in ``text``, in order.

    ``quote`` is what a mask needs around it to keep the text's syntax: the key's quote
    when the key is quoted and its value is not (JSON stays JSON), else ``""``.
    """
    position, names = 0, sensitive_names()
    if not may_name_a_credential(_decoded(text), names):
        return
    for found in _NAMED.finditer(text):
        if found.start() < position or not _is_key(text, found, names):
            continue
        start = found.end()
        end = _value_end(text, found)
        if end > start:
            yield start, end, _quote_for(found)
            position = end


def _is_key(text: str, found: re.Match[str], names: frozenset[str]) -> bool:
    if not is_credential_name(_decoded(found["name"]), names):
        return False
    if not _joined_by_colon(found) or found["close"]:
        return True
    before = _before(text, found.start())
    if _starts_line(before):
        return True
    # in the middle of a line, a key is written like one: ``Cookie:``, ``x-api-key:``,
    # ``access_token:``; a lowercase word before a colon is a sentence's (``the token:``)
    name = found["name"]
    written_as_key = name[:1].isupper() or "-" in name or "_" in name or "%" in name
    return written_as_key and before.endswith(_KEY_BEFORE)


def _before(text: str, at: int) -> str:
    return text[max(at - _LOOK_BACK, 0) : at]


def _joined_by_colon(found: re.Match[str]) -> bool:
    return found["join"] in (":", "%3A", "%3a")


def _decoded(name: str) -> str:
    return re.sub(r"%([0-9A-Fa-f]{2})", lambda code: chr(int(code[1], 16)), name)


def _value_end(text: str, found: re.Match[str]) -> int:
    start = found.end()
    if found["open"]:
        return _closing_quote(text, start, found["open"])
    if _joined_by_colon(found) and (
        _starts_line(_before(text, found.start())) or "cookie" in fold(_decoded(found["name"]))
    ):
        return _line_end(text, start)
    unquoted = _UNQUOTED.match(text, start)
    end = unquoted.end() if unquoted else start
    # a sentence's full stop after the value is not part of it
    return end - 1 if end > start and text[end - 1] == "." else end


def _closing_quote(text: str, start: int, quote: str) -> int:
    if quote in ('"', "'"):
        inside = re.compile(rf"(?:[^{quote}\\]|\\.)*").match(text, start)
        end = inside.end() if inside else start
    else:
        end = text.find(quote, start)
    return end if end >= 0 else _line_end(text, start)


def _starts_line(before: str) -> bool:
    stripped = before.rstrip(" \t")
    return not stripped or stripped.endswith(_LINE_BREAKS)


def _line_end(text: str, start: int) -> int:
    ends = [text.find(mark, start) for mark in _LINE_BREAKS]
    return min([end for end in ends if end >= 0], default=len(text))


def _quote_for(found: re.Match[str]) -> str:
    close = found["close"]
    return close if close in ('"', "'") and not found["open"] else ""
