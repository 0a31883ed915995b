"""Observe: each task instance of each target as the model sees it, from the snapshot
and explicit observations.

A task instance as observed is a :class:`~airflow_retrywindow.timing.fixtures.TaskFacts`,
the type the retry policy observes its own task with; :class:`Observed` pairs it
with its target, its map index and what Airflow's row of its latest try says.
The REST API's row (:class:`~airflow_retrywindow.hooks.api_reader.TaskInstanceRow`)
becomes one here, in :func:`observe`, and nowhere else.

Every map index of a mapped target is observed on its own, exactly as a target
that is not mapped: Airflow's state of its latest try becomes a model state as
:mod:`~airflow_retrywindow.gate.read` tabulates; a failure takes the
class its ``RetryWindowPolicy`` recorded in XCom. ``attempts`` counts the
current window as the retry policy does, ``try_number - (max_tries - retries)``,
on the row of the latest try.

Explicit observations (:func:`parse_observations`, below) then
override Airflow's view of a task instance (``load``, or ``load[3]`` for a map
index), but never loosen it: a try Airflow sees in progress cannot be
overridden, and ``attempts`` is at least Airflow's count.

Nothing here reads the API or imports Airflow.

**Explicit observations**: what another task saw of a target, as the gate's argument.
They override Airflow's view of a target, but never loosen it (see
:func:`~airflow_retrywindow.gate.observe.observe_explicitly`). Their JSON shape,
keyed by task id, or for a mapped target by task id and map index (``"load[3]"``,
as Airflow's UI names a map index)::

    {
      "append": {
        "state": "retryable",                   # running|unknown|succeeded|retryable|terminal
        "observed_at": "2026-03-02T05:40:00Z",  # when the state was observed (with offset)
        "finished_at": "2026-03-02T05:31:10Z",  # null for running and unknown
        "attempts": 1,                          # optional: never fewer than Airflow's count
        "source": "load job fund-positions-20260301-v3"  # optional: where it was seen
      }
    }

Reading them needs no API: bad observations are refused before any request.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import pendulum

from airflow_retrywindow.configuration import DEFAULT_CLOCK_SKEW_TOLERANCE
from airflow_retrywindow.exceptions import ClockError, ObservationError, TargetError
from airflow_retrywindow.gate.read import (
    RESET_STATES,
    RUNNING_STATES,
    SUCCESS_STATES,
    RunSnapshot,
    failed,
    known_state,
)
from airflow_retrywindow.gate.targets import Target
from airflow_retrywindow.labels import UNMAPPED, UTC_SHOWN, Instance, parse_label
from airflow_retrywindow.model.bounds import MAX_ATTEMPTS
from airflow_retrywindow.model.decisions import NOT_ATTEMPTED
from airflow_retrywindow.model.states import TaskState
from airflow_retrywindow.records import evidence
from airflow_retrywindow.records.evidence import RETRYABLE, TERMINAL, UNKNOWN
from airflow_retrywindow.timing.clock import require_aware
from airflow_retrywindow.timing.fixtures import TaskFacts

if TYPE_CHECKING:
    from airflow_retrywindow.hooks.api_reader import TaskInstanceRow

#: how far an API time may run ahead of the time its answer arrived before we refuse;
#: the gate has moved the arrival onto the API server's clock (gate/run.py), so this
#: only catches an answer at odds with its own clock, within the one skew tolerance
CLOCK_TOLERANCE = timedelta(seconds=DEFAULT_CLOCK_SKEW_TOLERANCE)
#: how an observation's time is written in a reason
#: :attr:`Observed.source` of a task instance as Airflow's REST API shows it
AIRFLOW_API = "airflow-api"
#: :attr:`Observed.source` when an explicit observation replaced Airflow's view
OBSERVATIONS = "observations"


@dataclass(frozen=True)
class Observed:
    """One task instance of a target when the gate decides: the task as observed
    (:attr:`facts`), its target and map index, and Airflow's row of its latest try.

    The observed state, attempts and times are :attr:`facts` alone; Airflow's
    row is kept beside them because an explicit observation replaces Airflow's
    view but not what the record shows of Airflow, nor the pool the try holds.

    :param target: the target.
    :param facts: the task instance as observed, ``None`` when it was never tried.
    :param source: which view :attr:`facts` is: ``airflow-api`` or ``observations``.
    :param airflow_state: the state of the latest try in Airflow.
    :param try_number: the latest try's number in Airflow (0 if never tried).
    :param classification: how the state was found, in words.
    :param pool: the pool of the latest try (or the definition's).
    :param pool_slots: the slots of the latest try (or the definition's).
    :param map_index: the task instance's map index, ``-1`` when not mapped.
    """

    target: Target
    facts: TaskFacts | None
    source: str
    airflow_state: str | None
    try_number: int
    classification: str
    pool: str
    pool_slots: int
    map_index: int = UNMAPPED

    @property
    def state(self) -> str:
        """The model state, or ``not-attempted``."""
        return self.facts.state if self.facts else NOT_ATTEMPTED

    @property
    def detail(self) -> str:
        """Words for the reason: when and where an explicit observation was made."""
        if self.facts is None or self.source != OBSERVATIONS:
            return ""
        seen = f"observed {pendulum.instance(self.facts.observed_at).format(UTC_SHOWN)}"
        return f"{seen}; {self.facts.seen_in}" if self.facts.seen_in else seen

    @property
    def instance(self) -> Instance:
        """The task instance observed."""
        return Instance(self.target.task_id, self.map_index)


def observe_run(
    targets: Sequence[Target],
    snapshot: RunSnapshot,
    explicit: Mapping[str, TaskFacts],
    *,
    own_map_indexes: Mapping[str, int] | None = None,
) -> list[Observed]:
    """Every task instance of every target as observed: targets in order, map indexes rising.

    :param targets: the gate's targets.
    :param snapshot: what the read found.
    :param explicit: task instance name (``load``, ``load[3]``) -> its explicit
        observation as parsed (:func:`parse_observations`), if any.
    :param own_map_indexes: target task id -> the one map index observed of it
        (a gate in a mapped task group, about its own map index); other targets
        are observed at every map index.
    :raises ObservationError: for an observation of a task instance the run does
        not have, or that the gate does not decide.
    """
    own = own_map_indexes or {}
    observed: dict[Instance, Observed] = {}
    for target in targets:
        for instance in _instances(snapshot, target.task_id, own.get(target.task_id)):
            row = snapshot.latest_try(instance)
            failure, source = recorded_failure(snapshot, instance)
            observed[instance] = observe(
                target,
                row,
                failure=failure,
                failure_source=source,
                map_index=instance.map_index,
            )
    for name, observation in explicit.items():
        instance = parse_label(name)
        mine = own.get(instance.task_id)
        if mine is not None and instance.map_index != mine:
            raise ObservationError(
                f"observations for {name!r}: this gate is in the mapped task group of "
                f"{instance.task_id!r} and decides only its own map index, "
                f"{Instance(instance.task_id, mine).label}; drop the observation or name that one"
            )
        if instance not in observed:
            known = snapshot.instances(instance.task_id)
            raise ObservationError(
                f"observations for {name!r}: this run has no such task instance of "
                f"{instance.task_id!r} (it has {_span(known)}); name one of them"
            )
        airflow_view = observed[instance]
        observed[instance] = observe_explicitly(airflow_view.target, observation, airflow_view)
    return list(observed.values())


def _instances(snapshot: RunSnapshot, task_id: str, only: int | None) -> list[Instance]:
    """The task instances of a target to observe: all, or the one map index ``only``."""
    found = snapshot.instances(task_id)
    if only is None:
        return found
    return [instance for instance in found if instance.map_index == only] or [
        Instance(task_id, only)  # not expanded yet: never tried
    ]


def _span(instances: Sequence[Instance]) -> str:
    if len(instances) == 1:
        return instances[0].label
    return f"{instances[0].label} to {instances[-1].label}"


def recorded_failure(snapshot: RunSnapshot, instance: Instance) -> tuple[str | None, str]:
    """The failure class the policy recorded for the instance's latest try, and where it was read.

    ``(None, "")`` when the latest try did not fail or no class was recorded.
    """
    row = snapshot.latest_try(instance)
    if row is None or not failed(row):
        return None, ""
    mine = snapshot.keys_of_try(instance)
    marked = [(key, evidence.failure_of_key(key.key)) for key in mine]
    classes = [(key, failure) for key, failure in marked if failure is not None]
    if classes:
        key, failure = max(classes, key=lambda item: item[0].timestamp)
        return failure, f"XCom {key.key} of try {row.try_number}"
    if not any(key.key == evidence.EVIDENCE_KEY for key in mine):
        return None, ""
    # evidence without the class in a key (an older policy): the read fetched its value
    entry = snapshot.evidence.get(instance)
    if isinstance(entry, dict) and entry.get("tryNumber") == row.try_number:
        recorded = entry.get("failure")
        if isinstance(recorded, str):
            return recorded, f"XCom {evidence.EVIDENCE_KEY} of try {row.try_number}"
    return None, ""


def observe(
    target: Target,
    row: TaskInstanceRow | None,
    *,
    failure: str | None,
    failure_source: str,
    map_index: int = UNMAPPED,
) -> Observed:
    """Airflow's view of one task instance of ``target`` from the row of its latest try.

    The one place the REST API's row becomes the task as observed.

    :param target: the target.
    :param row: the row of its latest try, ``None`` when it was never tried.
    :param failure: the class the task's retry policy recorded for this try's
        failure (unknown, terminal or retryable), if any.
    :param failure_source: where ``failure`` came from, in words.
    :param map_index: the task instance's map index, ``-1`` when not mapped.
    """
    name = Instance(target.task_id, map_index).label
    if row is None or known_state(row).state in RESET_STATES or row.try_number < 1:
        return Observed(
            target=target,
            facts=None,
            source=AIRFLOW_API,
            airflow_state=row.state if row else None,
            try_number=row.try_number if row else 0,
            classification="never tried in this run",
            pool=row.pool if row else target.pool,
            pool_slots=row.pool_slots if row else target.pool_slots,
            map_index=map_index,
        )
    state, classification = _model_state(target, row.state, failure, failure_source)
    attempts = _attempts(name, target, row)
    observed_at = row.observed_at
    finished: pendulum.DateTime | None = None
    if state not in ("running", "unknown"):
        finished = row.end_date or observed_at
        if finished > observed_at + CLOCK_TOLERANCE:
            raise TargetError(
                f"task {name!r}: the API reports try {row.try_number} ended at "
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
        source=AIRFLOW_API,
        airflow_state=row.state,
        try_number=row.try_number,
        classification=classification,
        pool=row.pool,
        pool_slots=row.pool_slots,
        map_index=map_index,
    )


def _model_state(
    target: Target, airflow_state: str | None, failure: str | None, failure_source: str
) -> tuple[TaskState, str]:
    if airflow_state in SUCCESS_STATES:
        return TaskState.SUCCEEDED, f"Airflow state {airflow_state}"
    if airflow_state in RUNNING_STATES:
        return TaskState.RUNNING, f"Airflow state {airflow_state}"
    if failure in (UNKNOWN, TERMINAL, RETRYABLE):
        return TaskState(failure), (
            f"Airflow state {airflow_state}; failure classified {failure} by the "
            f"task's RetryWindowPolicy ({failure_source})"
        )
    if target.gated:
        # the policy records every failure it sees; a failure without a record
        # (killed worker, heartbeat timeout, a policy error) may have reached the
        # remote service: the outcome is unknown until someone looks
        return TaskState.UNKNOWN, (
            f"Airflow state {airflow_state}; the task's RetryWindowPolicy recorded no "
            "classification for this try, so its outcome is treated as unknown"
        )
    return TaskState.RETRYABLE, f"Airflow state {airflow_state}; no RetryWindowPolicy on the task"


def _attempts(name: str, target: Target, row: TaskInstanceRow) -> int:
    try:
        return target.settings.attempts_in_window(row.try_number, row.max_tries)
    except ValueError as error:
        shown = f" ({name})" if name != target.task_id else ""
        raise TargetError(f"{error}{shown}") from None


def observe_explicitly(target: Target, explicit: TaskFacts, airflow_view: Observed) -> Observed:
    """A task instance of ``target`` as an explicit observation states it, overriding Airflow's.

    An observation may only make the decision more cautious than Airflow's view:
    it cannot override a try Airflow sees in progress, and it counts at least
    the attempts Airflow counted.

    :param target: the target.
    :param explicit: the observation as parsed (:func:`parse_observations`).
    :param airflow_view: what Airflow says: its state and attempt count.
    """
    name = airflow_view.instance.label
    if airflow_view.facts is not None and airflow_view.airflow_state in RUNNING_STATES:
        raise ObservationError(
            f"observations for {name!r}: Airflow sees try {airflow_view.try_number} "
            f"in the state {airflow_view.airflow_state!r} right now; an observation cannot "
            "override a try in progress. Wait until the try ends, or drop the observation"
        )
    counted = airflow_view.facts.attempts if airflow_view.facts is not None else None
    if explicit.attempts is None and counted is None:
        raise ObservationError(
            f"observations for {name!r} need 'attempts': Airflow has no try "
            "of this task in the run to count from"
        )
    # fewer attempts than Airflow counted would hand back tries already spent
    attempts = max(n for n in (explicit.attempts, counted) if n is not None)
    if attempts > target.settings.max_attempts:
        raise ObservationError(
            f"observations for {name!r}: attempts={attempts} is more than the "
            f"{target.settings.max_attempts} runs its retry settings allow in one window"
        )
    # the observation, completed with what the gate knows: its target's estimate
    facts = replace(explicit, task_id=target.task_id, attempts=attempts, work=target.work)
    return Observed(
        target=target,
        facts=facts,
        source=OBSERVATIONS,
        airflow_state=airflow_view.airflow_state,
        try_number=airflow_view.try_number,
        classification=f"explicit observation ({explicit.seen_in or 'no source given'})",
        pool=airflow_view.pool,
        pool_slots=airflow_view.pool_slots,
        map_index=airflow_view.map_index,
    )


# -- explicit observations, as given ------------------------------------------------

#: the states an observation may give: the model's
MODEL_STATES = tuple(state.value for state in TaskState)

_OBSERVATION_FIELDS = frozenset({"state", "observed_at", "finished_at", "attempts", "source"})


def parse_observations(
    value: object,
    targets: Collection[str],
    *,
    as_of: datetime,
    mapped: Collection[str] = (),
) -> dict[str, TaskFacts]:
    """Read explicit observations: a mapping, or its JSON (or Python literal) text.

    ``None``, ``""`` and ``"None"`` (an empty XCom pull) mean no observations.
    Each is a :class:`~airflow_retrywindow.timing.fixtures.TaskFacts` without an
    estimate (and without ``attempts`` when none were given): the gate pairs it
    with its target when it observes the run (:func:`observe_explicitly`).

    :param value: the rendered ``observations`` argument.
    :param targets: the gate's target ids; other keys are refused.
    :param as_of: the moment of the decision; observations may not be later.
    :param mapped: the targets whose task instances carry map indexes: their
        observations name one (``"load[3]"``); whether the run has it is checked
        when the gate observes the run.
    """
    if value is None or (isinstance(value, str) and value.strip() in ("", "None", "null")):
        return {}
    if isinstance(value, str):
        value = _decode(value)
    if not isinstance(value, Mapping):
        raise ObservationError(
            f"observations must be a mapping of task id to observation, got {_shown(value)}"
        )
    unknown = sorted(str(key) for key in value if not _names_target(key, targets, mapped))
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


def _names_target(key: object, targets: Collection[str], mapped: Collection[str]) -> bool:
    if not isinstance(key, str):
        return False
    instance = parse_label(key)
    if instance.task_id in mapped and not instance.mapped:
        raise ObservationError(
            f"observations name {key!r}, a mapped target: name the map index the observation "
            f"is about, e.g. '{key}[0]'"
        )
    return instance.task_id in targets and instance.mapped == (instance.task_id in mapped)


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


def _observation(task_id: str, raw: object, as_of: datetime) -> TaskFacts:
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
        or not 1 <= attempts <= MAX_ATTEMPTS
    ):
        raise ObservationError(
            f"{where}: attempts must be a whole number from 1 to {MAX_ATTEMPTS}, got {attempts!r}"
        )
    source = raw.get("source")
    if source is not None and not isinstance(source, str):
        raise ObservationError(f"{where}: source must be text, got {_shown(source)}")
    return TaskFacts(
        task_id=parse_label(task_id).task_id,
        state=TaskState(state),
        attempts=attempts,
        observed_at=observed_at,
        finished_at=finished_at,
        seen_in=source,
    )


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
