"""Text that is safe to store: masked secrets, no credentials, a bounded length.

Airflow masks what goes into task logs, not what a task stores. Everything the
gate keeps (reasons, evidence, XCom values, ``retry_reason``, decision records,
error messages) passes through :func:`safe_text` first, which removes:

* values registered with ``mask_secret`` (and every connection password Airflow
  registers), through Airflow's masker;
* URL userinfo (``scheme://user:password@host``), a password holding an
  unencoded ``/``, ``?``, ``#`` or ``@`` included;
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

#: the longest exception text we keep; the log has the whole traceback
MAX_EXCEPTION_TEXT = 300
#: what stands in for anything removed
MASK = "***"

# ``scheme://...@host``: a URL up to the first '@' that a host follows (no further '@'
# before the next '/', '?', '#', space or quote), so a password may hold an unencoded
# '/', '?', '#' or '@'; whether the part before is userinfo is decided by :func:`_userinfo`
_URL_AT = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<before>[^\s'\"<>]*?)@"
    r"(?=[^\s'\"<>@/?#]*(?:[/?#\s'\"<>]|$))"
)
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


def _userinfo(found: re.Match[str]) -> str:
    """The URL with its userinfo masked, when the part before '@' is userinfo."""
    before = found["before"]
    authority = re.split(r"[/?#]", before, maxsplit=1)[0]
    # plain userinfo, or a password that holds an unencoded '/', '?', '#' or '@'
    # (the part before the first of them still says user:...); a path or a query
    # that holds an '@' (an e-mail address) is left as it is
    if authority == before or ":" in authority:
        return f"{found['scheme']}{MASK}@"
    return found[0]


def without_userinfo(url: str) -> str:
    """``url`` without ``user:password@``, e.g. for a decision record's ``api`` field.

    A password may hold an unencoded ``/``, ``?``, ``#`` or ``@``: everything up to the
    last ``@`` of such userinfo goes.
    """
    found = _URL_AT.match(url)
    if found is None or _userinfo(found) == found[0]:
        return url
    return found["scheme"] + url[found.end() :]


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
    """``text`` with credentials masked, cut to ``limit``, without Airflow's masker.

    For the command line, which must not import Airflow: outside a task nothing is
    registered with the masker, so only the credentials the text shows are removed:
    URL userinfo, credential query parameters and authorization values.

    :param text: any stored text about to be shown.
    :param limit: the most characters kept; a cut text ends with ``...``.
    """
    cleaned = _URL_AT.sub(_userinfo, text)
    cleaned = _CREDENTIAL_PARAMETER.sub(rf"\g<name>{MASK}", cleaned)
    cleaned = _AUTHORIZATION.sub(rf"\g<name>{MASK}", cleaned)
    cleaned = _SCHEME_CREDENTIAL.sub(rf"\g<name>{MASK}", cleaned)
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
