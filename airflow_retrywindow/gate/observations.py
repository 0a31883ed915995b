"""Explicit observations: what another task saw of a target, as the gate's argument.

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
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime

import pendulum

from airflow_retrywindow.exceptions import ClockError, ObservationError
from airflow_retrywindow.gate.instances import parse_label
from airflow_retrywindow.model.bounds import MAX_ATTEMPTS
from airflow_retrywindow.model.states import TaskState
from airflow_retrywindow.timing.clock import require_aware

#: the states an observation may give: the model's
MODEL_STATES = tuple(state.value for state in TaskState)

_OBSERVATION_FIELDS = frozenset({"state", "observed_at", "finished_at", "attempts", "source"})


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


def parse_observations(
    value: object,
    targets: Collection[str],
    *,
    as_of: datetime,
    mapped: Collection[str] = (),
) -> dict[str, ExplicitObservation]:
    """Read explicit observations: a mapping, or its JSON (or Python literal) text.

    ``None``, ``""`` and ``"None"`` (an empty XCom pull) mean no observations.

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
        or not 1 <= attempts <= MAX_ATTEMPTS
    ):
        raise ObservationError(
            f"{where}: attempts must be a whole number from 1 to {MAX_ATTEMPTS}, got {attempts!r}"
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
