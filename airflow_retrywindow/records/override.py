"""Override entry: a gate record's ``override``, read back for the view and the notifier.

A gate given an approval task (``approval=``) stores beside the model's
decisions what the approval let through: who approved, when, the stated reason,
the targets released and the refusals overridden, or why nothing (see
:meth:`~airflow_retrywindow.gate.approve.Override.as_dict` and
``docs/approved-override.md``). This reads that entry as stored, and refuses one
that claims an override without saying who approved it and when: an override is
never shown on a guess.

Every text passes through :func:`~airflow_retrywindow.redaction.safe_text`.
Nothing here imports Airflow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import pendulum

from airflow_retrywindow.exceptions import RecordError
from airflow_retrywindow.redaction import safe_text

#: the longest reason or note kept; the gate caps the reason at 500 characters
MAX_TEXT = 2_000


@dataclass(frozen=True)
class OverrideEntry:
    """What the gate's approval task let through on one evaluation, as stored.

    :param approval: the approval task's id.
    :param applied: whether the approval let anything through.
    :param approver: who approved, as the record names them (``name``, or
        ``name (id ...)`` when the id differs); ``None`` when not applied.
    :param approved_at: when they approved; ``None`` when not applied.
    :param reason: the reason they stated; empty when not applied.
    :param targets: the targets released.
    :param overridden: the model's refusals overridden: ``(task instance, decision)``.
    :param note: why nothing (or not everything named) was released; may be empty.
    """

    approval: str
    applied: bool
    approver: str | None = None
    approved_at: pendulum.DateTime | None = None
    reason: str = ""
    targets: tuple[str, ...] = ()
    overridden: tuple[tuple[str, str], ...] = ()
    note: str = ""

    @classmethod
    def of(cls, stored: object) -> OverrideEntry:
        """Read a record's ``override`` entry.

        :param stored: the entry as stored.
        :raises RecordError: naming the field and the value when it cannot be read,
            or when it claims an override without who, when, why and which targets.
        """
        if not isinstance(stored, Mapping):
            raise RecordError("override", stored, "must be an object")
        approval = _text(stored, "approval")
        applied = stored.get("applied")
        if not isinstance(applied, bool):
            raise RecordError("override.applied", applied, "must be true or false")
        note = stored.get("note") or ""
        if not isinstance(note, str):
            raise RecordError("override.note", note, "must be text")
        entry = cls(approval=approval, applied=applied, note=safe_text(note, limit=MAX_TEXT))
        if not applied:
            return entry
        return replace(
            entry,
            approver=_approver(stored.get("approvedBy")),
            approved_at=_instant(stored.get("approvedAt")),
            reason=_text(stored, "reason"),
            targets=_targets(stored.get("targets")),
            overridden=_overridden(stored.get("overridden")),
        )

    def refused_names(self) -> frozenset[str]:
        """The task instances whose refusal the approval overrode: ``load``, ``copy[3]``."""
        return frozenset(name for name, _ in self.overridden)


def _text(stored: Mapping[str, object], key: str) -> str:
    value = stored.get(key)
    if not isinstance(value, str) or not value.strip():
        raise RecordError(f"override.{key}", value, "must be a non-empty text")
    return safe_text(value.strip(), limit=MAX_TEXT)


def _approver(value: object) -> str:
    """``name``, with the id when it differs, as the gate's status update names them."""
    if not isinstance(value, Mapping):
        raise RecordError("override.approvedBy", value, "must be an object with id and name")
    user_id, name = value.get("id"), value.get("name")
    if not isinstance(user_id, str) or not user_id:
        raise RecordError("override.approvedBy.id", user_id, "must be the approver's id")
    if not isinstance(name, str) or not name:
        name = user_id
    shown = name if name == user_id else f"{name} (id {user_id})"
    return safe_text(shown, limit=200)


def _instant(value: object) -> pendulum.DateTime:
    try:
        # tz=None keeps a time without an offset naive, so it is refused below
        parsed = pendulum.parse(value, tz=None, strict=True) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, pendulum.DateTime) or parsed.tzinfo is None:
        raise RecordError("override.approvedAt", value, "must be an ISO 8601 time with an offset")
    return parsed.in_timezone("UTC")


def _targets(value: object) -> tuple[str, ...]:
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(item, str) and item for item in value)
    ):
        raise RecordError("override.targets", value, "must list the targets released")
    return tuple(safe_text(item, limit=250) for item in value)


def _overridden(value: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, list):
        raise RecordError("override.overridden", value, "must list the refusals overridden")
    found: list[tuple[str, str]] = []
    for item in value:
        task = item.get("task") if isinstance(item, Mapping) else None
        decision = item.get("decision") if isinstance(item, Mapping) else None
        if not isinstance(task, str) or not isinstance(decision, str):
            raise RecordError(
                "override.overridden", item, "must hold {task, decision} for each refusal"
            )
        found.append((safe_text(task, limit=250), safe_text(decision, limit=60)))
    return tuple(found)
