"""Building the model's fixture from real, timezone-aware facts.

Everything Airflow knows is turned into the model's integer seconds on one
:class:`~airflow_retrywindow.timing.clock.Clock`, with the conservative rounding the
clock documents, so the fixture can be replayed offline exactly. Three rules
keep rounding from ever loosening the decision the exact real times would give:

* ``asOf`` is never earlier than any fact (an API server's clock may run a
  little ahead of ours);
* an end of an attempt rounds up after adding the fraction of a second by which
  now rounds up, so a backoff never ends in the model before it really does;
* staleness is decided on the exact real times: a stale observation keeps its
  rounded-down time (the end may not be later), a fresh one moves up to an end
  rounded past it, which may make it look younger but never fresh when stale.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from airflow_retrywindow.model import TaskState
from airflow_retrywindow.model.bounds import MAX_TASK_ID_LENGTH, TASK_ID
from airflow_retrywindow.timing.clock import Clock, require_aware
from airflow_retrywindow.timing.retry_settings import RetrySettings
from airflow_retrywindow.timing.work import Work

#: hex digits of the hash that keeps an alias unique
_DIGEST = 8


def model_alias(name: str, key: str, suffix: str = "") -> str:
    """A readable id the model accepts, unique by a hash of ``key``.

    The model allows 1-48 letters, digits, ``_`` and ``-``; what Airflow names may
    hold more (dots of task groups, 250 characters, map indexes). The alias keeps
    what it can of ``name``, then ``suffix``, then ``-<hash of key>``.

    :param name: what the alias should read like, e.g. a task id.
    :param key: what makes it unique, e.g. the task id or ``load[3]``.
    :param suffix: kept whole before the hash, e.g. ``-3`` for a map index.
    """
    room = max(MAX_TASK_ID_LENGTH - len(suffix) - 1 - _DIGEST, 1)
    readable = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:room]
    digest = hashlib.sha1(key.encode(), usedforsecurity=False).hexdigest()[:_DIGEST]
    return f"{readable}{suffix}-{digest}"


def model_task_id(task_id: str) -> str:
    """The id the model sees for an Airflow task id.

    The task id itself when it fits the model's rules, otherwise a stable readable
    alias with a hash suffix (:func:`model_alias`); the evidence maps aliases back
    to task ids.
    """
    if TASK_ID.fullmatch(task_id):
        return task_id
    return model_alias(task_id, task_id)


@dataclass(frozen=True)
class TaskFacts:
    """One task as observed, in real time: the one type of an observed task.

    Every observation the model is given is one: the task the policy decides
    about (its failed try), a task instance the gate read through Airflow's REST
    API (:func:`~airflow_retrywindow.gate.observe.observe` turns the API's row into
    one) and a DAG author's explicit observation once parsed
    (:func:`~airflow_retrywindow.gate.observe.parse_observations`). Its state is
    always the model's :class:`~airflow_retrywindow.model.TaskState`; the model's
    own :class:`~airflow_retrywindow.model.Observation` is these facts in seconds
    on a fixture's clock (:meth:`model_task`).

    :param task_id: the Airflow task id (a model id once grouped into a fixture).
    :param state: the model state: running, unknown, succeeded, retryable, terminal.
    :param attempts: attempts started in the current window; ``None`` only for an
        explicit observation that leaves the count to Airflow's.
    :param observed_at: when these facts were observed.
    :param finished_at: when the last attempt ended; ``None`` when unconfirmed.
    :param work: the caller's estimate and idempotency claim; ``None`` only for an
        explicit observation as parsed, before the gate pairs it with its target.
    :param seen_in: where the facts were seen, in the observer's words (an explicit
        observation's ``source``); ``None`` when nobody said.
    """

    task_id: str
    state: TaskState
    attempts: int | None
    observed_at: datetime
    finished_at: datetime | None
    work: Work | None = None
    seen_in: str | None = None

    def __post_init__(self) -> None:
        # one word for a state: a state name given as text becomes the model's enum
        object.__setattr__(self, "state", TaskState(self.state))

    def instants(self) -> list[datetime]:
        """Every real instant these facts put on the clock."""
        return [self.observed_at] + ([self.finished_at] if self.finished_at else [])

    def model_task(
        self, clock: Clock, *, as_of: datetime, max_observation_age: int
    ) -> dict[str, Any]:
        """This task as one entry of the model's ``tasks`` list.

        :param clock: the clock of the fixture.
        :param as_of: the moment of the decision, no earlier than these facts.
        :param max_observation_age: the fixture's allowed age of an observation.
        """
        now = require_aware(as_of, "as_of")
        seen = require_aware(self.observed_at, "observed_at")
        observed = clock.down(seen)
        if not self.state.completion_confirmed or self.finished_at is None:
            return self._entry(observed, None)
        # now rounds up by `lag`; an end rounded up on now's grid keeps the model's
        # backoff from ending before the real one ("start > asOf" compares the two)
        lag = clock.at(clock.up(now)) - now
        finished = clock.up(self.finished_at + lag)
        if now - seen > timedelta(seconds=max_observation_age):
            # really stale: the observation keeps its rounded-down time, so the model
            # refreshes it (its first rule reads nothing else); the end may not follow it
            return self._entry(observed, min(finished, observed))
        # really fresh: the observation cannot predate what it observed, and may look
        # a little younger than it is without ever looking fresh when it is stale
        return self._entry(max(observed, finished), finished)

    def _entry(self, observed: int, finished: int | None) -> dict[str, Any]:
        attempts, work = self._decidable()
        return {
            "id": model_task_id(self.task_id),
            "state": self.state.value,
            "safeRepeat": work.safe_repeat,
            "attempts": attempts,
            "observedAt": observed,
            "lastFinishedAt": finished,
            "duration": work.duration_seconds(),
            "validation": work.validation_seconds(),
        }

    def _decidable(self) -> tuple[int, Work]:
        """The attempt count and the estimate, which the model needs and a parsed
        explicit observation may lack until it is paired with its target."""
        if self.attempts is None or self.work is None:
            missing = " and ".join(
                name
                for name, value in (("attempts", self.attempts), ("work", self.work))
                if value is None
            )
            raise ValueError(
                f"the observation of {self.task_id!r} has no {missing}: pair it with its "
                "target (gate.observe.observe_explicitly) before putting it in a fixture"
            )
        return self.attempts, self.work


@dataclass(frozen=True)
class ClockedFixture:
    """A model fixture with the clock that gives its numbers real meaning.

    :param clock: the clock the numbers are on.
    :param payload: the exact JSON object the model evaluates.
    :param task_ids: model id -> Airflow task id.
    """

    clock: Clock
    payload: dict[str, Any]
    task_ids: dict[str, str]

    @classmethod
    def build(
        cls,
        *,
        as_of: datetime,
        deadline: datetime,
        max_observation_age: int,
        settings: RetrySettings,
        tasks: Sequence[TaskFacts],
        origin: datetime | None = None,
    ) -> ClockedFixture:
        """Put the facts on one clock and assemble the model's payload.

        :param as_of: the moment of the decision (now); a fact reported later (an API
            server's clock slightly ahead) moves it to that fact.
        :param deadline: the delivery deadline.
        :param max_observation_age: the allowed age of an observation, whole seconds.
        :param settings: the retry settings shared by these tasks.
        :param tasks: 1 to 20 tasks sharing ``settings``.
        :param origin: the preferred clock origin, usually the data interval start.
        """
        instants = [require_aware(i, "instant") for facts in tasks for i in facts.instants()]
        # an API server's clock may run a little ahead of ours (within the gate's
        # tolerance); deciding later than that is cautious, an observation "from
        # the future" is not a valid fixture
        now = max(require_aware(as_of, "as_of"), *instants)
        clock = Clock.starting_at(origin or now, now, deadline, *instants)
        payload = {
            "asOf": clock.up(now),
            "deadline": clock.down(deadline),
            "maxObservationAge": max_observation_age,
            "policy": settings.model_policy(),
            "tasks": [
                facts.model_task(clock, as_of=now, max_observation_age=max_observation_age)
                for facts in tasks
            ],
        }
        ids = {model_task_id(facts.task_id): facts.task_id for facts in tasks}
        return cls(clock=clock, payload=payload, task_ids=ids)
