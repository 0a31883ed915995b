"""The command line's streams: the fixture in, the answer or the refusal out."""

from __future__ import annotations

import io
import json
import os
import sys

#: the largest input accepted, in characters
MAX_CHARS = 1_000_000
HEADLINE = "Invalid retry fixture"


class UnreadableInputError(Exception):
    """The input could not be read or decoded as JSON.

    :param reason: what was wrong with it, in one line.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def read_text(path: str) -> str:
    """Read at most one character more than the limit, as UTF-8, from ``path``.

    Line endings are kept as they are, as standard input keeps them, so that
    the size limit counts the same characters for a file and for a pipe.

    :param path: a file name, or ``-`` for standard input.
    :raises UnreadableInputError: if it cannot be read, is not UTF-8, or is too large.
    """
    try:
        if path == "-":
            text = _read_stdin()
        else:
            with open(path, encoding="utf-8", errors="strict", newline="") as stream:
                text = stream.read(MAX_CHARS + 1)
    except UnicodeDecodeError as error:
        raise UnreadableInputError(f"input is not valid UTF-8: {error}") from None
    except OSError as error:
        raise UnreadableInputError(f"cannot read {path!r}: {error.strerror or error}") from None
    if len(text) > MAX_CHARS:
        raise UnreadableInputError(f"input is larger than {MAX_CHARS:,} characters")
    return text


def _read_stdin() -> str:
    if sys.stdin is None:
        raise UnreadableInputError("there is no standard input to read")
    binary = getattr(sys.stdin, "buffer", None)
    if binary is None:
        return sys.stdin.read(MAX_CHARS + 1)
    # decode strictly whatever the locale says: bad bytes are refused, not replaced
    stream = io.TextIOWrapper(binary, encoding="utf-8", errors="strict", newline="")
    try:
        return stream.read(MAX_CHARS + 1)
    finally:
        stream.detach()


def load(path: str) -> object:
    """Read and decode the JSON fixture at ``path``.

    :param path: a file name, or ``-`` for standard input.
    :raises UnreadableInputError: if it cannot be read or is not JSON.
    """
    text = read_text(path)
    try:
        return json.loads(text)
    except RecursionError:
        raise UnreadableInputError("input is nested too deeply") from None
    except ValueError as error:
        raise UnreadableInputError(f"input is not valid JSON: {error}") from None


def emit(text: str) -> int:
    """Write ``text`` to standard output and return the exit status 0.

    A reader that goes away early (``| head``) is not an error worth a traceback:
    the rest of the output is dropped and the status is 1.

    :param text: the complete output, newline included.
    """
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # point stdout at nothing, so the interpreter's final flush stays quiet too
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0


def refuse(reason: str) -> int:
    """Report refused input on standard error and return the exit status 2.

    :param reason: why the input was refused.
    """
    sys.stderr.write(f"{HEADLINE}\n{' '.join(reason.splitlines())}\n")
    return 2
