"""The provider's own settings: the ``[retry_window]`` section of Airflow's configuration.

Declared in the provider info (:data:`OPTIONS`), so ``airflow config list`` shows
them with their defaults, and set like any Airflow option: in ``airflow.cfg`` or
through ``AIRFLOW__RETRY_WINDOW__<OPTION>`` environment variables. Each reader
checks its value and says which option and value are wrong, and what to write.
``docs/configuration.md`` describes each option.

Importing this imports no Airflow; the readers load Airflow's configuration when
called.
"""

from __future__ import annotations

import math
from typing import Any

SECTION = "retry_window"

#: ``policy_checks``: what the provider's cluster policy does with gated tasks
ENFORCE = "enforce"
WARN = "warn"
OFF = "off"
POLICY_CHECKS = (ENFORCE, WARN, OFF)

DEFAULT_CONN_ID = "airflow_api_default"
#: the most rows per API page (the task instance listing takes pages of up to 1000)
MAX_PAGE_SIZE = 1000
DEFAULT_PAGE_SIZE = MAX_PAGE_SIZE
DEFAULT_TIMEOUT = 30.0
#: the longest a single API request may be given
MAX_TIMEOUT = 600.0
#: the UI address used when neither this section nor ``[api] base_url`` gives one
FALLBACK_BASE_URL = "http://localhost:8080/"
#: how far this worker's clock and the API server's may disagree before a decision
#: is refused; within it the stricter of the two possible answers is kept
DEFAULT_CLOCK_SKEW_TOLERANCE = 5.0
MAX_CLOCK_SKEW_TOLERANCE = 300.0
#: the largest answer body the REST reader reads (16 MiB: a page of 1000 task
#: instances is about 1.5 MB); a larger one is refused while it is read
DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024
MIN_MAX_RESPONSE_BYTES = 1024
MAX_MAX_RESPONSE_BYTES = 1024 * 1024 * 1024
#: the longest one whole gate or sensor decision (every read included) may take
DEFAULT_GATE_TIMEOUT = 300.0
MAX_GATE_TIMEOUT = 3600.0
#: seconds the retry policy waits for the API server's answer that tells its clock
SERVER_CLOCK_TIMEOUT = 5.0
#: a deferrable sensor sleeps a wait shorter than this in the worker while Airflow's
#: scheduler race is open (:mod:`airflow_retrywindow.scheduler_race`)
DEFAULT_SENSOR_SHORT_WAIT = 10.0
MAX_SENSOR_SHORT_WAIT = 60.0


def _described(text: str) -> str:
    return " ".join(text.split())


#: the section as the provider info declares it (``airflow config list`` shows it)
OPTIONS: dict[str, dict[str, Any]] = {
    "policy_checks": {
        "description": _described(
            """What the provider's cluster policy does with tasks that have a
            RetryWindowPolicy. ``enforce``: a DAG whose retry settings the gate cannot
            express is refused when it is parsed, and every try of a gated task passes
            the retry-start check. ``warn``: the same problems are logged as warnings and
            the DAG loads; the retry-start check stays. ``off``: the cluster policy does
            nothing: no parse-time checks and no retry-start check, so a retry that
            Airflow starts without the policy (a killed worker, a heartbeat timeout, a
            trigger's failure event) runs undecided."""
        ),
        "version_added": None,
        "type": "string",
        "example": WARN,
        "default": ENFORCE,
    },
    "default_conn_id": {
        "description": _described(
            """The connection to Airflow's REST API that a RetryWindowGateOperator or
            RetryWindowSensor reads its run with when it is given no airflow_conn_id."""
        ),
        "version_added": None,
        "type": "string",
        "example": "airflow_api_gate",
        "default": DEFAULT_CONN_ID,
    },
    "api_page_size": {
        "description": _described(
            f"""Rows asked for per page of Airflow's REST API, 1 to {MAX_PAGE_SIZE}, when a
            gate or sensor is given no page_size."""
        ),
        "version_added": None,
        "type": "integer",
        "example": "200",
        "default": str(DEFAULT_PAGE_SIZE),
    },
    "api_timeout": {
        "description": _described(
            f"""Seconds a gate or sensor waits for each request to Airflow's REST API,
            more than 0 and at most {MAX_TIMEOUT:g}, when it is given no api_timeout."""
        ),
        "version_added": None,
        "type": "float",
        "example": "10",
        "default": f"{DEFAULT_TIMEOUT:g}",
    },
    "clock_skew_tolerance": {
        "description": _described(
            f"""Seconds this worker's clock and the API server's may disagree, 0 to
            {MAX_CLOCK_SKEW_TOLERANCE:g}. The retry policy and the gates measure the
            difference on every decision (the Date of an answer of the API server);
            beyond it they refuse (fail, gate-error) and say which clock runs ahead and
            by how much. Within it they decide at both ends of the measured difference
            and keep the stricter answer."""
        ),
        "version_added": None,
        "type": "float",
        "example": "2",
        "default": f"{DEFAULT_CLOCK_SKEW_TOLERANCE:g}",
    },
    "api_max_response_bytes": {
        "description": _described(
            f"""The largest answer of Airflow's REST API a gate or sensor reads, in bytes,
            {MIN_MAX_RESPONSE_BYTES} to {MAX_MAX_RESPONSE_BYTES}. A larger answer is refused
            while it is read, so the gate refuses to decide instead of filling the
            worker's memory."""
        ),
        "version_added": None,
        "type": "integer",
        "example": "4194304",
        "default": str(DEFAULT_MAX_RESPONSE_BYTES),
    },
    "gate_timeout": {
        "description": _described(
            f"""Seconds one whole decision of a gate or sensor may take, every request to
            the REST API included, more than 0 and at most {MAX_GATE_TIMEOUT:g}. Each
            request waits at most the time left; when none is left the gate refuses to
            decide and says so."""
        ),
        "version_added": None,
        "type": "float",
        "example": "60",
        "default": f"{DEFAULT_GATE_TIMEOUT:g}",
    },
    "sensor_short_wait": {
        "description": _described(
            f"""Seconds, 0 to {MAX_SENSOR_SHORT_WAIT:g}: a deferrable RetryWindowSensor
            sleeps a wait shorter than this in the worker instead of deferring it, on an
            Airflow whose scheduler can fail a task whose trigger fires a few seconds
            after it deferred (apache/airflow#67287, #72716, #71580). 0 defers every
            wait. On an Airflow where those issues are fixed every wait is deferred."""
        ),
        "version_added": None,
        "type": "float",
        "example": "0",
        "default": f"{DEFAULT_SENSOR_SHORT_WAIT:g}",
    },
    "view_base_url": {
        "description": _described(
            f"""The UI address the Retry window links start from. Empty: ``[api]
            base_url``, or {FALLBACK_BASE_URL} when that is unset too."""
        ),
        "version_added": None,
        "type": "string",
        "example": "https://airflow.example.com/",
        "default": "",
    },
}


class ConfigurationError(ValueError):
    """A ``[retry_window]`` option holds a value the provider cannot use."""

    def __init__(self, option: str, value: object, expected: str) -> None:
        super().__init__(
            f"[{SECTION}] {option} = {value!r} is not valid: {expected} "
            f"(set it in airflow.cfg or AIRFLOW__{SECTION.upper()}__{option.upper()})"
        )
        self.option = option


def _raw(option: str) -> str:
    from airflow.sdk import conf

    default = OPTIONS[option]["default"]
    return str(conf.get(SECTION, option, fallback=default)).strip()


def checked_page_size(value: object, name: str = "page_size") -> int:
    """``value`` if it is a page size the reader can ask for, else a ``ValueError``.

    :param value: rows per API page, 1 to :data:`MAX_PAGE_SIZE`.
    :param name: the argument's name, for the message.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PAGE_SIZE:
        raise ValueError(f"{name} must be a whole number from 1 to {MAX_PAGE_SIZE}, got {value!r}")
    return value


def checked_timeout(value: object, name: str = "timeout") -> float:
    """``value`` in seconds if it is a request timeout the reader can use, else a ``ValueError``.

    :param value: seconds to wait for each request, more than 0.
    :param name: the argument's name, for the message.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not value > 0
    ):
        raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
    return float(value)


def policy_checks() -> str:
    """``enforce``, ``warn`` or ``off`` (``[retry_window] policy_checks``)."""
    value = _raw("policy_checks").lower()
    if value not in POLICY_CHECKS:
        raise ConfigurationError("policy_checks", value, f"use one of {', '.join(POLICY_CHECKS)}")
    return value


def default_conn_id() -> str:
    """The API connection of a gate or sensor given none (``[retry_window] default_conn_id``)."""
    value = _raw("default_conn_id")
    if not value:
        raise ConfigurationError("default_conn_id", value, "give a connection id")
    return value


def api_page_size() -> int:
    """Rows per API page of a gate or sensor given none (``[retry_window] api_page_size``)."""
    value = _raw("api_page_size")
    try:
        return checked_page_size(int(value))
    except ValueError:
        raise ConfigurationError(
            "api_page_size", value, f"a whole number from 1 to {MAX_PAGE_SIZE}"
        ) from None


def api_timeout() -> float:
    """Seconds per API request of a gate or sensor given none (``[retry_window] api_timeout``)."""
    return _seconds("api_timeout", 0, MAX_TIMEOUT, low_included=False)


def _seconds(option: str, low: float, high: float, *, low_included: bool) -> float:
    value = _raw(option)
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    above_low = seconds >= low if low_included else seconds > low
    if not (math.isfinite(seconds) and above_low and seconds <= high):
        lowest = f"at least {low:g}" if low_included else f"more than {low:g}"
        raise ConfigurationError(
            option, value, f"a number of seconds {lowest} and at most {high:g}"
        )
    return seconds


def clock_skew_tolerance() -> float:
    """Seconds the worker's and the API server's clocks may disagree
    (``[retry_window] clock_skew_tolerance``)."""
    return _seconds("clock_skew_tolerance", 0, MAX_CLOCK_SKEW_TOLERANCE, low_included=True)


def gate_timeout() -> float:
    """Seconds one whole gate or sensor decision may take (``[retry_window] gate_timeout``)."""
    return _seconds("gate_timeout", 0, MAX_GATE_TIMEOUT, low_included=False)


def sensor_short_wait() -> float:
    """Seconds under which a deferrable sensor sleeps its wait in the worker
    (``[retry_window] sensor_short_wait``)."""
    return _seconds("sensor_short_wait", 0, MAX_SENSOR_SHORT_WAIT, low_included=True)


def checked_max_response_bytes(value: object, name: str = "max_response_bytes") -> int:
    """``value`` if it is a response size cap the reader can use, else a ``ValueError``.

    :param value: bytes, :data:`MIN_MAX_RESPONSE_BYTES` to :data:`MAX_MAX_RESPONSE_BYTES`.
    :param name: the argument's name, for the message.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not MIN_MAX_RESPONSE_BYTES <= value <= MAX_MAX_RESPONSE_BYTES
    ):
        raise ValueError(
            f"{name} must be a whole number of bytes from {MIN_MAX_RESPONSE_BYTES} to "
            f"{MAX_MAX_RESPONSE_BYTES}, got {value!r}"
        )
    return value


def api_max_response_bytes() -> int:
    """The largest REST API answer a gate or sensor reads
    (``[retry_window] api_max_response_bytes``)."""
    value = _raw("api_max_response_bytes")
    try:
        return checked_max_response_bytes(int(value))
    except ValueError:
        raise ConfigurationError(
            "api_max_response_bytes",
            value,
            f"a whole number of bytes from {MIN_MAX_RESPONSE_BYTES} to {MAX_MAX_RESPONSE_BYTES}",
        ) from None


def view_base_url() -> str:
    """The UI address the Retry window links start from.

    ``[retry_window] view_base_url``, else ``[api] base_url``, else
    :data:`FALLBACK_BASE_URL`.
    """
    from airflow.sdk import conf

    own = _raw("view_base_url")
    if own:
        if not own.startswith(("http://", "https://", "/")):
            raise ConfigurationError(
                "view_base_url", own, "an http(s) address or a path starting with /"
            )
        return own
    return str(conf.get("api", "base_url", fallback="") or FALLBACK_BASE_URL)
