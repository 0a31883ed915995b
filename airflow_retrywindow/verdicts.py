"""Verdicts: every answer a retry can get, and what each part of the provider makes of it.

A verdict is one of the model's decisions (:class:`~airflow_retrywindow.model.decisions.Decision`)
or an answer the provider gives beside the model (:data:`DEPENDENCY_HELD`). This table is the
one place that says, for each verdict:

* the words of its reason, after the verdict's name a reason leads with (``timing.reasons``);
* its four-part status update, as people read it (``timing.status``);
* how strict it is, to keep the stricter of two answers (``timing.skew``);
* whether a person's approval may override it, and if not why it stands (``gate.approve``);
* what happens to the next try, as a notification says it (``notifications.notice``);
* its role in the view: waiting, refused or runs (``plugins.page``), and whether it is
  counted as a refusal (``metrics``).

A new verdict is one new :class:`VerdictEntry` here: every consumer reads this table, and
``tests/package/test_verdicts.py`` fails when one of them does not cover a verdict.

The words are :meth:`str.format` templates: each consumer fills in the fields a verdict's
words name (:class:`Fields`), so a field a template names and nobody supplies fails loudly.

Pure: nothing here imports Airflow; the model is imported, never changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from string import Formatter
from types import MappingProxyType

from airflow_retrywindow.model.decisions import Decision

#: a repeat held because its pool's breaker is open: not a model decision
DEPENDENCY_HELD = "dependency-held"

#: how strict a verdict is; the lower, the stricter: a refusal, a hold on a failing
#: dependency, a wait for a backoff, a start now
REFUSES, HOLDS, WAITS, ALLOWS_NOW = 0, 1, 2, 3
#: the ranks of verdicts that hold a start until a known time: of two, the later end is stricter
WAITING_RANKS = frozenset({HOLDS, WAITS})


class Role(str, Enum):
    """What the view makes of a verdict."""

    #: held for now; it may run later without anyone acting
    WAITING = "waiting"
    #: it does not run until someone acts
    REFUSED = "refused"
    #: it runs now
    RUNS = "runs"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class StatusWords:
    """The four parts of a status update, as templates.

    :param confirmed: what is confirmed.
    :param unknown: what is still unknown.
    :param action: the next action.
    :param evidence: the next evidence and when it is due.
    """

    confirmed: str
    unknown: str
    action: str
    evidence: str

    def parts(self) -> tuple[str, str, str, str]:
        """The four templates, in the order a status update says them."""
        return (self.confirmed, self.unknown, self.action, self.evidence)


@dataclass(frozen=True)
class VerdictEntry:
    """What the provider makes of one verdict.

    :param name: the verdict as stored and shown, e.g. ``"wait-backoff"``.
    :param reason: the reason's words after the verdict's name it leads with (a template).
    :param status: its status update (templates).
    :param rank: how strict it is: :data:`REFUSES`, :data:`HOLDS`, :data:`WAITS` or
        :data:`ALLOWS_NOW`.
    :param overridable: whether a person's approval may override it.
    :param stands: why an approval does not release it; empty when it is overridable
        or it runs, so there is nothing to release.
    :param role: its role in the view.
    :param next_try: what happens to the next try, as a notification says it of an
        allowed retry; empty for a refusal, after which no try follows.
    """

    name: str
    reason: str
    status: StatusWords
    rank: int
    overridable: bool
    stands: str
    role: Role
    next_try: str

    @property
    def refuses(self) -> bool:
        """Whether no attempt may start after it (counted as a refusal)."""
        return self.rank == REFUSES

    @property
    def waits(self) -> bool:
        """Whether it holds a start until a known time (a hold or a backoff)."""
        return self.rank in WAITING_RANKS

    def fields(self) -> frozenset[str]:
        """Every field its reason and status templates name."""
        return frozenset(
            name
            for template in (self.reason, *self.status.parts())
            for _, name, _, _ in Formatter().parse(template)
            if name
        )


#: what a model decision's status says is confirmed, for most decisions
_STATE = "{state}"
#: the end of a scheduled attempt, as the status of a wait or a start says it
_OUTLOOK = "estimated finish {finish} with validation, {slack} s before the deadline {deadline}"
_IN_TIME = "and finish with validation by {finish}, {slack} s before the {deadline} deadline"


def _entry(
    decision: Decision | str,
    reason: str,
    status: StatusWords,
    *,
    rank: int,
    role: Role,
    overridable: bool = False,
    stands: str = "",
    next_try: str = "",
) -> VerdictEntry:
    name = decision.value if isinstance(decision, Decision) else decision
    return VerdictEntry(name, reason, status, rank, overridable, stands, role, next_try)


_ENTRIES = (
    _entry(
        Decision.REFRESH_OBSERVATION,
        "the last observation ({observed}) is older than the allowed {max_age} s at {as_of}; "
        "observe again",
        StatusWords(
            "nothing current (the last observation, {observed_state} at {observed_at}, is "
            "{age} s old; the limit is {max_age} s)",
            "the task's current state",
            "observe the task again at its state source before deciding anything",
            "a fresh observation, due now ({now})",
        ),
        rank=REFUSES,
        role=Role.REFUSED,
        stands="the observation is too old to decide on; refresh it and run the gate again",
    ),
    _entry(
        Decision.OBSERVE_RUNNING,
        "attempt {attempts} is still running (seen {observed}); observe it",
        StatusWords(
            _STATE,
            "whether {attempt} succeeds",
            "keep observing it; start no other attempt while it runs",
            "the next observation, due by {observe_due}",
        ),
        rank=REFUSES,
        role=Role.WAITING,
        stands="a try is running now, and a repeat would run beside it",
    ),
    _entry(
        Decision.RECONCILE_REMOTE,
        "the outcome of attempt {attempts} of {limit} is unknown; look the remote job up "
        "by its client job id before any retry",
        StatusWords(
            _STATE,
            "whether the request reached the service, whether the job finished "
            "and whether its result is correct",
            "look the remote job up by its client-chosen job id; do not resubmit "
            "until its outcome is known",
            "the remote job's status, due now ({now})",
        ),
        rank=REFUSES,
        role=Role.REFUSED,
        stands="the outcome of the last try is unknown; reconcile it and give the gate an "
        "observation, since an approval does not say what happened",
    ),
    _entry(
        Decision.VALIDATE_OUTPUT,
        "attempt {attempts} succeeded (seen {observed}); validate its output before "
        "calling the delivery done",
        StatusWords(
            _STATE,
            "whether the output is correct and complete",
            "validate the output against the acceptance criteria ({validation} s)",
            "the validation result, due by {validation_due}",
        ),
        rank=REFUSES,
        role=Role.REFUSED,
        overridable=True,
    ),
    _entry(
        Decision.REPAIR_CAUSE,
        "attempt {attempts} failed terminally; repair the cause, then clear",
        StatusWords(
            _STATE,
            "the cause of the failure",
            "repair the cause; another attempt would fail the same way",
            "the repair owner's diagnosis, {before_deadline}",
        ),
        rank=REFUSES,
        role=Role.REFUSED,
        overridable=True,
    ),
    _entry(
        Decision.ATTEMPTS_EXHAUSTED,
        "attempt {attempts} of {limit} failed and no attempt is left in this window",
        StatusWords(
            _STATE,
            "how to deliver without another attempt",
            "escalate, as all {max_attempts} attempts of the budget are used",
            "the escalation owner's decision, {before_deadline}",
        ),
        rank=REFUSES,
        role=Role.REFUSED,
        overridable=True,
    ),
    _entry(
        Decision.RECONCILE_EFFECTS,
        "attempt {attempts} of {limit} failed and the task is not claimed safe to repeat; "
        "reconcile what it wrote before repeating it",
        StatusWords(
            _STATE,
            "what the earlier attempts already wrote; repeating may duplicate it",
            "reconcile those effects before repeating, as the task is not claimed safe to repeat",
            "the reconciliation result, due now ({now})",
        ),
        rank=REFUSES,
        role=Role.REFUSED,
        overridable=True,
    ),
    _entry(
        Decision.DEADLINE_INFEASIBLE,
        "next attempt would start {start} and finish with validation at {finish}, after the "
        "{deadline} deadline ({nth}); report the impact instead of retrying",
        StatusWords(
            _STATE,
            "nothing that would change the forecast",
            "report the delivery at risk (impact, affected population, operational "
            "alternative) instead of retrying: {following} would end {finish}, {late} s after "
            "the deadline {deadline}",
            "the decision on the alternative, {before_deadline}",
        ),
        rank=REFUSES,
        role=Role.REFUSED,
        overridable=True,
    ),
    _entry(
        DEPENDENCY_HELD,
        "pool {pool}'s breaker is {breaker}; held until {hold_until}, when it is decided again",
        StatusWords(
            _STATE,
            "when pool {pool} recovers; {following} would fail the same way while it is failing",
            "hold {following} until {hold_until} at the latest; it starts once the pool "
            "recovers, or is refused when it can no longer finish by the deadline {deadline}",
            "the pool's state at {hold_until}",
        ),
        rank=HOLDS,
        role=Role.WAITING,
        next_try="the try starts again when its pool recovers (or at the hold's end), and it "
        "is decided again then",
        stands="its pool, a shared dependency, is failing; an approval does not bring it "
        "back, so the retry waits for the pool to recover",
    ),
    _entry(
        Decision.WAIT_BACKOFF,
        "{nth} may start at {start} after a {backoff} s backoff " + _IN_TIME,
        StatusWords(
            _STATE,
            "whether {following} succeeds",
            "wait out the {backoff} s backoff, then start {following} at {start}; " + _OUTLOOK,
            "the start of {following}, at {start}",
        ),
        rank=WAITS,
        role=Role.WAITING,
        next_try="Airflow starts the next try once the backoff has passed",
        stands="a backoff is a wait, not a refusal; wait for it to end",
    ),
    _entry(
        Decision.RETRY_ELIGIBLE,
        "{nth} may start now ({start}) " + _IN_TIME,
        StatusWords(
            _STATE,
            "whether {following} succeeds",
            "start {following} now; " + _OUTLOOK,
            "the result of {following} with its validation, by {finish}",
        ),
        rank=ALLOWS_NOW,
        role=Role.RUNS,
        next_try="Airflow starts the next try now",
    ),
)

#: every verdict by its name, the strictest first (the model's refusals in their precedence order)
VERDICTS: Mapping[str, VerdictEntry] = MappingProxyType({entry.name: entry for entry in _ENTRIES})


def verdict(name: object) -> VerdictEntry | None:
    """The table's entry for a verdict's name, ``None`` for anything else.

    :param name: a verdict's name or a :class:`Decision`, e.g. ``"wait-backoff"``.
    """
    if isinstance(name, Decision):
        return VERDICTS[name.value]
    return VERDICTS.get(name) if isinstance(name, str) else None


def entry_of(name: object) -> VerdictEntry:
    """The table's entry for a verdict, or a ``KeyError`` naming the verdicts there are.

    :param name: a verdict's name or a :class:`Decision`.
    """
    found = verdict(name)
    if found is None:
        raise KeyError(
            f"{name!r} is not a verdict; the verdicts are {', '.join(VERDICTS)}: add it to "
            "airflow_retrywindow/verdicts.py"
        )
    return found


def overridable() -> frozenset[str]:
    """The names of the verdicts a person's approval may override."""
    return frozenset(name for name, entry in VERDICTS.items() if entry.overridable)


def standing() -> dict[str, str]:
    """The verdicts that hold a task back whatever a person answers, and why each stands."""
    return {name: entry.stands for name, entry in VERDICTS.items() if entry.stands}


def refusing() -> frozenset[str]:
    """The names of the verdicts after which no attempt may start."""
    return frozenset(name for name, entry in VERDICTS.items() if entry.refuses)


class Fields:
    """The values a verdict's words name, each worked out only when its template names it.

    A field may need what only some verdicts have (a start time): working it out
    lazily lets one set of fields serve every verdict, and a field nobody supplies
    raises a ``KeyError`` naming it.

    :param makers: field name -> how to work its value out.
    """

    def __init__(self, **makers: Callable[[], object]) -> None:
        self._makers = makers
        self._values: dict[str, object] = {}

    def __getitem__(self, name: str) -> object:
        if name not in self._values:
            if name not in self._makers:
                raise KeyError(f"no value for the field {name!r} of a verdict's words")
            self._values[name] = self._makers[name]()
        return self._values[name]

    def names(self) -> frozenset[str]:
        """Every field these values can fill."""
        return frozenset(self._makers)


def worded(template: str, fields: Fields | Mapping[str, object]) -> str:
    """One template of the table with its fields filled in.

    :param template: a reason or status template of a :class:`VerdictEntry`.
    :param fields: the values it names.
    """
    return template.format_map(fields)
