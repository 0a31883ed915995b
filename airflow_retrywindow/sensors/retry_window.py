"""``RetryWindowSensor``: wait out a retry's backoff, then let it through or skip it."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pendulum
from airflow.providers.standard.triggers.temporal import DateTimeTrigger
from airflow.providers.standard.utils.skipmixin import SkipMixin
from airflow.sdk import BaseSensorOperator, PokeReturnValue

from airflow_retrywindow import configuration, metrics, scheduler_race
from airflow_retrywindow.gate.decide import WAIT_BACKOFF
from airflow_retrywindow.gate.estimates import GivenEstimate, estimate_problems
from airflow_retrywindow.gate.run import GateDecision
from airflow_retrywindow.gate.targets import target_problems, unsafe_trigger_rule
from airflow_retrywindow.labels import UTC_ISO
from airflow_retrywindow.operators.arguments import (
    deferrable_argument,
    target_argument,
    work_argument,
)
from airflow_retrywindow.operators.retry_window_mixin import RetryWindowMixin
from airflow_retrywindow.records.decision_record import timed_out
from airflow_retrywindow.redaction import safe_json
from airflow_retrywindow.timing.skew import DATE_RESOLUTION
from airflow_retrywindow.timing.work import EstimateOverride, Work
from airflow_retrywindow.version_compat import AirflowSensorTimeout, AirflowSkipException

if TYPE_CHECKING:
    from airflow.sdk import Context


def short_wait(scheduler_version: Callable[[], str]) -> timedelta:
    """The wait a deferrable sensor sleeps in the worker instead of deferring it.

    ``[retry_window] sensor_short_wait`` where the scheduler can fail a task whose
    trigger fires before it has taken in the exit of the try that deferred (seen a few
    seconds after it under load: "finished with state success, but the task instance's
    state attribute is queued"; :mod:`~airflow_retrywindow.scheduler_race`); nothing
    where the scheduler has the fixes: every wait is deferred there.

    :param scheduler_version: reads the scheduler's Airflow version from the API server,
        asked only once Airflow has released every fix.
    """
    if not scheduler_race.race_open(scheduler_version):
        return timedelta(0)
    return timedelta(seconds=configuration.sensor_short_wait())


class RetryWindowSensor(RetryWindowMixin, BaseSensorOperator, SkipMixin):
    """Hold a retry of ``target`` until its backoff has passed; skip it if it must not run.

    Each evaluation reads the target's latest try through Airflow's REST API and
    asks the decision model:

    * ``retry-eligible`` (or ``not-attempted``: a first run is not a retry) - the
      sensor succeeds and the downstream retry runs;
    * ``wait-backoff`` - the sensor waits until the model's ``earliestStart``,
      then evaluates again with fresh observations. Deferrable by default: the
      wait happens in the triggerer (``DateTimeTrigger``) and holds no worker
      slot. A wait shorter than ``[retry_window] sensor_short_wait`` (10 s) is
      slept in the worker instead, on an Airflow whose scheduler can fail a task whose
      trigger fires within seconds (:func:`short_wait`); with ``deferrable=False``
      the ``poke`` and ``reschedule`` modes sleep or reschedule until that time;
    * ``dependency-held`` - the target's pool, a shared dependency, is failing (or
      forced open by on-call): the sensor waits the same way, until the pool's next
      probe round (or the backoff's end, when later), then evaluates again; the
      record and the status say the verdict and the pool's state as read;
    * anything else (or a pool that can never hold the target, or an exceeded
      budget) - the sensor short-circuits: its downstream tasks are skipped, the
      reason is logged and kept in the ``return_value`` XCom.

    A mapped target (``.expand()``, or a task inside a mapped task group) is
    decided per map index: the sensor succeeds when every map index may run,
    waits until the latest ``earliestStart`` among the map indexes that wait, and
    skips as soon as any map index is refused.

    ``timeout`` and ``soft_fail`` behave as for any sensor: when the backoff ends
    after the timeout, the sensor times out (is skipped with ``soft_fail``). If
    the sensor cannot decide (API unreachable, connection missing) it fails, so
    the retry does not run.

    :param target: the task of this DAG whose retry is held (``"grp.load"`` for a
        task in a task group); it may be mapped.
    :param work: the estimate for one attempt of it. Default: its
        ``RetryWindowPolicy``'s; a :class:`~airflow_retrywindow.Work` must be the
        same as the policy's, and ``Work.override(reason=..., ...)`` differs from
        it on purpose.
    :param deferrable: wait in the triggerer (default ``True``).

    The other arguments (``deadline``, ``observations``, ``budget``, ``work_unit``,
    ``max_observation_age``, ``airflow_conn_id``, ``ignore_downstream_trigger_rules``,
    ``page_size``, ``api_timeout``) are the gate's too:
    :class:`~airflow_retrywindow.operators.retry_window_mixin.RetryWindowMixin`.
    Without a ``deadline``, the target's policy's is used.
    """

    kind = "sensor"

    def __init__(
        self,
        *,
        target: str,
        work: Work | EstimateOverride | None = None,
        deferrable: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.target = target_argument(target, self.task_id)
        self.work = work_argument(work, "work")
        self.deferrable = deferrable_argument(deferrable, self.mode)
        self._started = pendulum.now("UTC")
        self._final: dict[str, Any] | None = None

    def retry_window_problems(self) -> list[str]:
        """Everything wrong with this sensor in its DAG, checked when the DAG is parsed."""
        if not self.has_dag():  # type: ignore[no-untyped-call]
            return [f"sensor {self.task_id!r} is not in a DAG"]
        problems = target_problems(self.dag, [self.target])
        problems.extend(
            estimate_problems(self.dag, {self.target: self.work}, self.deadline, kind="sensor")
        )
        for task_id in sorted(self.downstream_task_ids):
            problem = unsafe_trigger_rule(self.dag.task_dict[task_id], self.task_id)
            if problem:
                problems.append(problem)
        return problems

    # -- the three ways of waiting ------------------------------------------------

    def given_estimates(self) -> Mapping[str, GivenEstimate]:
        """The target -> the estimate the sensor was given for it (``None``: its policy's)."""
        return {self.target: self.work}

    @metrics.counts_gate_errors(by=metrics.SENSOR)
    def execute(self, context: Context) -> Any:
        self._refuse_if_misconfigured("the retry")
        if self.deferrable:
            return self._decide_or_defer(context, started=pendulum.now("UTC"), waits=[])
        self._started = self._first_poke(context)
        # the sensor waits until the target's backoff ends (poke_interval, set by each
        # poke): Airflow's own doubling of the interval would wait past it
        self.exponential_backoff = False
        super().execute(context)  # pokes (or reschedules) until a final decision
        if self._final is None:  # pragma: no cover - poke() sets it before succeeding
            raise RuntimeError("the sensor finished without a decision")
        return self._finish(context, self._final)

    def execute_complete(self, context: Context, event: Any = None) -> Any:
        """Resume after the backoff: evaluate again with fresh observations."""
        previous = context["ti"].xcom_pull(task_ids=self.task_id, key="return_value")
        started, waits = pendulum.now("UTC"), []
        if isinstance(previous, dict):
            waits = list(previous.get("waits") or [])
            first = previous.get("firstEvaluatedAt")
            if isinstance(first, str):
                started = _parse(first)
        self.log.info("Backoff over (%s); evaluating again", event)
        return self._decide_or_defer(context, started=started, waits=waits)

    def poke(self, context: Context) -> bool | PokeReturnValue:
        decided = self._decide_now(context)
        # a mapped target waits for the map index whose backoff ends last
        row = decided.table.longest_wait(self.target)
        if row is not None:
            self.poke_interval = self._wait_until(row.earliest_start)
            # the latest evaluation stays visible while the sensor waits
            record = self._sensor_record(context, decided, waits=[])
            context["ti"].xcom_push(key="return_value", value=record)
            self.log.info("%s; poking again at %s", safe_json(row.reason), row.earliest_start)
            return False
        self._final = self._sensor_record(context, decided, waits=[])
        return True

    def _first_poke(self, context: Context) -> pendulum.DateTime:
        """When the sensor's waiting began, as Airflow times it against ``timeout``: this try's
        start, or in ``reschedule`` mode the first reschedule's."""
        first = context["ti"].get_first_reschedule_date(context) if self.reschedule else None
        return pendulum.now("UTC") if first is None else pendulum.instance(first).in_timezone("UTC")

    def _wait_until(self, until: pendulum.DateTime | None) -> float:
        """Seconds to sleep or reschedule for: until the backoff ends, not a fixed interval."""
        now = pendulum.now("UTC")
        wait = (until - now).total_seconds() if until is not None else float(self.poke_interval)
        left = self.timeout - (now - self._started).total_seconds()
        # a second at least, never past the timeout (the next poke then times out)
        return max(1.0, min(wait, max(left, 0.0) + 1.0))

    # -- deciding ---------------------------------------------------------------

    def _decide_or_defer(
        self, context: Context, *, started: pendulum.DateTime, waits: list[dict[str, Any]]
    ) -> Any:
        sleep_under: timedelta | None = None
        while True:
            decided = self._decide_now(context)
            # a mapped target waits for the map index whose backoff ends last
            row = decided.table.longest_wait(self.target)
            if row is None or row.earliest_start is None:
                return self._finish(
                    context, self._sensor_record(context, decided, waits=waits, started=started)
                )
            # a second past it: the next evaluation measures the API server's clock anew,
            # to within the Date's whole second, and found a fraction of it still to wait
            until = row.earliest_start + DATE_RESOLUTION
            time_limit = started.add(seconds=self.timeout)
            if until > time_limit:
                record = self._sensor_record(context, decided, waits=waits, started=started)
                context["ti"].xcom_push(key="return_value", value=timed_out(record))
                held = "backoff" if row.decision == WAIT_BACKOFF else "hold on its pool"
                self._time_out(
                    f"Sensor has timed out: the {held} of {row.label} ends at "
                    f"{until.format(UTC_ISO)}, after the sensor's timeout at "
                    f"{time_limit.format(UTC_ISO)}"
                )
            at = decided.table.as_of.format(UTC_ISO)
            waits.append({"at": at, "until": until.format(UTC_ISO), "reason": row.blockers()[0]})
            record = self._sensor_record(context, decided, waits=waits, started=started)
            # visible while waiting, and read back on resume (dag.test keeps no next_kwargs)
            context["ti"].xcom_push(key="return_value", value=record)
            if sleep_under is None:  # the reader of this evaluation asks the API server
                sleep_under = short_wait(functools.partial(_api_version, decided))
            left = until - pendulum.now("UTC")
            if left >= sleep_under:
                break
            self.log.info("%s; waiting here until %s", safe_json(row.reason), until.format(UTC_ISO))
            # an Event's wait, not time.sleep: it also works on a faked clock (faketime)
            threading.Event().wait(max(left.total_seconds(), 0.0))
        self.log.info("%s; deferring until %s", safe_json(row.reason), until.format(UTC_ISO))
        self.defer(
            trigger=DateTimeTrigger(moment=until),
            method_name="execute_complete",
            timeout=timedelta(seconds=max((time_limit - pendulum.now("UTC")).total_seconds(), 1.0)),
        )

    def _time_out(self, message: str) -> None:
        if self.soft_fail or self.never_fail:
            raise AirflowSkipException(message)
        raise AirflowSensorTimeout(message)

    @metrics.counts_gate_errors(by=metrics.SENSOR)
    def _decide_now(self, context: Context) -> GateDecision:
        return self._decide(context, self.estimates())

    def _sensor_record(
        self,
        context: Context,
        decided: GateDecision,
        *,
        waits: list[dict[str, Any]],
        started: pendulum.DateTime | None = None,
    ) -> dict[str, Any]:
        blockers = decided.table.blockers(self.target)
        if not blockers:
            action = "run"
        elif decided.table.longest_wait(self.target) is not None:
            action = "wait"
        else:
            action = "skip"
        guard = [
            {"taskId": task_id, "targets": [self.target], "action": action, "blockers": blockers}
            for task_id in sorted(self.downstream_task_ids)
        ]
        return self._record(
            context,
            decided,
            self.estimates(),
            guard=guard,
            skipped=[],
            extra={
                "target": self.target,
                "action": action,
                "waits": waits,
                "firstEvaluatedAt": (started or decided.table.as_of).format(UTC_ISO),
            },
        )

    def _finish(self, context: Context, record: dict[str, Any]) -> None:
        if record["action"] == "run":
            self.log.info("The retry of %s may run.", self.target)
            self._publish(context, record, [])
            return
        to_skip = self._to_skip(context)
        record["skipped"] = [task.task_id for task in to_skip]
        self.log.info("Skipping the retry of %s: %s", self.target, record["skipped"])
        self._publish(context, record, to_skip)

    def _to_skip(self, context: Context) -> list[Any]:
        task = context["task"]
        relatives = (
            task.get_flat_relatives(upstream=False)
            if self.ignore_downstream_trigger_rules
            else task.get_direct_relatives(upstream=False)
        )
        return sorted(
            (relative for relative in relatives if not relative.is_teardown),
            key=lambda relative: relative.task_id,
        )


def _api_version(decided: GateDecision) -> str:
    """The Airflow version of the API server an evaluation read, by its reader; ``""``
    (not understood: the race is taken to be open) when it read none."""
    return decided.reader.version() if decided.reader is not None else ""


def _parse(text: str) -> pendulum.DateTime:
    parsed = pendulum.parse(text)
    if not isinstance(parsed, pendulum.DateTime):
        raise ValueError(f"not a date and time: {text!r}")
    return parsed.in_timezone("UTC")
