"""The tasks a gate decides about, and how Airflow's view of them becomes model facts.

Each target's latest try maps onto the model's states:

========================================================  ============================
Airflow state of the latest try                            model state
========================================================  ============================
``success``                                                ``succeeded``
``queued``, ``scheduled``, ``running``, ``deferred``,      ``running``
``up_for_reschedule``, ``restarting``, ``awaiting_input``
``up_for_retry``, ``failed``                               ``retryable``, unless the
                                                           task's ``RetryWindowPolicy``
                                                           classified the failure as
                                                           ``unknown`` or ``terminal``
never tried (``try_number`` 0)                             ``not-attempted`` (no fixture:
                                                           a first run is not a retry)
========================================================  ============================

A task instance reset since its last try (``None``, ``skipped``,
``upstream_failed``, ``removed``: after a manual clear, a skip, an upstream
failure or a DAG change) is judged by that last try, read from the task's
earlier tries. Those are every state of Airflow 3.3's ``TaskInstanceState``; any
other state is refused (:class:`TargetError`) rather than guessed at, since
reading past it could turn a try we do not understand into a first run.

``attempts`` counts the current window as the retry policy does,
``try_number - (max_tries - retries)``, on the row of the latest try.

Explicit observations override Airflow's view for a target, but never loosen
it: a try Airflow sees in progress cannot be overridden, and ``attempts`` is at
least Airflow's count. Their JSON shape, keyed by task id::

    {
      "append": {
        "state": "retryable",                   # running|unknown|succeeded|retryable|terminal
        "observed_at": "2026-03-02T05:40:00Z",  # when the state was observed (with offset)
        "finished_at": "2026-03-02T05:31:10Z",  # null for running and unknown
        "attempts": 1,                          # optional: never fewer than Airflow's count
        "source": "load job fund-positions-20260301-v3"  # optional: where it was seen
      }
    }
"""

from __future__ import annotations

import ast
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pendulum

from airflow_retrywindow.exceptions import ClockError, ObservationError, TargetError
from airflow_retrywindow.hooks.airflow_api import TaskInstanceRow
from airflow_retrywindow.policies.failures import RETRYABLE, TERMINAL, UNKNOWN
from airflow_retrywindow.timing.clock import require_aware
from airflow_retrywindow.timing.fixtures import TaskFacts
from airflow_retrywindow.timing.retry_settings import MAX_RETRIES, RetrySettings
from airflow_retrywindow.timing.work import Work

NOT_ATTEMPTED = "not-attempted"
#: the model's limit on tasks per fixture
MAX_FIXTURE_TASKS = 20

RUNNING_STATES = frozenset(
    {
        "queued",
        "scheduled",
        "running",
        "deferred",
        "up_for_reschedule",
        "restarting",
        "awaiting_input",
    }
)
FAILED_STATES = frozenset({"failed", "up_for_retry"})
SUCCESS_STATES = frozenset({"success"})
#: states of a try that really started
TRIED_STATES = RUNNING_STATES | FAILED_STATES | SUCCESS_STATES
#: states of a task instance that no longer shows its try (or never had one)
RESET_STATES = frozenset({None, "skipped", "upstream_failed", "removed"})
MODEL_STATES = ("running", "unknown", "succeeded", "retryable", "terminal")
#: how far an API time may run ahead of this worker's clock before we refuse
CLOCK_TOLERANCE = timedelta(seconds=5)

_OBSERVATION_FIELDS = frozenset({"state", "observed_at", "finished_at", "attempts", "source"})


@dataclass(frozen=True)
class Target:
    """A task of the same DAG whose next attempt the gate decides.

    :param task_id: the Airflow task id.
    :param work: the estimate and idempotency claim for one attempt.
    :param settings: the task's own retry settings, as the model sees them.
    :param gated: whether the task has a ``RetryWindowPolicy``, which records
        how each failure was classified.
    :param pool: the pool the task runs in, per its definition.
    :param pool_slots: the slots one attempt holds, per its definition.
    """

    task_id: str
    work: Work
    settings: RetrySettings
    gated: bool
    pool: str
    pool_slots: int


@dataclass(frozen=True)
class Observed:
    """What the gate knows about one target when it decides.

    :param target: the target.
    :param facts: the model facts, ``None`` when the target was never tried.
    :param source: ``airflow-api`` or ``observations``.
    :param airflow_state: the state of the latest try in Airflow.
    :param try_number: the latest try's number in Airflow (0 if never tried).
    :param classification: how the state was found, in words.
    :param pool: the pool of the latest try (or the definition's).
    :param pool_slots: the slots of the latest try (or the definition's).
    :param detail: words for the reason, e.g. where an observation came from.
    """

    target: Target
    facts: TaskFacts | None
    source: str
    airflow_state: str | None
    try_number: int
    classification: str
    pool: str
    pool_slots: int
    detail: str = ""

    @property
    def state(self) -> str:
        """The model state, or ``not-attempted``."""
        return self.facts.state if self.facts else NOT_ATTEMPTED


@dataclass(frozen=True)
class ExplicitObservation:
    """One target's state as another task observed it (see the module's JSON shape).

    :param state: the model state.
    :param observed_at: when it was observed.
    :param finished_at: when the latest attempt ended, ``None`` if unconfirmed.
    :param attempts: attempts in the current window, ``None`` for Airflow's count.
    :param source: where it was observed, free text.
    """

    state: str
    observed_at: pendulum.DateTime
    finished_at: pendulum.DateTime | None
    attempts: int | None
    source: str | None


def known_state(row: TaskInstanceRow) -> TaskInstanceRow:
    """``row``, if the gate knows what its state means; a :class:`TargetError` if not."""
    if row.state in TRIED_STATES or row.state in RESET_STATES:
        return row
    raise TargetError(
        f"task {row.task_id!r}: try {row.try_number} is in the Airflow state {row.state!r}, "
        "which the gate does not know, so it cannot tell whether the try ran; check the "
        "Airflow version (the gate knows Airflow 3.3's task instance states) and decide "
        "the repeat by hand"
    )


def needs_history(row: TaskInstanceRow | None) -> bool:
    """Whether the row was reset after a try, so the try itself must be read."""
    return row is not None and row.try_number > 0 and known_state(row).state in RESET_STATES


def latest_try(rows: Sequence[TaskInstanceRow]) -> TaskInstanceRow | None:
    """The latest try that really started, among a task's tries."""
    tried = [row for row in rows if known_state(row).state in TRIED_STATES and row.try_number > 0]
    return max(tried, key=lambda row: row.try_number, default=None)


def observe(
    target: Target,
    row: TaskInstanceRow | None,
    *,
    failure: str | None,
    failure_source: str,
) -> Observed:
    """Airflow's view of ``target`` from the row of its latest try.

    :param target: the target.
    :param row: the row of its latest try, ``None`` when it was never tried.
    :param failure: the class the task's retry policy recorded for this try's
        failure (unknown, terminal or retryable), if any.
    :param failure_source: where ``failure`` came from, in words.
    """
    if row is None or known_state(row).state in RESET_STATES or row.try_number < 1:
        return Observed(
            target=target,
            facts=None,
            source="airflow-api",
            airflow_state=row.state if row else None,
            try_number=row.try_number if row else 0,
            classification="never tried in this run",
            pool=row.pool if row else target.pool,
            pool_slots=row.pool_slots if row else target.pool_slots,
        )
    state, classification = _model_state(target, row.state, failure, failure_source)
    attempts = _attempts(target, row)
    observed_at = row.observed_at
    finished: pendulum.DateTime | None = None
    if state not in ("running", "unknown"):
        finished = row.end_date or observed_at
        if finished > observed_at + CLOCK_TOLERANCE:
            raise TargetError(
                f"task {target.task_id!r}: the API reports try {row.try_number} ended at "
                f"{finished.isoformat()}, after it answered at {observed_at.isoformat()} on this "
                "worker's clock; the API server's clock runs ahead, so no time can be trusted"
            )
        observed_at = max(observed_at, finished)
    facts = TaskFacts(
        task_id=target.task_id,
        state=state,
        attempts=attempts,
        observed_at=observed_at,
        finished_at=finished,
        work=target.work,
    )
    return Observed(
        target=target,
        facts=facts,
        source="airflow-api",
        airflow_state=row.state,
        try_number=row.try_number,
        classification=classification,
        pool=row.pool,
        pool_slots=row.pool_slots,
    )


def _model_state(
    target: Target, airflow_state: str | None, failure: str | None, failure_source: str
) -> tuple[str, str]:
    if airflow_state in SUCCESS_STATES:
        return "succeeded", f"Airflow state {airflow_state}"
    if airflow_state in RUNNING_STATES:
        return "running", f"Airflow state {airflow_state}"
    if failure in (UNKNOWN, TERMINAL, RETRYABLE):
        return failure, f"Airflow state {airflow_state}; failure classified {failure} by the " + (
            f"task's RetryWindowPolicy ({failure_source})"
        )
    if target.gated:
        # the policy records every failure it sees; a failure without a record
        # (killed worker, heartbeat timeout, a policy error) may have reached the
        # remote service: the outcome is unknown until someone looks
        return UNKNOWN, (
            f"Airflow state {airflow_state}; the task's RetryWindowPolicy recorded no "
            "classification for this try, so its outcome is treated as unknown"
        )
    return RETRYABLE, f"Airflow state {airflow_state}; no RetryWindowPolicy on the task"


def _attempts(target: Target, row: TaskInstanceRow) -> int:
    try:
        return target.settings.attempts_in_window(row.try_number, row.max_tries)
    except ValueError as error:
        raise TargetError(str(error)) from None


def observe_explicitly(
    target: Target, explicit: ExplicitObservation, airflow_view: Observed
) -> Observed:
    """``target`` as an explicit observation states it, overriding Airflow's view.

    An observation may only make the decision more cautious than Airflow's view:
    it cannot override a try Airflow sees in progress, and it counts at least
    the attempts Airflow counted.

    :param target: the target.
    :param explicit: the observation.
    :param airflow_view: what Airflow says: its state and attempt count.
    """
    if airflow_view.facts is not None and airflow_view.airflow_state in RUNNING_STATES:
        raise ObservationError(
            f"observations for {target.task_id!r}: Airflow sees try {airflow_view.try_number} "
            f"in the state {airflow_view.airflow_state!r} right now; an observation cannot "
            "override a try in progress. Wait until the try ends, or drop the observation"
        )
    counted = airflow_view.facts.attempts if airflow_view.facts is not None else None
    if explicit.attempts is None and counted is None:
        raise ObservationError(
            f"observations for {target.task_id!r} need 'attempts': Airflow has no try "
            "of this task in the run to count from"
        )
    # fewer attempts than Airflow counted would hand back tries already spent
    attempts = max(n for n in (explicit.attempts, counted) if n is not None)
    if attempts > target.settings.max_attempts:
        raise ObservationError(
            f"observations for {target.task_id!r}: attempts={attempts} is more than the "
            f"{target.settings.max_attempts} runs its retry settings allow in one window"
        )
    facts = TaskFacts(
        task_id=target.task_id,
        state=explicit.state,
        attempts=attempts,
        observed_at=explicit.observed_at,
        finished_at=explicit.finished_at,
        work=target.work,
    )
    seen = f"observed {explicit.observed_at.format('YYYY-MM-DD HH:mm:ss[Z]')}"
    return Observed(
        target=target,
        facts=facts,
        source="observations",
        airflow_state=airflow_view.airflow_state,
        try_number=airflow_view.try_number,
        classification=f"explicit observation ({explicit.source or 'no source given'})",
        pool=airflow_view.pool,
        pool_slots=airflow_view.pool_slots,
        detail=f"{seen}; {explicit.source}" if explicit.source else seen,
    )


def parse_observations(
    value: object, targets: Collection[str], *, as_of: datetime
) -> dict[str, ExplicitObservation]:
    """Read explicit observations: a mapping, or its JSON (or Python literal) text.

    ``None``, ``""`` and ``"None"`` (an empty XCom pull) mean no observations.

    :param value: the rendered ``observations`` argument.
    :param targets: the gate's target ids; other keys are refused.
    :param as_of: the moment of the decision; observations may not be later.
    """
    if value is None or (isinstance(value, str) and value.strip() in ("", "None", "null")):
        return {}
    if isinstance(value, str):
        value = _decode(value)
    if not isinstance(value, Mapping):
        raise ObservationError(
            f"observations must be a mapping of task id to observation, got {_shown(value)}"
        )
    unknown = sorted(str(key) for key in value if key not in targets)
    if unknown:
        raise ObservationError(
            f"observations name {', '.join(map(repr, unknown))}, which "
            f"{'is not a target' if len(unknown) == 1 else 'are not targets'} of this gate "
            f"(targets: {', '.join(sorted(targets))})"
        )
    return {
        str(task_id): _observation(str(task_id), raw, as_of)
        for task_id, raw in sorted(value.items())
    }


def _decode(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        # a dict pulled from XCom renders as its Python repr without native rendering
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise ObservationError(
            f"observations must be JSON (or a Python literal) of a mapping, got {_shown(text)}"
        ) from None


def _observation(task_id: str, raw: object, as_of: datetime) -> ExplicitObservation:
    where = f"observations[{task_id!r}]"
    if not isinstance(raw, Mapping):
        raise ObservationError(f"{where} must be a mapping, got {_shown(raw)}")
    extra = sorted(set(map(str, raw)) - _OBSERVATION_FIELDS)
    if extra:
        raise ObservationError(
            f"{where} has unexpected fields {', '.join(extra)}; allowed: "
            f"{', '.join(sorted(_OBSERVATION_FIELDS))}"
        )
    state = raw.get("state")
    if state not in MODEL_STATES:
        raise ObservationError(
            f"{where}: state must be one of {', '.join(MODEL_STATES)}, got {state!r}"
        )
    if "observed_at" not in raw:
        raise ObservationError(f"{where}: observed_at is required (when was the state seen?)")
    observed_at = _instant(raw["observed_at"], f"{where}.observed_at")
    if observed_at > require_aware(as_of, "as_of"):
        raise ObservationError(
            f"{where}: observed_at {observed_at.isoformat()} is later than now "
            f"({pendulum.instance(as_of).isoformat()}); check the observer's clock"
        )
    finished_raw = raw.get("finished_at")
    finished_at: pendulum.DateTime | None = None
    if state in ("running", "unknown"):
        if finished_raw is not None:
            raise ObservationError(
                f"{where}: a {state} task has no confirmed end; finished_at must be null"
            )
    else:
        if finished_raw is None:
            raise ObservationError(
                f"{where}: a {state} task needs finished_at (when its latest attempt ended)"
            )
        finished_at = _instant(finished_raw, f"{where}.finished_at")
        if finished_at > observed_at:
            raise ObservationError(
                f"{where}: finished_at {finished_at.isoformat()} is after observed_at "
                f"{observed_at.isoformat()}"
            )
    attempts = raw.get("attempts")
    if attempts is not None and (
        isinstance(attempts, bool)
        or not isinstance(attempts, int)
        or not 1 <= attempts <= MAX_RETRIES + 1
    ):
        raise ObservationError(
            f"{where}: attempts must be a whole number from 1 to {MAX_RETRIES + 1}, "
            f"got {attempts!r}"
        )
    source = raw.get("source")
    if source is not None and not isinstance(source, str):
        raise ObservationError(f"{where}: source must be text, got {_shown(source)}")
    return ExplicitObservation(state, observed_at, finished_at, attempts, source)


def _instant(value: object, name: str) -> pendulum.DateTime:
    if isinstance(value, str):
        value = _parsed(value, name)
    try:
        return require_aware(value, name)
    except ClockError as error:
        raise ObservationError(str(error)) from None


def _parsed(text: str, name: str) -> datetime:
    # pendulum, not datetime.fromisoformat: Python 3.10 cannot read a "Z" offset.
    # exact=True keeps a date, a time or a duration from passing as an instant;
    # tz=None keeps a missing offset missing, so it is refused, not taken as UTC
    try:
        parsed = pendulum.parse(text.strip(), exact=True, tz=None)
    except (ValueError, TypeError, OverflowError):  # pendulum's ParserError is a ValueError
        parsed = None
    if not isinstance(parsed, datetime):
        raise ObservationError(
            f"{name} must be an ISO 8601 time with an offset, e.g. "
            f"2026-03-02T05:40:00Z, got {_shown(text)}"
        )
    return parsed


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def group_by_policy(
    observed: Sequence[Observed],
) -> list[tuple[RetrySettings, list[TaskFacts]]]:
    """Facts grouped by retry policy, in chunks the model accepts (at most 20 tasks).

    Targets never tried have no facts and stay out. Groups and chunks keep the
    targets' order, so the same run always gives the same fixtures.
    """
    groups: dict[tuple[tuple[str, int], ...], tuple[RetrySettings, list[TaskFacts]]] = {}
    for view in observed:
        if view.facts is None:
            continue
        settings = view.target.settings
        key = tuple(sorted(settings.model_policy().items()))
        groups.setdefault(key, (settings, []))[1].append(view.facts)
    chunks: list[tuple[RetrySettings, list[TaskFacts]]] = []
    for settings, facts in groups.values():
        for start in range(0, len(facts), MAX_FIXTURE_TASKS):
            chunks.append((settings, facts[start : start + MAX_FIXTURE_TASKS]))
    return chunks


def target_of(task_id: str, work: Work, task: Any, settings: RetrySettings) -> Target:
    """A :class:`Target` for an Airflow task of the gate's DAG.

    :param task_id: the task id.
    :param work: the caller's estimate for it.
    :param task: the Airflow operator.
    :param settings: its retry settings as the model sees them.
    """
    from airflow_retrywindow.policies.check import gated

    return Target(
        task_id=task_id,
        work=work,
        settings=settings,
        gated=gated(task),
        pool=str(getattr(task, "pool", None) or "default_pool"),
        pool_slots=int(getattr(task, "pool_slots", 1) or 1),
    )
