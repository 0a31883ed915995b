"""Decision record: a gate's or a sensor's ``return_value`` XCom, read back.

Written here (:func:`written`, called by :func:`airflow_retrywindow.gate.record.build`,
stamped with :mod:`~airflow_retrywindow.records.schema`), and read here for the view and the
notifier alike: whether a stored value is a record at all, its shape version,
its decisions (one per target), its fixtures, and its guard entries (which
guarded task waits on which target, and whether it may run).

A user's task may return anything under ``return_value``: a value without a
record's keys is "not a retry window record"
(:data:`~airflow_retrywindow.records.schema.NOT_A_RECORD`), never a crash, and a
record of a newer shape is reported, never guessed at. Every earlier shape reads: records written
before versions carry none and are version 0. Nothing here imports Airflow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pendulum

from airflow_retrywindow.exceptions import RecordError
from airflow_retrywindow.labels import label
from airflow_retrywindow.records.schema import NOT_A_RECORD, stamped, version_problem
from airflow_retrywindow.redaction import safe_json, without_userinfo

#: the keys every decision record has, in every shape written so far
RECORD_KEYS = frozenset({"gate", "decisions", "fixtures", "asOf", "deadline"})
#: what the record's texts are matched on (task ids, the run, the model's ids) or must
#: replay byte for byte (the fixtures): kept exactly when the rest is masked
EXACT_KEYS = frozenset(
    {"gate", "dagId", "runId", "taskId", "modelId", "target", "targets", "skipped", "fixtures"}
)
#: the key a sensor's record says what it did by, when that is more than deciding
ACTION_KEY = "action"
#: the sensor timed out: the backoff ends after its timeout
TIMED_OUT = "timeout"
#: a guard entry's wording when an approval let its task run and the record has no words for it
OVERRIDE_WORDS = "refused by the model, overridden by an approval"


def is_decision_record(task_id: str, value: object) -> bool:
    """Whether ``value`` is the decision record the task ``task_id`` published."""
    return (
        isinstance(value, Mapping) and value.keys() >= RECORD_KEYS and value.get("gate") == task_id
    )


def look_alike_note(task_id: str, map_index: int) -> str:
    """What is said of a value with a record's keys that no gate or sensor published.

    :param task_id: the task that returned it.
    :param map_index: its map index; -1 when not mapped.
    """
    where = label(task_id, map_index)
    return (
        f"{where}: its return value has the keys of a decision record, but the task is not "
        f"a retry window gate or sensor, so it is {NOT_A_RECORD}"
    )


def record_problem(value: object) -> str | None:
    """Why ``value`` cannot be read as a decision record, or ``None`` when it can.

    :param value: a stored ``return_value``.
    :returns: ``NOT_A_RECORD`` for any other value; for a record, why its
        shape is not one this release reads (a newer version).
    """
    if not isinstance(value, Mapping) or not value.keys() >= RECORD_KEYS:
        return NOT_A_RECORD
    return version_problem(value)


def written(
    *,
    gate: str,
    dag_id: str,
    run_id: str,
    try_number: int,
    deadline_rule: str,
    table: Mapping[str, Any],
    guard: Sequence[Mapping[str, Any]],
    skipped: Sequence[str],
    work_unit: object,
    api: str,
    requests: int,
    status_update: str,
    extra: Mapping[str, Any] | None = None,
    estimate_sources: Mapping[str, Mapping[str, str]] | None = None,
    override: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The record of one evaluation as stored: the one writer of its keys.

    Built by :func:`airflow_retrywindow.gate.record.build`, which says what each
    argument holds. Every text but :data:`EXACT_KEYS` is masked: an observation's
    source, a unit of work, a reason may show credentials or a value registered
    with ``mask_secret``, and the record is stored and shown.

    :param table: the decisions, fixtures, ``asOf`` and ``deadline``, as the table writes them.
    :param status_update: the short English update, already written.
    :param estimate_sources: task id -> field -> where its value came from.
    :param override: the approved override, as :mod:`~airflow_retrywindow.records.override`
        reads it back.
    """
    record: dict[str, Any] = {
        "gate": gate,
        "dagId": dag_id,
        "runId": run_id,
        "tryNumber": try_number,
        "deadlineRule": deadline_rule,
        **table,
        "guard": list(guard),
        "skipped": list(skipped),
        "workUnit": work_unit,
        # the record is stored and shown: never with the URL's credentials
        "api": without_userinfo(api),
        "requests": requests,
        "claims": {"safeRepeat": "asserted by the DAG author, not proven by the gate"},
        "capacityNote": (
            "pool numbers are as read at asOf (this gate included when it runs in that pool); "
            "free workers are not pool slots"
        ),
        **(dict(extra) if extra else {}),
    }
    if estimate_sources is not None:
        for row in record["decisions"]:
            row["estimateSource"] = dict(estimate_sources.get(row["taskId"], {}))
    if override is not None:
        record["override"] = dict(override)
    record["statusUpdate"] = status_update
    return stamped(safe_json(record, keep=EXACT_KEYS))


def timed_out(record: Mapping[str, Any]) -> dict[str, Any]:
    """A sensor's ``record``, as stored when its wait would end after its timeout."""
    return {**record, ACTION_KEY: TIMED_OUT}


def record_kind(record: Mapping[str, Any]) -> str:
    """``sensor`` for a sensor's record (it names its one ``target``), else ``gate``."""
    return "sensor" if "target" in record else "gate"


@dataclass(frozen=True)
class GuardEntry:
    """What the gate did about one guarded task, as its record's ``guard`` entry says.

    :param task_id: the guarded task, as stored (written as text).
    :param runs: whether it may run.
    :param targets: the targets it waits on; only texts are targets.
    :param blockers: why it is held back, as stored.
    :param overridden: the model's refusals an approval overrode for it.
    :param override: the record's words for the override, when it has them.
    """

    task_id: str
    runs: bool
    targets: tuple[str, ...]
    blockers: tuple[str, ...]
    overridden: tuple[str, ...]
    override: str | None

    @classmethod
    def of(cls, stored: Mapping[str, Any]) -> GuardEntry:
        """Read one entry; nothing in it fails to read, whatever it holds."""
        targets = stored.get("targets")
        override = stored.get("override")
        return cls(
            task_id=str(stored.get("taskId")),
            runs=stored.get("action") == "run",
            # a number or a text is not a list of targets: "load" in "preload"
            targets=tuple(
                item
                for item in (targets if isinstance(targets, list) else [])
                if isinstance(item, str)
            ),
            blockers=_texts(stored.get("blockers")),
            overridden=_texts(stored.get("overridden")),
            override=str(override) if override else None,
        )

    def guards(self, target: object) -> bool:
        """Whether the entry waits on ``target``, matched exactly."""
        return isinstance(target, str) and target in self.targets

    @property
    def on_override(self) -> bool:
        """Whether the task runs only because an approval overrode the model."""
        return self.runs and bool(self.override or self.overridden)

    @property
    def override_words(self) -> str:
        """The record's words for the override, or the general ones."""
        return self.override or OVERRIDE_WORDS

    def verb(self) -> str:
        """``may run``, ``held back``, or for a refusal overridden: runs because of the override."""
        if not self.runs:
            return "held back"
        if not self.on_override:
            return "may run"
        return f"may run only because of the approved override ({self.override_words})"


def guard_entries(record: Mapping[str, Any]) -> tuple[GuardEntry, ...]:
    """The record's guard entries; what is not an entry is left out."""
    guard = record.get("guard")
    items = guard if isinstance(guard, list) else []
    return tuple(GuardEntry.of(item) for item in items if isinstance(item, Mapping))


def instant(record: Mapping[str, Any], key: str) -> pendulum.DateTime:
    """A stored ISO 8601 time with an offset, in UTC.

    :raises RecordError: naming the key and the value when it is not one.
    """
    value = record.get(key)
    try:
        # tz=None keeps a time without an offset naive, so it is refused below
        parsed = pendulum.parse(value, tz=None, strict=True) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, pendulum.DateTime) or parsed.tzinfo is None:
        raise RecordError(key, value, "must be an ISO 8601 time with an offset")
    return parsed.in_timezone("UTC")


def whole_number(entry: Mapping[str, Any], key: str) -> int | None:
    """A stored whole number (``true`` is not one), or ``None``."""
    value = entry.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _texts(value: object) -> tuple[str, ...]:
    if not value:
        return ()
    if isinstance(value, list):
        return tuple(str(item) for item in value)
    return (str(value),)  # one reason stored on its own, not a list of them
