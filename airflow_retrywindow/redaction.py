"""Text that is safe to store: masked secrets, no credentials, a bounded length.

Airflow masks what goes into task logs, not what a task stores. Everything the
gate keeps (reasons, evidence, XCom values, ``retry_reason``, decision records,
error messages) passes through :func:`safe_text` first, which removes:

* values registered with ``mask_secret`` (and every connection password Airflow
  registers), through Airflow's masker;
* URL userinfo (``scheme://user:password@host``), a password holding an
  unencoded ``/``, ``?``, ``#`` or ``@`` included (then up to the last ``@`` that
  a host follows: what such a password holds cannot be told from a path);
* ``Bearer`` or ``Basic`` credentials anywhere in the text;
* the value of every name that says it holds a credential
  (:mod:`~airflow_retrywindow.credential_names`), in whatever syntax it comes: a
  query string or a URL fragment, a JSON or Python dict, ``key=value`` text (a
  DSN, a ``;``-separated connection string) and ``Name: value`` header lines, raw
  or percent-encoded.

What was removed shows as ``***``, so a reason stays readable. This applies to
what the provider stores and shows whatever ``[core] hide_sensitive_var_conn_fields``
says: that setting is about Airflow's logs and connection pages. Nothing found
here is registered with Airflow's masker: a value that merely looks like a
credential would be masked in every log line of the process.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Collection, Mapping
from typing import Any

from airflow_retrywindow import airflow_internals
from airflow_retrywindow.credential_names import CredentialNamesError, is_credential_name
from airflow_retrywindow.credential_values import credential_spans

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
        return str(airflow_internals.masked(text))
    except Exception:
        # a masker that cannot run (or be found) must not let the text through unmasked
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
    URL userinfo, ``Bearer``/``Basic`` credentials and the values of credential names.
    When Airflow's list of those names cannot be read, nothing of the text is kept.

    :param text: any stored text about to be shown.
    :param limit: the most characters kept; a cut text ends with ``...``.
    """
    cleaned = _URL.sub(_without_userinfo_in, text)
    cleaned = _SCHEME_CREDENTIAL.sub(rf"\g<name>{MASK}", cleaned)
    try:
        cleaned = _without_named_values(cleaned)
    except CredentialNamesError:
        return MASK
    return _cut(cleaned, limit)


def _without_named_values(text: str) -> str:
    kept, position = [], 0
    for start, end, quote in credential_spans(text):
        kept += [text[position:start], f"{quote}{MASK}{quote}"]
        position = end
    return "".join([*kept, text[position:]])


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 3, 0)] + "..."


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


def credentials_masked(value: Any) -> Any:
    """``value`` with the credentials it shows masked: texts as :func:`without_credentials`
    masks them, never cut, and the value of a mapping key that names a credential.

    For a value the provider only shows and stores (a rendered observation, a unit of
    work): Airflow stores and logs the masked value, and nothing is registered with its
    masker for it.

    :param value: a text, a mapping, a list, or anything else (kept as it is).
    """
    if isinstance(value, str):
        return without_credentials(value, limit=sys.maxsize)
    if isinstance(value, Mapping):
        return {
            key: MASK if _names_credential(key) and value[key] is not None else inner
            for key, inner in ((key, credentials_masked(item)) for key, item in value.items())
        }
    if isinstance(value, (list, tuple)):
        items = [credentials_masked(item) for item in value]
        if hasattr(value, "_fields"):  # a named tuple takes its fields one by one
            return type(value)(*items)
        return type(value)(items)
    return value


def _names_credential(key: object) -> bool:
    try:
        return isinstance(key, str) and is_credential_name(key)
    except CredentialNamesError:
        return True


def describe_exception(error: BaseException, *, limit: int = MAX_EXCEPTION_TEXT) -> str:
    """``"TypeName: message"``, safe to store, and never raising.

    An exception's ``__str__`` is user code: when it raises, only the type is kept.
    """
    name = type(error).__name__
    try:
        message = str(error)
    except Exception:
        message = "<the exception's message could not be read>"
    if not message:
        return _cut(name, limit)
    # masked apart from the type's name: ``ProxyError: ...`` is no header whose value
    # is the whole message
    return _cut(f"{name}: {safe_text(message, limit=sys.maxsize)}", limit)
