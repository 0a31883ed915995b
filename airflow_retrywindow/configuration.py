"""The provider's own settings: the ``[retry_window]`` section of Airflow's configuration.

Declared in the provider info (:data:`OPTIONS`), so ``airflow config list`` shows
them with their defaults, and set like any Airflow option: in ``airflow.cfg`` or
through ``AIRFLOW__RETRY_WINDOW__<OPTION>`` environment variables. Each reader
checks its value and says which option and value are wrong, and what to write.
``docs/configuration.md`` describes each option.

Every option has one reader, registered in :data:`READERS` with :func:`reads`.
:func:`problems` runs them all, so a bad value is found where the provider is loaded
(the cluster policy, :mod:`airflow_retrywindow.policies.cluster_policy`, on every
Airflow component) and before every gated decision (:func:`check`), not only when
the one reader that needs it runs. A new option is covered by registering its reader.

Importing this imports no Airflow; the readers load Airflow's configuration when
called.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from airflow_retrywindow.breaker.settings import BreakerPools

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
#: the most requests one read of Airflow may make ([retry_window] api_retries)
MAX_API_RETRIES = 100
#: the longest wait between two tries of a read, in seconds
MAX_API_RETRY_WAIT = 600.0
#: by default the retry policy and the retry-start check stop reading Airflow this many
#: seconds before the supervisor's heartbeat would kill the try (9 s of Airflow's 10 s)
CLOCK_READ_MARGIN = 1.0
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
    "api_retries": {
        "description": _described(
            f"""The most requests one read of Airflow may make, the first included, 1 to
            {MAX_API_RETRIES}: the retry policy's clock read, the retry-start check's
            reads and every REST read of a gate or sensor. Connection errors, timeouts
            and answers 5xx or 429 are tried again. Empty: ``[workers]
            execution_api_retries``, as many as Airflow's own client makes."""
        ),
        "version_added": None,
        "type": "integer",
        "example": "8",
        "default": "",
    },
    "api_retry_wait_min": {
        "description": _described(
            f"""The shortest wait between two tries of a read of Airflow, 0 to
            {MAX_API_RETRY_WAIT:g} seconds; waits grow exponentially from it, with random
            jitter. Empty: ``[workers] execution_api_retry_wait_min``."""
        ),
        "version_added": None,
        "type": "float",
        "example": "0.5",
        "default": "",
    },
    "api_retry_wait_max": {
        "description": _described(
            f"""The longest wait between two tries of a read of Airflow, at least
            api_retry_wait_min and at most {MAX_API_RETRY_WAIT:g} seconds. Empty:
            ``[workers] execution_api_retry_wait_max``."""
        ),
        "version_added": None,
        "type": "float",
        "example": "8",
        "default": "",
    },
    "clock_read_limit": {
        "description": _described(
            """Seconds the retry policy and the retry-start check may spend reading
            Airflow, every try and wait included, before they refuse and say how many
            tries they made. It must stay below what the task's supervisor tolerates of
            an unreachable API server: (``[workers] max_failed_heartbeats`` - 1) x
            ``[workers] min_heartbeat_interval`` (10 s by default), or the supervisor
            kills the try before its decision is recorded. Empty: 1 s below that (9 s
            by default). A RetryWindowPolicy's classifier (classify=) counts towards it
            and may take at most half of it."""
        ),
        "version_added": None,
        "type": "float",
        "example": "6",
        "default": "",
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
    "breaker_pools": {
        "description": _described(
            """The pools that are breakers, as a JSON object by pool name, each with its
            own settings or none: round (seconds between two looks at the pool, 5 to
            3600, default 60) and trip_calls (refused calls, with none served, that open
            the breaker, 1 to 1000, default 3). A breaker pool holds every task in it, any
            DAG's, while its dependency is down, and follows what it serves while it is
            up in part, by its slots; the DAG of ``pool_breaker_dag()`` runs them.
            docs/dependencies.md."""
        ),
        "version_added": None,
        "type": "string",
        "example": '{"positions_api": {"round": 30}, "warehouse": {}}',
        "default": "",
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
            f"(set it in airflow.cfg or {environment_variable(option)})"
        )
        self.option = option
        self.value = value


class SettingsInvalid(ValueError):
    """One or more ``[retry_window]`` options hold values the provider cannot use.

    :param problems: each bad option's error, naming the option, the value and
        the environment variable that sets it.
    """

    def __init__(self, problems: list[ConfigurationError]) -> None:
        super().__init__("; ".join(str(problem) for problem in problems))
        self.problems = problems


def environment_variable(option: str) -> str:
    """The environment variable that sets ``option``: ``AIRFLOW__RETRY_WINDOW__<OPTION>``."""
    return f"AIRFLOW__{SECTION.upper()}__{option.upper()}"


Reader = TypeVar("Reader", bound=Callable[[], object])
#: option -> the function that reads and checks it; filled by :func:`reads`
READERS: dict[str, Callable[[], object]] = {}


def reads(option: str) -> Callable[[Reader], Reader]:
    """Register the decorated function as the one reader of ``option``.

    :param option: an option declared in :data:`OPTIONS`.
    :raises ValueError: for an undeclared option, or one that already has a reader.
    """

    def register(reader: Reader) -> Reader:
        if option not in OPTIONS:
            raise ValueError(f"[{SECTION}] {option} is not declared in OPTIONS")
        if option in READERS:
            raise ValueError(f"[{SECTION}] {option} already has a reader")
        READERS[option] = reader
        return reader

    return register


def problems() -> list[ConfigurationError]:
    """Every option whose value its reader refuses.

    Never raises for a bad value: each is returned, so all of them can be reported.
    """
    found = retired_problems()
    for reader in READERS.values():
        try:
            reader()
        except ConfigurationError as error:
            found.append(error)
    return found


def check() -> None:
    """Raise unless every ``[retry_window]`` option holds a value the provider can use.

    Every gated decision calls it first, so a bad value refuses them all, with the
    same message, until it is fixed.

    :raises SettingsInvalid: naming each bad option, its value and its environment
        variable.
    """
    found = problems()
    if found:
        raise SettingsInvalid(found)


def _raw(option: str) -> str:
    from airflow_retrywindow.version_compat import conf

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


@reads("policy_checks")
def policy_checks() -> str:
    """``enforce``, ``warn`` or ``off`` (``[retry_window] policy_checks``)."""
    value = _raw("policy_checks").lower()
    if value not in POLICY_CHECKS:
        raise ConfigurationError("policy_checks", value, f"use one of {', '.join(POLICY_CHECKS)}")
    return value


@reads("default_conn_id")
def default_conn_id() -> str:
    """The API connection of a gate or sensor given none (``[retry_window] default_conn_id``)."""
    value = _raw("default_conn_id")
    if not value:
        raise ConfigurationError("default_conn_id", value, "give a connection id")
    return value


@reads("api_page_size")
def api_page_size() -> int:
    """Rows per API page of a gate or sensor given none (``[retry_window] api_page_size``)."""
    value = _raw("api_page_size")
    try:
        return checked_page_size(int(value))
    except ValueError:
        raise ConfigurationError(
            "api_page_size", value, f"a whole number from 1 to {MAX_PAGE_SIZE}"
        ) from None


@reads("api_timeout")
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


@reads("clock_skew_tolerance")
def clock_skew_tolerance() -> float:
    """Seconds the worker's and the API server's clocks may disagree
    (``[retry_window] clock_skew_tolerance``)."""
    return _seconds("clock_skew_tolerance", 0, MAX_CLOCK_SKEW_TOLERANCE, low_included=True)


@reads("gate_timeout")
def gate_timeout() -> float:
    """Seconds one whole gate or sensor decision may take (``[retry_window] gate_timeout``)."""
    return _seconds("gate_timeout", 0, MAX_GATE_TIMEOUT, low_included=False)


@reads("api_retries")
def api_retries() -> int:
    """The most requests one read of Airflow makes (``[retry_window] api_retries``,
    else ``[workers] execution_api_retries``)."""
    value = _raw("api_retries")
    if not value:
        return _workers_int("execution_api_retries")
    try:
        tries = int(value)
    except ValueError:
        tries = 0
    if not 1 <= tries <= MAX_API_RETRIES:
        raise ConfigurationError(
            "api_retries", value, f"a whole number from 1 to {MAX_API_RETRIES}, or empty"
        )
    return tries


def api_retry_wait() -> tuple[float, float]:
    """The shortest and longest wait between two tries of a read of Airflow
    (``[retry_window] api_retry_wait_min``/``_max``, else Airflow's ``[workers]`` ones)."""
    return api_retry_wait_min(), api_retry_wait_max()


@reads("api_retry_wait_min")
def api_retry_wait_min() -> float:
    """The shortest wait between two tries of a read of Airflow."""
    return _wait_or_airflows("api_retry_wait_min", "execution_api_retry_wait_min")


@reads("api_retry_wait_max")
def api_retry_wait_max() -> float:
    """The longest wait between two tries of a read of Airflow, at least the shortest."""
    high = _wait_or_airflows("api_retry_wait_max", "execution_api_retry_wait_max")
    try:
        low = api_retry_wait_min()
    except ConfigurationError:
        return high  # the shortest wait's own reader reports it
    if high < low:
        raise ConfigurationError(
            "api_retry_wait_max", high, f"at least api_retry_wait_min ({low:g})"
        )
    return high


def _wait_or_airflows(option: str, airflows: str) -> float:
    if not _raw(option):
        return min(MAX_API_RETRY_WAIT, max(0.0, _workers_float(airflows)))
    return _seconds(option, 0, MAX_API_RETRY_WAIT, low_included=True)


def _workers_int(option: str) -> int:
    from airflow_retrywindow.version_compat import conf

    return max(1, conf.getint("workers", option))


def _workers_float(option: str) -> float:
    from airflow_retrywindow.version_compat import conf

    return conf.getfloat("workers", option)


def heartbeat_tolerance() -> float:
    """Seconds of unreachable API server the task's supervisor surely tolerates.

    The supervisor heartbeats at most every ``[workers] min_heartbeat_interval``
    seconds and kills the task at the ``[workers] max_failed_heartbeats``-th failure
    in a row. The first may fail the moment the server goes, so the kill may come
    after (max_failed_heartbeats - 1) x min_heartbeat_interval seconds, never sooner
    (each failed heartbeat's own retries only make it later).
    """
    from airflow_retrywindow.version_compat import conf

    failures = conf.getint("workers", "max_failed_heartbeats")
    interval = conf.getfloat("workers", "min_heartbeat_interval")
    return max(0, failures - 1) * interval


@reads("clock_read_limit")
def clock_read_limit() -> float:
    """Seconds the retry policy and the retry-start check may spend reading Airflow
    (``[retry_window] clock_read_limit``; empty: :data:`CLOCK_READ_MARGIN` less than
    :func:`heartbeat_tolerance`), always below that tolerance."""
    tolerance = heartbeat_tolerance()
    value = _raw("clock_read_limit")
    try:
        seconds = float(value) if value else tolerance - CLOCK_READ_MARGIN
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and 0 < seconds < tolerance):
        raise ConfigurationError(
            "clock_read_limit",
            value,
            f"a number of seconds more than 0 and below {tolerance:g}, what the supervisor "
            "tolerates of an unreachable API server ((max_failed_heartbeats - 1) x "
            "min_heartbeat_interval of [workers]), or it kills the try undecided; raise "
            "those two if no limit fits",
        )
    return seconds


@reads("sensor_short_wait")
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


@reads("api_max_response_bytes")
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


@reads("view_base_url")
def view_base_url() -> str:
    """The UI address the Retry window links start from.

    ``[retry_window] view_base_url``, else ``[api] base_url``, else
    :data:`FALLBACK_BASE_URL`.
    """
    from airflow_retrywindow.version_compat import conf

    own = _raw("view_base_url")
    if own:
        if not own.startswith(("http://", "https://", "/")):
            raise ConfigurationError(
                "view_base_url", own, "an http(s) address or a path starting with /"
            )
        return own
    return str(conf.get("api", "base_url", fallback="") or FALLBACK_BASE_URL)


@reads("breaker_pools")
def breaker_pools() -> BreakerPools:
    """The breaker pools and each one's settings (``[retry_window] breaker_pools``)."""
    from airflow_retrywindow.breaker.settings import BreakerPools, BreakerSettingError

    text = _raw("breaker_pools")
    try:
        return BreakerPools.parse(text, option="breaker_pools")
    except BreakerSettingError as error:
        raise ConfigurationError("breaker_pools", text, str(error)) from None


#: options a release before had, and what replaces each: set, they are refused
RETIRED = {
    "dependency_pools": "breaker_pools, which names each breaker pool; a pool is no longer a "
    "breaker because a gated task runs in it",
    "dependency_round": "the round of each pool in breaker_pools",
    "dependency_trip_tasks": "the trip_calls of each pool in breaker_pools",
    "dependency_min_probes": "nothing: an open breaker opens one probe slot a round for five "
    "minutes, then one every three minutes",
    "dependency_window": "nothing: a breaker counts each round since the round before",
}


def retired_problems() -> list[ConfigurationError]:
    """An error for each retired option still set, naming what replaces it."""
    from airflow_retrywindow.version_compat import conf

    return [
        ConfigurationError(option, conf.get(SECTION, option), f"it is gone; use {instead}")
        for option, instead in RETIRED.items()
        if conf.has_option(SECTION, option)
    ]
