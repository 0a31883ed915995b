"""The names whose values are credentials: Airflow's own list, and the ones it lacks.

Airflow's secrets masker hides the value of a Variable, a connection extra or a
dict key whose name holds one of its sensitive names (``DEFAULT_SENSITIVE_FIELDS``
and ``[core] sensitive_var_conn_names``): the name is lower-cased, every run of
non-word characters becomes ``_``, and a sensitive name anywhere in it counts.
:func:`is_credential_name` matches the same way, so ``X-Api-Key``, ``x_api_key``
and ``X_API-KEY`` are one name.

Airflow's list lacks the names HTTP, Azure and the clouds' presigned URLs give
their credentials: :data:`ADDED_NAMES` (matched like Airflow's) and
:data:`WHOLE_NAMES`, too short to be looked for inside other names (``sig`` is
in ``design``), which count only as the whole name.

Airflow is read, never copied. In a process that loaded Airflow, from its masker
and its configuration. In one that never did (the command line, the gate's stages
on their own), loading Airflow would cost seconds: its list is read from the
installed masker's source without running it, and ``[core]
sensitive_var_conn_names`` from its environment variable.
"""

from __future__ import annotations

import functools
import os
import re
import sys

from airflow_retrywindow import airflow_internals

#: credential names Airflow's list lacks, matched like its own
ADDED_NAMES = frozenset(
    {
        "cookie",  # Cookie and Set-Cookie headers
        "accountkey",  # Azure storage connection strings
        "sharedaccesssignature",  # Azure SAS connection strings
        # presigned URLs' query parameters: X-Amz-Signature, X-Goog-Signature,
        # CloudFront's Signature, X-Amz-Credential, X-Goog-Credential, X-Amz-Security-Token
        "signature",
        "credential",
        "security_token",
    }
)
#: credential names that count only as the whole name: Azure's SAS signature, ODBC's
#: password, an API key and an auth parameter
WHOLE_NAMES = frozenset({"sig", "pwd", "key", "auth"})
#: the environment variable of ``[core] sensitive_var_conn_names``
CONFIGURED_NAMES_ENV = "AIRFLOW__CORE__SENSITIVE_VAR_CONN_NAMES"


class CredentialNamesError(RuntimeError):
    """Airflow's list of sensitive names could not be read."""


def fold(name: str) -> str:
    """``name`` as Airflow compares it: lower case, each run of non-word characters ``_``."""
    return re.sub(r"\W+", "_", name.strip().lower())


def is_credential_name(name: str, names: frozenset[str] | None = None) -> bool:
    """Whether the value of ``name`` is a credential, as Airflow's masker would hide it.

    :param names: :func:`sensitive_names`, when the caller already has them.
    """
    folded = fold(name)
    if folded.strip("_") in WHOLE_NAMES:
        return True
    return _any_of(names or sensitive_names()).search(folded) is not None


def may_name_a_credential(text: str, names: frozenset[str]) -> bool:
    """Whether a credential name may be anywhere in ``text``: one quick search, so that
    the texts that name none (most of them) skip the scan for names and values.

    :param text: percent-decoded text.
    :param names: :func:`sensitive_names`.
    """
    folded = fold(text)
    return any(name in folded for name in names) or any(name in folded for name in WHOLE_NAMES)


@functools.cache
def _any_of(names: frozenset[str]) -> re.Pattern[str]:
    # one search instead of one substring test per name: every stored text is scanned
    return re.compile("|".join(re.escape(name) for name in sorted(names)))


def sensitive_names() -> frozenset[str]:
    """Airflow's sensitive names, the configured ones and :data:`ADDED_NAMES`, folded.

    :raises CredentialNamesError: when Airflow's list cannot be read.
    """
    return _folded(_airflow_defaults(), _configured())


@functools.cache
def _folded(defaults: frozenset[str], configured: str) -> frozenset[str]:
    names = defaults | ADDED_NAMES | {part for part in configured.split(",") if part.strip()}
    return frozenset(fold(name) for name in names)


def _configured() -> str:
    """``[core] sensitive_var_conn_names``: read once, as Airflow's masker reads it once,
    and again when its environment variable changes."""
    return _configured_with(os.environ.get(CONFIGURED_NAMES_ENV))


@functools.cache
def _configured_with(environment: str | None) -> str:
    if "airflow.configuration" in sys.modules:
        from airflow.configuration import conf

        return str(conf.get("core", "sensitive_var_conn_names", fallback="") or "")
    return environment or ""


@functools.cache
def _airflow_defaults() -> frozenset[str]:
    """Airflow's ``DEFAULT_SENSITIVE_FIELDS``, from its masker or its masker's source."""
    try:
        return airflow_internals.default_sensitive_names()
    except airflow_internals.AirflowInternalsError as error:
        raise CredentialNamesError(str(error)) from None
