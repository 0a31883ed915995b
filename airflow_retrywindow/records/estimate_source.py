"""Estimate source: where the values a decision was taken on came from, in one line.

A gate's or sensor's decision record keeps, per decision, ``estimateSource``:
for each of ``duration``, ``validation``, ``safeRepeat`` and ``deadline`` the
source its value came from (see :mod:`~airflow_retrywindow.gate.targets`). The
view and the notifier say it the same way, grouped by source, for example::

    duration, validation, deadline from load's policy; safe repeat: gate override — INC-4211

Only what is stored is read; a source this version does not know is shown as
stored. Every text passes through :func:`~airflow_retrywindow.redaction.safe_text`.
Nothing here imports Airflow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from airflow_retrywindow.exceptions import RecordError
from airflow_retrywindow.records.estimate_words import (
    AGREED,
    GATE,
    OTHER_POLICIES,
    OVERRIDE,
    POLICY,
)
from airflow_retrywindow.redaction import safe_text

#: the record's field -> its name in words, in the order a line lists them
FIELD_WORDS = {
    "duration": "duration",
    "validation": "validation",
    "safeRepeat": "safe repeat",
    "deadline": "deadline",
}
#: the longest source text kept: an override's reason is already capped when stored
MAX_SOURCE_TEXT = 1_000


@dataclass(frozen=True)
class EstimateSource:
    """The sources of one decision's estimate, as stored.

    :param task_id: the target the decision is about.
    :param decided_by: the gate's or sensor's task id.
    :param sources: ``(record field, source)`` pairs, known fields first, in
        :data:`FIELD_WORDS` order.
    """

    task_id: str
    decided_by: str
    sources: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, stored: object, *, task_id: str, decided_by: str) -> EstimateSource:
        """Read a decision's ``estimateSource``.

        :param stored: the stored value: record field -> source text.
        :param task_id: the target the decision is about.
        :param decided_by: the gate's or sensor's task id.
        :raises RecordError: when it is not an object of texts.
        """
        if not isinstance(stored, Mapping) or not stored:
            raise RecordError("estimateSource", stored, "must be an object of field -> source")
        for name, source in stored.items():
            if not isinstance(name, str) or not isinstance(source, str) or not source.strip():
                raise RecordError(
                    f"estimateSource.{name}", source, "must be the source of the value, as text"
                )
        known = [name for name in FIELD_WORDS if name in stored]
        others = [name for name in stored if name not in FIELD_WORDS]
        return cls(
            task_id=task_id,
            decided_by=decided_by,
            sources=tuple(
                (safe_text(name, limit=60), safe_text(stored[name], limit=MAX_SOURCE_TEXT))
                for name in [*known, *others]
            ),
        )

    @property
    def overridden(self) -> bool:
        """Whether any value is a gate override (``Work.override``) of the target's policy."""
        return any(source.startswith(OVERRIDE) for _, source in self.sources)

    def line(self) -> str:
        """The sources in one line, grouped: ``duration, validation from load's policy; ...``."""
        groups: dict[str, list[str]] = {}
        for name, source in self.sources:
            groups.setdefault(source, []).append(FIELD_WORDS.get(name, name))
        return "; ".join(self._group(source, fields) for source, fields in groups.items())

    def _group(self, source: str, fields: list[str]) -> str:
        named = ", ".join(fields)
        if source.startswith(OVERRIDE):
            # the DAG author's reason, after the words the record prefixes it with
            return f"{named}: gate override — {source[len(OVERRIDE) :].strip()}"
        words = {
            POLICY: f"{self.task_id}'s policy",
            GATE: f"{self.decided_by}'s own arguments",
            AGREED: f"{self.decided_by} and {self.task_id}'s policy (the same)",
            OTHER_POLICIES: "the other targets' policies",
        }
        if source in words:
            return f"{named} from {words[source]}"
        return f"{named}: {source}"  # a source this version does not know, as stored
