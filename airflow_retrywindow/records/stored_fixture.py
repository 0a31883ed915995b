"""Stored fixture: a decision's ``{origin, fixture, result}``, read back and replayed.

The policy keeps these three in each evidence entry, and a gate or a sensor in
each item of its record's ``fixtures``: the fixture exactly as the model
evaluated it, the clock origin that turns its seconds back into real times, and
the result the model gave. Reading one replays the fixture, so the view and the
notifier can say whether the stored result still holds.

A replay depends only on the fixture and on this release's code, so replays are
kept in a bounded cache keyed by the fixture's canonical JSON: a page that shows
the same stored fixture again, or a thousand map indexes that stored the same
one, evaluates it once. Nothing here imports Airflow.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from airflow_retrywindow.exceptions import RecordError
from airflow_retrywindow.model.fixture import Fixture
from airflow_retrywindow.model.verdict import TaskDecision, Verdict
from airflow_retrywindow.timing.clock import Clock

#: distinct fixtures whose replay is kept: more than a page replays (at most 500
#: rows, or 20 decisions of one task instance); about 1.5 KB each for a policy's
#: one-task fixture, 15 KB for a gate's fixture of 20 tasks
REPLAY_CACHE_SIZE = 2_048


@dataclass(frozen=True)
class Replayed:
    """A fixture and the model's verdict on it, as this release decides it.

    :param fixture: the fixture, read.
    :param verdict: the model's verdict on it.
    :param result: the verdict as the model's result object (what a stored result is compared to).
    """

    fixture: Fixture
    verdict: Verdict
    result: Mapping[str, object]


def replayed(payload: Mapping[str, Any]) -> Replayed:
    """The model's verdict on a stored fixture, from the cache when it was replayed before.

    :param payload: the fixture object exactly as stored.
    :raises ValueError: when it is not a fixture the model reads (``InvalidFixture``).
    """
    try:
        canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):  # not plain JSON: replay it, but do not keep it
        return _replay(payload)
    return _cached(canonical)


def replay_count() -> int:
    """How many fixtures were evaluated rather than found in the cache, in this process."""
    return _cached.cache_info().misses


def clear_replays() -> None:
    """Forget every kept replay (a test's fresh start)."""
    _cached.cache_clear()


@lru_cache(maxsize=REPLAY_CACHE_SIZE)
def _cached(canonical: str) -> Replayed:
    return _replay(json.loads(canonical))


def _replay(payload: object) -> Replayed:
    fixture = Fixture.from_dict(payload)
    verdict = Verdict.of(fixture)
    return Replayed(fixture=fixture, verdict=verdict, result=verdict.to_dict())


@dataclass(frozen=True)
class StoredFixture:
    """A stored fixture, its stored result, its clock, and the model's answer on it again.

    :param payload: the fixture object exactly as stored.
    :param result: the result stored with it.
    :param clock: the fixture's clock (its stored origin).
    :param fixture: the fixture, read.
    :param verdict: the model's verdict on it today.
    :param replays: whether the verdict is the stored result.
    """

    payload: Mapping[str, Any]
    result: Mapping[str, Any]
    clock: Clock
    fixture: Fixture
    verdict: Verdict
    replays: bool

    @classmethod
    def of(cls, stored: object) -> StoredFixture:
        """Read ``{origin, fixture, result}`` and replay the fixture.

        :param stored: a policy evidence entry or one item of a record's ``fixtures``.
        :raises RecordError: naming the field and the value that cannot be read
            (a fixture the model refuses raises its own ``ValueError``).
        """
        if not isinstance(stored, Mapping):
            raise RecordError("fixture", stored, "must be an object with origin, fixture, result")
        payload, result = stored.get("fixture"), stored.get("result")
        if not isinstance(payload, Mapping):
            raise RecordError("fixture", payload, "must be the model's fixture object")
        if not isinstance(result, Mapping):
            raise RecordError("result", result, "must be the model's result object")
        origin = stored.get("origin")
        try:
            clock = Clock.from_iso(origin) if isinstance(origin, str) else None
        except ValueError:
            clock = None
        if clock is None:
            raise RecordError("origin", origin, "must be an ISO 8601 time with an offset")
        found = replayed(payload)
        return cls(
            payload=payload,
            result=result,
            clock=clock,
            fixture=found.fixture,
            verdict=found.verdict,
            replays=found.result == dict(result),
        )

    def task(self, model_id: object) -> TaskDecision:
        """The replayed decision of the fixture's task ``model_id``; ``None``: its only task.

        :raises RecordError: when ``model_id`` names no task of the fixture.
        """
        wanted = self.fixture.tasks[0].id if model_id is None else model_id
        if not isinstance(wanted, str):
            raise RecordError("modelId", wanted, "must name a task of the fixture")
        return self.verdict.task(wanted)

    def stored_decision(self, model_id: str) -> object:
        """The decision the stored result holds for ``model_id``, as stored.

        :raises RecordError: when the stored result holds none for it.
        """
        return stored_decision(self.result, model_id)


def record_item(
    *,
    origin: str,
    fixture: Mapping[str, Any],
    result: Mapping[str, Any],
    task_ids: Mapping[str, str],
    map_indexes: Mapping[str, int],
) -> dict[str, Any]:
    """One item of a gate's or a sensor's record's ``fixtures``, as stored
    (:meth:`StoredFixture.of` reads it back).

    :param origin: the fixture's clock origin, ISO 8601.
    :param fixture: the fixture exactly as the model evaluated it.
    :param result: the model's result on it.
    :param task_ids: each of its model ids -> the task id it stands for.
    :param map_indexes: each of its model ids -> the map index it stands for.
    """
    return {
        "origin": origin,
        "fixture": dict(fixture),
        "result": dict(result),
        "taskIds": dict(task_ids),
        "mapIndexes": dict(map_indexes),
    }


def stored_decision(result: object, model_id: str) -> object:
    """The decision a stored result holds for the fixture's task ``model_id``, as stored.

    :raises RecordError: when the result holds none for it.
    """
    tasks = result.get("tasks") if isinstance(result, Mapping) else None
    for item in tasks if isinstance(tasks, list) else []:
        if isinstance(item, Mapping) and item.get("id") == model_id:
            return item.get("decision", "unreadable")
    raise RecordError("result.tasks", tasks, f"holds no decision for {model_id!r}")
