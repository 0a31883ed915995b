"""Override entry: a gate record's ``override``, written and read here.

A gate given an approval task (``approval=``) stores beside the model's
decisions what the approval let through: who approved, when, the stated reason,
the targets released and the refusals overridden, or why nothing
(``docs/approved-override.md``). :class:`OverrideEntry` writes that entry
(:meth:`~OverrideEntry.as_dict`, from what the gate's approval found,
:class:`airflow_retrywindow.gate.approve.Override`) and reads it back for the view
and the notifier (:meth:`~OverrideEntry.of`), refusing one that claims an override
without saying who approved it and when: an override is never shown on a guess.

Every text passes through :func:`~airflow_retrywindow.redaction.safe_text`.
Nothing here imports Airflow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import pendulum

from airflow_retrywindow.exceptions import RecordError
from airflow_retrywindow.labels import UTC_ISO
from airflow_retrywindow.redaction import safe_text

#: the longest reason or note kept; the gate caps the reason at 500 characters
MAX_TEXT = 2_000
#: the words for an override, wherever one is shown
OVERRIDDEN_BY = "refused by the model, overridden by {user}"


@dataclass(frozen=True)
class Approver:
    """The person who answered an approval task, as Airflow's auth manager named them.

    :param id: the user's id.
    :param name: the user's name.
    """

    id: str
    name: str

    @property
    def shown(self) -> str:
        """``name``, with the id when it differs."""
        return self.name if self.name == self.id else f"{self.name} (id {self.id})"


@dataclass(frozen=True)
class OverrideEntry:
    """What the gate's approval task let through on one evaluation, as stored.

    :param approval: the approval task's id.
    :param applied: whether the approval let anything through.
    :param approved_by: who approved; ``None`` when not applied.
    :param approved_at: when they approved; ``None`` when not applied.
    :param reason: the reason they stated; empty when not applied.
    :param targets: the targets released.
    :param overridden: the model's refusals overridden: ``(task instance, decision)``.
    :param note: why nothing (or not everything named) was released; may be empty.
    :param answer: the approval's answer as the gate read it (no form values but the
        reason and the targets); ``None`` when none was read.
    """

    approval: str
    applied: bool
    approved_by: Approver | None = None
    approved_at: pendulum.DateTime | None = None
    reason: str = ""
    targets: tuple[str, ...] = ()
    overridden: tuple[tuple[str, str], ...] = ()
    note: str = ""
    answer: Mapping[str, Any] | None = None

    @property
    def approver(self) -> str | None:
        """Who approved, as shown: ``name``, or ``name (id ...)`` when the id differs."""
        return self.approved_by.shown if self.applied and self.approved_by else None

    @property
    def wording(self) -> str:
        """``refused by the model, overridden by <user>``; empty when not applied."""
        return OVERRIDDEN_BY.format(user=self.approver) if self.approver else ""

    def as_dict(self) -> dict[str, Any]:
        """The entry exactly as stored in the gate's record, JSON-ready."""
        approver = self.approved_by if self.applied else None
        return {
            "approval": self.approval,
            "applied": self.applied,
            "approvedBy": None if approver is None else {"id": approver.id, "name": approver.name},
            "approvedAt": stored_time(self.approved_at) if self.applied else None,
            "reason": self.reason if self.applied else None,
            "targets": list(self.targets),
            "overridden": [
                {"task": name, "decision": decision} for name, decision in self.overridden
            ],
            "status": self.wording or f"no override: {self.note}",
            "note": self.note,
            "answer": dict(self.answer) if self.answer is not None else None,
        }

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
        answer = stored.get("answer")
        entry = cls(
            approval=approval,
            applied=applied,
            note=safe_text(note, limit=MAX_TEXT),
            answer=answer if isinstance(answer, Mapping) else None,
        )
        if not applied:
            return entry
        return replace(
            entry,
            approved_by=_approver(stored.get("approvedBy")),
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


def _approver(value: object) -> Approver:
    if not isinstance(value, Mapping):
        raise RecordError("override.approvedBy", value, "must be an object with id and name")
    user_id, name = value.get("id"), value.get("name")
    if not isinstance(user_id, str) or not user_id:
        raise RecordError("override.approvedBy.id", user_id, "must be the approver's id")
    if not isinstance(name, str) or not name:
        name = user_id
    return Approver(safe_text(user_id, limit=200), safe_text(name, limit=200))


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


def stored_time(moment: pendulum.DateTime | None) -> str | None:
    """A time of the entry (its approval's and its answer's) as stored: ISO 8601 UTC."""
    return None if moment is None else moment.in_timezone("UTC").format(UTC_ISO)
