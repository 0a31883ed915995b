"""Text that is safe to store: masked secrets, no URL credentials, a bounded length.

Airflow masks what goes into task logs, not what a task stores. Everything the
gate keeps (reasons, evidence, XCom values, ``retry_reason``, decision records,
error messages) passes through :func:`safe_text` first, so a secret registered
with ``mask_secret`` (or a connection's password, which Airflow registers) never
lands in the metadata database through us.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

#: the longest exception text we keep; the log has the whole traceback
MAX_EXCEPTION_TEXT = 300
#: what stands in for anything removed
MASK = "***"

# ``scheme://user:password@host`` anywhere in a text; the userinfo may not hold '/' or space
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/\s@]+@")


def without_userinfo(url: str) -> str:
    """``url`` without ``user:password@``, e.g. for a decision record's ``api`` field."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def _masked(text: str) -> str:
    try:
        from airflow.sdk.log import redact  # type: ignore[attr-defined]
    except ImportError:  # outside Airflow (the CLI): nothing was registered to mask
        return text
    try:
        return str(redact(text))
    except Exception:
        # a masker that cannot run must not let the text through unmasked
        return MASK


def safe_text(text: str, *, limit: int = MAX_EXCEPTION_TEXT) -> str:
    """``text`` with registered secrets and URL credentials masked, cut to ``limit``.

    :param text: any text that may end up stored.
    :param limit: the most characters kept; a cut text ends with ``...``.
    """
    return without_credentials(_masked(text), limit=limit)


def without_credentials(text: str, *, limit: int = MAX_EXCEPTION_TEXT) -> str:
    """``text`` with URL credentials masked, cut to ``limit``, without Airflow's masker.

    For the command line, which must not import Airflow: outside a task nothing is
    registered with the masker, so only the URL credentials are left to remove.

    :param text: any stored text about to be shown.
    :param limit: the most characters kept; a cut text ends with ``...``.
    """
    cleaned = _USERINFO.sub(rf"\g<scheme>{MASK}@", text)
    return cleaned if len(cleaned) <= limit else cleaned[: max(limit - 3, 0)] + "..."


def describe_exception(error: BaseException, *, limit: int = MAX_EXCEPTION_TEXT) -> str:
    """``"TypeName: message"``, safe to store, and never raising.

    An exception's ``__str__`` is user code: when it raises, only the type is kept.
    """
    name = type(error).__name__
    try:
        message = str(error)
    except Exception:
        message = "<the exception's message could not be read>"
    return safe_text(f"{name}: {message}" if message else name, limit=limit)
