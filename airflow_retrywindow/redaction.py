"""Text that is safe to store: masked secrets, no credentials, a bounded length.

Airflow masks what goes into task logs, not what a task stores. Everything the
gate keeps (reasons, evidence, XCom values, ``retry_reason``, decision records,
error messages) passes through :func:`safe_text` first, which removes:

* values registered with ``mask_secret`` (and every connection password Airflow
  registers), through Airflow's masker;
* URL userinfo (``scheme://user:password@host``), a password holding an
  unencoded ``/``, ``?``, ``#`` or ``@`` included (then up to the last ``@`` that
  a host follows: what such a password holds cannot be told from a path);
* the values of credential-like query parameters: presigned URLs' signatures and
  tokens (``X-Amz-Signature``, ``X-Amz-Credential``, ``X-Amz-Security-Token``,
  ``X-Goog-Signature``, ``sig``, ...), ``token``, ``access_token``, ``api_key``,
  ``key``, ``password``, ``secret`` and the like;
* ``Authorization`` and ``Proxy-Authorization`` header values, and ``Bearer`` or
  ``Basic`` credentials anywhere in the text.

What was removed shows as ``***``, so a reason stays readable.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Collection, Iterator, Mapping
from typing import Any

#: the longest exception text we keep; the log has the whole traceback
MAX_EXCEPTION_TEXT = 300
#: what stands in for anything removed
MASK = "***"
#: the task SDK, whose secrets masker holds what ``mask_secret`` registered
_SDK = "airflow.sdk"

# ``scheme://`` and the rest of the URL, up to a space, a quote or an angle bracket
_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<rest>[^\s'\"<>]*)")
# an '@' that a host follows: no further '@' before the next '/', '?', '#' or the end
_AT_HOST = re.compile(r"@(?=[^@/?#]*(?:[/?#]|$))")
# a query parameter whose name says it holds a credential, and its value
_CREDENTIAL_PARAMETER = re.compile(
    r"(?P<name>[?&;](?:[A-Za-z0-9_.-]*[-_.])?"
    r"(?:credential|signature|sig|security-token|token|access_token|refresh_token|id_token|"
    r"api[-_]?key|apikey|key|password|passwd|pwd|secret|client_secret|auth|sas|code)=)"
    r"(?P<value>[^&#\s'\"<>]*)",
    re.IGNORECASE,
)
# an Authorization header's value, in a header dump, a dict repr or JSON
_AUTHORIZATION = re.compile(
    r"(?P<name>(?:proxy-)?authorization['\"]?\s*[:=]\s*['\"]?)(?P<value>[^'\"\n\r,}]+)",
    re.IGNORECASE,
)
# ``Bearer <token>`` or ``Basic <credentials>`` anywhere
_SCHEME_CREDENTIAL = re.compile(
    r"(?P<name>\b(?:bearer|basic)\s+)(?P<value>[A-Za-z0-9._~+/=-]{4,})", re.IGNORECASE
)


def _userinfo_end(rest: str) -> int | None:
    """Where the userinfo of a URL ends (the index of its '@' in ``rest``), or ``None``.

    :param rest: the URL after ``scheme://``.

    The part before the first '@' that a host follows is userinfo when no '/', '?'
    or '#' comes before that '@', or when what comes before the first of them says
    ``user:...``. A password may hold an unencoded '/', '?', '#' or '@', and what
    follows such a password cannot be told from a path: userinfo with a password
    runs to the last '@' that a host follows, so nothing of the password is kept
    (an '@' later in the path or query is masked with it). A URL without userinfo
    whose path or query holds an '@' (an e-mail address) is left as it is.
    """
    ats = [found.start() for found in _AT_HOST.finditer(rest)]
    if not ats:
        return None
    before = rest[: ats[0]]
    authority = re.split(r"[/?#]", before, maxsplit=1)[0]
    if ":" in authority:
        return ats[-1]
    return ats[0] if authority == before else None


def _without_userinfo_in(found: re.Match[str]) -> str:
    """The URL ``found`` with its userinfo masked."""
    end = _userinfo_end(found["rest"])
    if end is None:
        return found[0]
    return f"{found['scheme']}{MASK}{found['rest'][end:]}"


def without_userinfo(url: str) -> str:
    """``url`` without ``user:password@``, e.g. for a decision record's ``api`` field.

    A password may hold an unencoded ``/``, ``?``, ``#`` or ``@``: everything up to the
    last ``@`` that a host follows goes.
    """
    found = _URL.match(url)
    end = None if found is None else _userinfo_end(found["rest"])
    if found is None or end is None:
        return url
    return found["scheme"] + url[found.start("rest") + end + 1 :]


def _masked(text: str) -> str:
    if _SDK not in sys.modules:
        # nothing can have been registered in a process that never loaded the task SDK
        # (the command line, the gate's stages on their own): they stay free of Airflow
        return text
    try:
        from airflow.sdk.log import redact  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover - a broken install: nothing to mask with
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
    """``text`` with credentials masked, cut to ``limit``, without Airflow's masker.

    For the command line, which must not import Airflow: outside a task nothing is
    registered with the masker, so only the credentials the text shows are removed:
    URL userinfo, credential query parameters and authorization values.

    :param text: any stored text about to be shown.
    :param limit: the most characters kept; a cut text ends with ``...``.
    """
    cleaned = _URL.sub(_without_userinfo_in, text)
    cleaned = _CREDENTIAL_PARAMETER.sub(rf"\g<name>{MASK}", cleaned)
    cleaned = _AUTHORIZATION.sub(rf"\g<name>{MASK}", cleaned)
    cleaned = _SCHEME_CREDENTIAL.sub(rf"\g<name>{MASK}", cleaned)
    return cleaned if len(cleaned) <= limit else cleaned[: max(limit - 3, 0)] + "..."


def safe_json(value: Any, *, keep: Collection[str] = frozenset()) -> Any:
    """``value`` with every text in it masked as :func:`safe_text` masks, never cut.

    For a JSON value about to be stored (a decision record): mappings and lists are
    walked, texts masked, numbers and the rest kept.

    :param value: a JSON value.
    :param keep: mapping keys whose values are kept exactly (names that records are
        matched on, fixtures that must replay byte for byte).
    """
    # a record repeats its words ("policy", "fits-now", ...) once per task instance
    masked: dict[str, str] = {}

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            if item not in masked:
                masked[item] = safe_text(item, limit=sys.maxsize)
            return masked[item]
        if isinstance(item, Mapping):
            return {key: inner if key in keep else walk(inner) for key, inner in item.items()}
        if isinstance(item, (list, tuple)):
            return [walk(inner) for inner in item]
        return item

    return walk(value)


def credentials_in(text: str) -> list[str]:
    """The credentials :func:`without_credentials` removes from ``text``, as they are there.

    URL userinfo (whole, and its password), credential query parameters' values,
    authorization header values and ``Bearer``/``Basic`` credentials.
    """
    found: list[str] = []
    for url in _URL.finditer(text):
        end = _userinfo_end(url["rest"])
        if end is not None:
            userinfo = url["rest"][:end]
            found += [userinfo, userinfo.partition(":")[2]]
    for pattern in (_CREDENTIAL_PARAMETER, _AUTHORIZATION, _SCHEME_CREDENTIAL):
        found += [match["value"].strip() for match in pattern.finditer(text)]
    return [value for value in dict.fromkeys(found) if value and value != MASK]


def mask_credentials_in(value: Any) -> None:
    """Register the credentials the texts of ``value`` show with Airflow's secrets masker.

    What Airflow stores or logs itself, a rendered template field or a log line, is
    masked only by its masker: once told, it shows these credentials as ``***``.
    Outside a task (no Airflow, the command line) there is nothing to tell.

    :param value: a text, or a JSON value holding texts.
    """
    try:
        from airflow.sdk.log import mask_secret
    except ImportError:
        return
    for text in _texts(value):
        for credential in credentials_in(text):
            mask_secret(credential)


def _texts(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _texts(item)


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
