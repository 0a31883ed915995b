"""The names pass Airflow's own checks, and the senders reach a UDP listener through ``Stats``.

No Airflow service runs here: Airflow's ``Stats`` is set up in this process
exactly as the task runner sets it up (from the ``[metrics]`` settings), with
InfluxDB-style tags on so that each line carries its tags, and a real UDP
socket receives what Airflow's StatsD client sends.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_retrywindow import metrics
from airflow_retrywindow.exceptions import RetryWindowGateError
from airflow_retrywindow.gate.budget import BUDGET_EXCEEDED, WITHIN_BUDGET
from airflow_retrywindow.gate.capacity import CAPACITY_INFEASIBLE, FITS_NOW, WAIT_CAPACITY
from airflow_retrywindow.model.decisions import NOT_ATTEMPTED, Decision
from airflow_retrywindow.records.evidence import RETRYABLE, TERMINAL, UNKNOWN
from tests.notifications.stored import overridden_record

PREFIX = "rwunit"
#: every word that can stand in a name's ``{}``
WORDS = {
    metrics.DECISION: [*(d.value for d in Decision), NOT_ATTEMPTED, metrics.OTHER],
    metrics.FAILED_ATTEMPT: [UNKNOWN, TERMINAL, RETRYABLE, metrics.OTHER],
    metrics.CAPACITY: [FITS_NOW, WAIT_CAPACITY, CAPACITY_INFEASIBLE, metrics.OTHER],
    metrics.BUDGET: [WITHIN_BUDGET, BUDGET_EXCEEDED, metrics.OTHER],
    metrics.CLASSIFIER: ["fail", "retry", "default", "raised", "invalid", "timeout", metrics.OTHER],
}


def every_name() -> list[str]:
    names: list[str] = []
    for name in metrics.NAMES:
        if "{}" in name:
            names.extend(name.format(metrics.metric_word(word)) for word in WORDS[name])
        else:
            names.append(name)
    return names


def test_every_name_passes_airflows_statsd_and_opentelemetry_checks() -> None:
    from airflow.sdk._shared.observability.metrics.validators import (
        stat_name_default_handler,
        stat_name_otel_handler,
    )

    names = every_name()
    assert len(names) == 6 + len(Decision) + 2 + 4 + 4 + 3 + 4 + 7
    for name in names:
        # the StatsD client's check, with Airflow's default prefix in front
        assert stat_name_default_handler(f"airflow.{name}") == f"airflow.{name}"
        # OpenTelemetry's instrument name rules (characters, 255 at most)
        assert stat_name_otel_handler("airflow", name) == f"airflow.{name}"


class Listener:
    """A UDP socket on a free loopback port, read on demand."""

    def __init__(self) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind(("127.0.0.1", 0))
        self.socket.settimeout(0.5)
        self.port = int(self.socket.getsockname()[1])

    def lines(self) -> list[str]:
        """Every metric line received so far (a datagram may hold several)."""
        found: list[str] = []
        while True:
            try:
                data = self.socket.recv(65535)
            except TimeoutError:
                return found
            found.extend(data.decode().splitlines())


@pytest.fixture
def statsd(monkeypatch: pytest.MonkeyPatch) -> Iterator[Listener]:
    """Airflow's ``Stats`` sending to a fresh listener, set up as the task runner does."""
    from airflow.sdk.configuration import conf
    from airflow.sdk.observability import stats
    from airflow.sdk.observability.metrics import stats_utils

    listener = Listener()
    for key, value in {
        "STATSD_ON": "True",
        "STATSD_HOST": "127.0.0.1",
        "STATSD_PORT": str(listener.port),
        "STATSD_PREFIX": PREFIX,
        "STATSD_INFLUXDB_ENABLED": "True",
    }.items():
        monkeypatch.setenv(f"AIRFLOW__METRICS__{key}", value)
    legacy = conf.getboolean("metrics", "legacy_names_on")
    stats.initialize(factory=stats_utils.get_stats_factory(), export_legacy_names=legacy)
    try:
        yield listener
    finally:
        monkeypatch.undo()
        # back to what the settings without this test's say (no StatsD)
        stats.initialize(factory=stats_utils.get_stats_factory(), export_legacy_names=legacy)
        listener.socket.close()


def _context(task_id: str) -> dict[str, Any]:
    return {"ti": SimpleNamespace(dag_id="sales", task_id=task_id)}


class Gate:
    """A stand-in owner for a decorated ``execute``: the decorator only needs the context."""

    def __init__(self, error: Exception | None) -> None:
        self.error = error

    @metrics.counts_gate_errors(by=metrics.GATE)
    def execute(self, context: dict[str, Any]) -> str:
        if self.error is not None:
            raise self.error
        return "decided"


def test_a_gate_error_is_counted_once_and_raised_unchanged(statsd: Listener) -> None:
    refused = RetryWindowGateError("the retry window gate could not decide")
    with pytest.raises(RetryWindowGateError) as raised:
        Gate(refused).execute(_context("gate"))
    assert raised.value is refused
    # not errors of the gate: how it answers, or a bug that Airflow reports anyway
    with pytest.raises(ValueError, match="not a gate error"):
        Gate(ValueError("not a gate error")).execute(_context("gate"))
    assert Gate(None).execute(context=_context("gate")) == "decided"
    assert statsd.lines() == [
        f"{PREFIX}.retry_window.gate_error,dag_id=sales,task_id=gate,decided_by=gate:1|c"
    ]


class Sensor:
    """Decorated methods calling each other, as the sensor's ``execute`` and ``_decide``."""

    @metrics.counts_gate_errors(by=metrics.SENSOR)
    def execute(self, context: dict[str, Any]) -> None:
        self.decide(context)

    @metrics.counts_gate_errors(by=metrics.SENSOR)
    def decide(self, context: dict[str, Any]) -> None:
        raise RetryWindowGateError("the retry window gate could not decide")


def test_a_gate_error_seen_by_two_decorated_methods_is_counted_once(statsd: Listener) -> None:
    with pytest.raises(RetryWindowGateError):
        Sensor().execute(_context("hold"))
    assert statsd.lines() == [
        f"{PREFIX}.retry_window.gate_error,dag_id=sales,task_id=hold,decided_by=sensor:1|c"
    ]


def test_a_policy_decision_arrives_with_its_tags(statsd: Listener) -> None:
    entry = {"decision": "deadline-infeasible", "estimatedFinish": 500}
    metrics.policy_decided(
        _context("load"), entry, {"deadline": 200}, by="retry-policy", failure="retryable"
    )
    metrics.retry_start_refused(_context("load"))
    tags = "dag_id=sales,task_id=load,decided_by="
    late = f"{tags}retry-policy,decision=deadline-infeasible"
    assert statsd.lines() == [
        f"{PREFIX}.retry_window.failed_attempt.retryable,{tags}retry-policy:1|c",
        f"{PREFIX}.retry_window.decision.deadline_infeasible,{tags}retry-policy:1|c",
        f"{PREFIX}.retry_window.refused,{late}:1|c",
        # StatsD sets a negative gauge in two steps: to 0, then down by the value
        f"{PREFIX}.retry_window.slack_seconds,{late}:0|g",
        f"{PREFIX}.retry_window.slack_seconds,{late}:-300|g",
        f"{PREFIX}.retry_window.retry_start.refused,{tags}retry-start:1|c",
    ]


def test_an_approved_override_arrives_from_the_gates_record(statsd: Listener) -> None:
    metrics.gate_decided(overridden_record(), by=metrics.GATE)
    received = statsd.lines()
    gate = "dag_id=positions,task_id=retry_gate,decided_by=gate"
    assert f"{PREFIX}.retry_window.override.approved,{gate}:1|c" in received
    # beside the model's refusal of load, still counted as the model took it
    load = "dag_id=positions,task_id=load,decided_by=gate,gate_id=retry_gate"
    assert f"{PREFIX}.retry_window.decision.attempts_exhausted,{load}:1|c" in received


def test_a_breakers_trip_probe_and_gauges_arrive(statsd: Listener) -> None:
    metrics.breaker_trip(_context("load"), "positions_api")
    metrics.breaker_probe("positions_api")
    metrics.breaker_state("positions_api", slots=0, size=24, is_open=True)
    metrics.breaker_state("positions_api", slots=24, size=24, is_open=False)
    pool = "pool=positions_api,size=24"
    assert statsd.lines() == [
        f"{PREFIX}.retry_window.breaker.trip,dag_id=sales,task_id=load,pool=positions_api:1|c",
        f"{PREFIX}.retry_window.breaker.probe,pool=positions_api:1|c",
        f"{PREFIX}.retry_window.breaker.slots,{pool}:0|g",
        f"{PREFIX}.retry_window.breaker.open,{pool}:1|g",
        f"{PREFIX}.retry_window.breaker.slots,{pool}:24|g",
        f"{PREFIX}.retry_window.breaker.open,{pool}:0|g",
    ]
