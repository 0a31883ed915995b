"""Metrics: every decision as counters and gauges through Airflow's own ``Stats``.

Airflow sends them wherever the deployment configured its metrics (``[metrics]
statsd_on``, ``statsd_datadog_enabled`` or ``otel_on``), under its prefix, through
its allow and block lists and its name checks. Nothing is sent when metrics are off.

The names are defined here, once; ``docs/metrics.md`` lists them. Values that
must be visible on a plain StatsD server, which drops tags, are part of the name
(``retry_window.decision.deadline_infeasible``); the DAG, the task and the check
that decided are tags.

This module has two halves. The mapping (:func:`policy_metrics`,
:func:`gate_metrics`, ...) turns a decision into :class:`Metric` values and
imports nothing from Airflow. The senders (:func:`policy_decided`,
:func:`gate_decided`, ...) are one-line calls at each decision point: they look
Airflow's ``Stats`` up when called and never raise, so a metric can neither
change a decision nor fail a task.
"""

from __future__ import annotations

import functools
import logging
import re
import sys
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from airflow_retrywindow.exceptions import RetryWindowGateError
from airflow_retrywindow.redaction import describe_exception
from airflow_retrywindow.verdicts import refusing

log = logging.getLogger(__name__)

# -- the names, each defined once ----------------------------------------------

#: one per decision, by the decision; ``{}`` is the decision's metric word
DECISION = "retry_window.decision.{}"
#: one per decision that lets no further attempt start
REFUSED = "retry_window.refused"
#: seconds between the estimated finish of the next attempt and the deadline
SLACK_SECONDS = "retry_window.slack_seconds"
#: one per failed attempt the retry policy classified, by its class
FAILED_ATTEMPT = "retry_window.failed_attempt.{}"
#: one per target a gate or sensor decided, by its pool capacity verdict
CAPACITY = "retry_window.capacity.{}"
#: one per gate or sensor evaluation with a budget, by the budget verdict
BUDGET = "retry_window.budget.{}"
#: one per time a check could not decide (so it refused, unless told to hand over)
GATE_ERROR = "retry_window.gate_error"
#: one per try refused before its code ran (its previous try left no decision)
RETRY_START_REFUSED = "retry_window.retry_start.refused"
#: one per failed try of a gated task whose retry-start check did not run (its worker
#: has none installed, e.g. ``[retry_window] policy_checks = off`` there)
RETRY_START_NOT_RUN = "retry_window.retry_start.not_run"
#: per gate evaluation an approval overrode the model on: the targets it released
OVERRIDE_APPROVED = "retry_window.override.approved"
#: one per failed attempt the retry policy asked its classifier (``classify=``) about, by
#: its answer; ``timeout`` when it did not answer within its wait
CLASSIFIER = "retry_window.classifier.{}"

#: per breaker pool, the slots its breaker gives it, and 1 while it is open (else 0)
BREAKER_SLOTS = "retry_window.breaker.slots"
BREAKER_OPEN = "retry_window.breaker.open"
#: one per probe slot an open breaker opened
BREAKER_PROBE = "retry_window.breaker.probe"
#: one per breaker a failing try opened
BREAKER_TRIP = "retry_window.breaker.trip"

#: every name, for the documentation and for the check against Airflow's name rules
NAMES = (
    DECISION,
    REFUSED,
    SLACK_SECONDS,
    FAILED_ATTEMPT,
    CAPACITY,
    BUDGET,
    GATE_ERROR,
    RETRY_START_REFUSED,
    RETRY_START_NOT_RUN,
    OVERRIDE_APPROVED,
    CLASSIFIER,
    BREAKER_SLOTS,
    BREAKER_OPEN,
    BREAKER_PROBE,
    BREAKER_TRIP,
)

COUNTER = "counter"
GAUGE = "gauge"

#: the ``decided_by`` tag's values
RETRY_POLICY = "retry-policy"
RETRY_START = "retry-start"
GATE = "gate"
SENSOR = "sensor"

#: a word taken into a metric name: the model's decisions and verdicts are such words
_WORD = re.compile(r"[a-z][a-z0-9-]{0,39}")
#: stands in for anything that is not such a word, so a name never carries free text
OTHER = "other"
#: verdicts after which no attempt may start (the verdicts table says which)
_REFUSING = refusing()

Method = TypeVar("Method", bound=Callable[..., Any])

#: gate errors already counted, so that a decorated caller of a decorated method skips them
_COUNTED: weakref.WeakSet[BaseException] = weakref.WeakSet()


@dataclass(frozen=True)
class Metric:
    """One counter increment or gauge value, ready for Airflow's ``Stats``.

    :param name: the metric's name, without the deployment's prefix.
    :param kind: ``counter`` (adds ``value``) or ``gauge`` (set to ``value``).
    :param value: the increment or the gauge's value.
    :param tags: tag name -> value; dropped by a plain StatsD server.
    """

    name: str
    kind: str
    value: int
    tags: Mapping[str, str] = field(default_factory=dict)


def metric_word(value: object) -> str:
    """``value`` as a part of a metric name: ``wait-backoff`` -> ``wait_backoff``.

    Only the short lower-case words the model and the gate answer with qualify;
    anything else becomes ``other``, so names stay few and never hold free text.
    """
    if not isinstance(value, str) or not _WORD.fullmatch(value):
        return OTHER
    return value.replace("-", "_")


# -- the mapping: decisions -> metrics (no Airflow) ---------------------------------


def decision_metrics(decision: str, slack: int | None, tags: Mapping[str, str]) -> list[Metric]:
    """The metrics of one decision about one task.

    :param decision: the model's decision, or the gate's ``not-attempted``.
    :param slack: seconds from the estimated finish to the deadline (negative when
        late), ``None`` when no attempt is scheduled.
    :param tags: the task's tags (``dag_id``, ``task_id``, ``decided_by``, ...).
    """
    found = [Metric(DECISION.format(metric_word(decision)), COUNTER, 1, dict(tags))]
    with_decision = {**tags, "decision": str(decision)}
    if decision in _REFUSING:
        found.append(Metric(REFUSED, COUNTER, 1, with_decision))
    if isinstance(slack, int) and not isinstance(slack, bool):
        found.append(Metric(SLACK_SECONDS, GAUGE, slack, with_decision))
    return found


def policy_metrics(
    entry: Mapping[str, Any],
    fixture: Mapping[str, Any],
    *,
    dag_id: str,
    task_id: str,
    decided_by: str,
    failure: str,
) -> list[Metric]:
    """The metrics of one retry policy (or retry-start) decision.

    :param entry: the model's result for the task (``decision``, ``estimatedFinish``).
    :param fixture: the fixture the model decided on (its ``deadline``).
    :param dag_id: the task's DAG.
    :param task_id: the task.
    :param decided_by: ``retry-policy`` or ``retry-start``.
    :param failure: the failed attempt's class: unknown, terminal or retryable.
    """
    tags = {"dag_id": dag_id, "task_id": task_id, "decided_by": decided_by}
    finish, deadline = entry.get("estimatedFinish"), fixture.get("deadline")
    slack = deadline - finish if isinstance(finish, int) and isinstance(deadline, int) else None
    return [
        Metric(FAILED_ATTEMPT.format(metric_word(failure)), COUNTER, 1, dict(tags)),
        *decision_metrics(str(entry.get("decision")), slack, tags),
    ]


def gate_metrics(record: Mapping[str, Any], *, decided_by: str) -> list[Metric]:
    """The metrics of one gate or sensor evaluation, from its decision record.

    :param record: the decision record (see :mod:`airflow_retrywindow.gate.record`).
    :param decided_by: ``gate`` or ``sensor``.
    """
    dag_id, gate_id = str(record["dagId"]), str(record["gate"])
    found: list[Metric] = []
    for row in record["decisions"]:
        tags = {
            "dag_id": dag_id,
            "task_id": str(row["taskId"]),
            "decided_by": decided_by,
            "gate_id": gate_id,
        }
        found.extend(decision_metrics(str(row["decision"]), row.get("slackSeconds"), tags))
        capacity = row.get("capacity") or {}
        verdict = capacity.get("verdict")
        if verdict is not None:
            pool = {**tags, "pool": str(capacity.get("pool"))}
            found.append(Metric(CAPACITY.format(metric_word(verdict)), COUNTER, 1, pool))
    budget = record.get("budget")
    if budget:
        tags = {"dag_id": dag_id, "task_id": gate_id, "decided_by": decided_by}
        found.append(Metric(BUDGET.format(metric_word(budget.get("verdict"))), COUNTER, 1, tags))
    found.extend(
        override_metrics(
            record.get("override"), dag_id=dag_id, gate_id=gate_id, decided_by=decided_by
        )
    )
    return found


def override_metrics(
    entry: object, *, dag_id: str, gate_id: str, decided_by: str = GATE
) -> list[Metric]:
    """The metric of a gate's approved override, from the record's ``override`` entry.

    Counted by the targets the approval released, which is the counter's value
    rather than a tag, so that the number of series stays small. The decisions
    above are still counted as the model took them: an override is a person's
    decision beside the model's, not a different decision.

    :param entry: the record's ``override`` entry (``None`` without an approval task).
    :param dag_id: the gate's DAG.
    :param gate_id: the gate.
    :param decided_by: the ``decided_by`` tag: ``gate``, the one kind with an approval task.
    """
    if not isinstance(entry, Mapping) or entry.get("applied") is not True:
        return []
    targets = entry.get("targets")
    released = (
        [name for name in targets if isinstance(name, str)] if isinstance(targets, list) else []
    )
    if not released:  # applied yet releasing nothing is not what the gate stores: count nothing
        return []
    tags = {"dag_id": dag_id, "task_id": gate_id, "decided_by": decided_by}
    return [Metric(OVERRIDE_APPROVED, COUNTER, len(released), tags)]


def gate_error_metrics(*, dag_id: str, task_id: str, decided_by: str) -> list[Metric]:
    """The metric of a check that could not decide.

    :param dag_id: the deciding task's DAG.
    :param task_id: the deciding task: the gated task itself, or the gate or sensor.
    :param decided_by: which check failed: ``retry-policy``, ``retry-start``, ``gate``, ``sensor``.
    """
    tags = {"dag_id": dag_id, "task_id": task_id, "decided_by": decided_by}
    return [Metric(GATE_ERROR, COUNTER, 1, tags)]


def retry_start_refused_metrics(*, dag_id: str, task_id: str) -> list[Metric]:
    """The metric of a try the retry-start check refused.

    :param dag_id: the task's DAG.
    :param task_id: the refused task.
    """
    tags = {"dag_id": dag_id, "task_id": task_id, "decided_by": RETRY_START}
    return [Metric(RETRY_START_REFUSED, COUNTER, 1, tags)]


def retry_start_not_run_metrics(*, dag_id: str, task_id: str) -> list[Metric]:
    """The metric of a failed try whose retry-start check did not run.

    :param dag_id: the task's DAG.
    :param task_id: the gated task.
    """
    tags = {"dag_id": dag_id, "task_id": task_id, "decided_by": RETRY_POLICY}
    return [Metric(RETRY_START_NOT_RUN, COUNTER, 1, tags)]


def classifier_metrics(answer: str, *, dag_id: str, task_id: str, classifier: str) -> list[Metric]:
    """The metric of one answer of a window's classifier.

    :param answer: ``fail``, ``retry``, ``default``, ``raised``, ``invalid`` or ``timeout``
        (:class:`~airflow_retrywindow.records.composition.Classification`).
    :param dag_id: the task's DAG.
    :param task_id: the gated task.
    :param classifier: the classifier's class name; a tag, so that a name holds no class name.
    """
    name = CLASSIFIER.format(metric_word(answer))
    tags = {"dag_id": dag_id, "task_id": task_id, "decided_by": RETRY_POLICY}
    return [Metric(name, COUNTER, 1, {**tags, "classifier": classifier})]


def breaker_metrics(pool: str, *, slots: int, size: int, is_open: bool) -> list[Metric]:
    """The gauges of a breaker pool after a round: its slots, and 1 while it is open.

    :param pool: the pool; a tag, so that a name never holds a pool's name.
    :param slots: the slots the breaker gives it.
    :param size: its owner's size, a tag.
    :param is_open: whether the dependency is down (no slot but a probe's).
    """
    if not isinstance(is_open, bool):
        raise ValueError(f"open must be true or false, got {is_open!r}")
    tags = {"pool": str(pool), "size": str(size)}
    return [
        Metric(BREAKER_SLOTS, GAUGE, slots, tags),
        Metric(BREAKER_OPEN, GAUGE, int(is_open), tags),
    ]


# -- the senders: one line at each decision point, never raising -------------------


def policy_decided(
    context: Mapping[str, Any],
    entry: Mapping[str, Any],
    fixture: Mapping[str, Any],
    *,
    by: str,
    failure: str,
) -> None:
    """Send the metrics of a retry policy decision; see :func:`policy_metrics`.

    :param by: ``retry-policy`` or ``retry-start``: the ``decided_by`` tag.
    """
    _send_safely(
        lambda: policy_metrics(entry, fixture, **_task_of(context), decided_by=by, failure=failure)
    )


def gate_decided(record: Mapping[str, Any], *, by: str) -> None:
    """Send the metrics of a gate or sensor evaluation; see :func:`gate_metrics`.

    :param by: ``gate`` or ``sensor``: the ``decided_by`` tag.
    """
    _send_safely(lambda: gate_metrics(record, decided_by=by))


def gate_error(context: Mapping[str, Any] | None, *, by: str) -> None:
    """Count a check that could not decide, for the task of ``context``.

    :param by: the check: ``retry-policy``, ``retry-start``, ``gate`` or ``sensor``.
    """
    _send_safely(lambda: gate_error_metrics(**_task_of(context), decided_by=by))


def retry_start_refused(context: Mapping[str, Any]) -> None:
    """Count a try the retry-start check refused, for the task of ``context``."""
    _send_safely(lambda: retry_start_refused_metrics(**_task_of(context)))


def retry_start_not_run(context: Mapping[str, Any]) -> None:
    """Count a failed try whose retry-start check did not run, for the task of ``context``."""
    _send_safely(lambda: retry_start_not_run_metrics(**_task_of(context)))


def classifier_answered(
    context: Mapping[str, Any] | None, answer: str | None, *, classifier: str | None
) -> None:
    """Count an answer of the window's classifier about the failure of ``context``'s task."""
    _send_safely(
        lambda: classifier_metrics(str(answer), **_task_of(context), classifier=str(classifier))
    )


def breaker_state(pool: str, *, slots: int, size: int, is_open: bool) -> None:
    """Set a breaker pool's gauges after a round; see :func:`breaker_metrics`."""
    _send_safely(lambda: breaker_metrics(pool, slots=slots, size=size, is_open=is_open))


def breaker_probe(pool: str) -> None:
    """Count a probe slot the breaker of ``pool`` opened."""
    _send_safely(lambda: [Metric(BREAKER_PROBE, COUNTER, 1, {"pool": str(pool)})])


def breaker_trip(context: Mapping[str, Any], pool: str) -> None:
    """Count the breaker of ``pool`` opened by the failing try of ``context``."""
    _send_safely(
        lambda: [Metric(BREAKER_TRIP, COUNTER, 1, {**_task_of(context), "pool": str(pool)})]
    )


def counts_gate_errors(by: str) -> Callable[[Method], Method]:
    """Decorate an operator's method so that a gate error is counted, then raised.

    Only :class:`RetryWindowGateError` counts: skipping, deferring and a sensor's
    timeout are how the gate answers, not errors. Each error is counted once, where
    it is first seen, even when decorated methods call each other; so a sensor can
    count in the method that decides, before ``silent_fail`` or ``never_fail``
    turn the error into another poke or a skip.

    :param by: ``gate`` or ``sensor``: the ``decided_by`` tag.
    """

    def decorate(method: Method) -> Method:
        @functools.wraps(method)
        def counted(self: Any, context: Mapping[str, Any], *args: Any, **kwargs: Any) -> Any:
            try:
                return method(self, context, *args, **kwargs)
            except RetryWindowGateError as error:
                if error not in _COUNTED:
                    _COUNTED.add(error)
                    gate_error(context, by=by)
                raise

        return counted  # type: ignore[return-value]

    return decorate


def send(metrics: Iterable[Metric]) -> None:
    """Hand ``metrics`` to Airflow's ``Stats``; nothing happens in a process without Airflow.

    :raises Exception: whatever the metrics backend raises; callers use the safe senders.
    """
    if "airflow" not in sys.modules:
        return  # nothing set metrics up in a process that never loaded Airflow
    from airflow_retrywindow.version_compat import Stats

    for metric in metrics:
        tags = dict(metric.tags)
        if metric.kind == GAUGE:
            Stats.gauge(metric.name, metric.value, tags=tags)
        else:
            Stats.incr(metric.name, metric.value, tags=tags)


def _send_safely(build: Callable[[], list[Metric]]) -> None:
    try:
        send(build())
    except Exception as error:
        # metrics are a view of the decision, never part of it: report and carry on
        log.warning("Retry window metrics were not sent: %s", describe_exception(error))


def _task_of(context: Mapping[str, Any] | None) -> dict[str, str]:
    """``dag_id`` and ``task_id`` of the task a context belongs to."""
    if context is None:
        raise ValueError("no task context, so the metric's task is unknown")
    ti = context.get("ti")
    if ti is not None:
        return {"dag_id": str(ti.dag_id), "task_id": str(ti.task_id)}
    return {"dag_id": str(context["dag"].dag_id), "task_id": str(context["task"].task_id)}
