"""Rounding real instants onto the model's whole seconds never loosens a decision.

The gate and the retry policy see sub-second instants; the model sees whole
seconds. Each test compares the decision on the rounded fixture with the
decision the model's rules give on the exact real times, and requires the
rounded one to be no more permissive: ``retry-eligible`` is the most permissive
answer, then ``wait-backoff`` (whose earliest start may not come earlier than
the exact one), and every other decision refuses.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import pendulum
from hypothesis import example, given, settings
from hypothesis import strategies as st

from airflow_retrywindow.gate.decide import decide
from airflow_retrywindow.gate.observe import observe
from airflow_retrywindow.gate.targets import Target
from airflow_retrywindow.hooks.api_reader import PoolRow, TaskInstanceRow
from airflow_retrywindow.model import evaluate
from airflow_retrywindow.timing.fixtures import ClockedFixture, TaskFacts
from airflow_retrywindow.timing.retry_settings import RetrySettings
from airflow_retrywindow.timing.work import Work

ORIGIN = pendulum.datetime(2026, 3, 2, 4, 0, tz="UTC")  # the data interval start
STATES = ("running", "unknown", "succeeded", "retryable", "terminal")
#: how permissive a decision is; every decision not listed refuses (0)
PERMISSIVENESS = {"retry-eligible": 2, "wait-backoff": 1}


@dataclass(frozen=True)
class Case:
    """One task's facts in real time, and everything the decision depends on."""

    now: datetime
    deadline: datetime
    max_observation_age: int
    settings: RetrySettings
    facts: TaskFacts


def exact_decision(case: Case) -> tuple[str, datetime | None]:
    """The model's rules (docs/decision-model.md) applied to the exact real times.

    :return: the decision, and the earliest start for ``wait-backoff``.
    """
    facts, policy = case.facts, case.settings
    if case.now - facts.observed_at > timedelta(seconds=case.max_observation_age):
        return "refresh-observation", None
    simple = {
        "running": "observe-running",
        "unknown": "reconcile-remote",
        "succeeded": "validate-output",
        "terminal": "repair-cause",
    }
    if facts.state in simple:
        return simple[facts.state], None
    if facts.attempts >= policy.max_attempts:
        return "attempts-exhausted", None
    if not facts.work.safe_repeat:
        return "reconcile-effects", None
    assert facts.finished_at is not None
    backoff = min(
        policy.max_delay, policy.initial_delay * policy.multiplier ** (facts.attempts - 1)
    )
    start = max(case.now, facts.finished_at + timedelta(seconds=backoff))
    if start + facts.work.duration + facts.work.validation > case.deadline:
        return "deadline-infeasible", None
    if start > case.now:
        return "wait-backoff", start
    return "retry-eligible", None


def rounded_decision(case: Case) -> tuple[str, datetime | None]:
    """The model's decision on the fixture the gate builds from the same facts."""
    fixture = ClockedFixture.build(
        as_of=case.now,
        deadline=case.deadline,
        max_observation_age=case.max_observation_age,
        settings=case.settings,
        tasks=[case.facts],
        origin=ORIGIN,
    )
    entry = evaluate(fixture.payload)["tasks"][0]
    start = entry["earliestStart"]
    decision = str(entry["decision"])
    return decision, fixture.clock.at(start) if decision == "wait-backoff" else None


def assert_no_looser(case: Case) -> None:
    exact, exact_start = exact_decision(case)
    rounded, rounded_start = rounded_decision(case)
    assert PERMISSIVENESS.get(rounded, 0) <= PERMISSIVENESS.get(exact, 0), (exact, rounded)
    if exact == rounded == "wait-backoff":
        assert rounded_start is not None and exact_start is not None
        assert rounded_start >= exact_start, (exact_start, rounded_start)


def _settings(
    *, retries: int = 2, initial: int = 5, multiplier: int = 1, cap: int = 5
) -> RetrySettings:
    return RetrySettings("load", retries, initial, multiplier, max(cap, initial))


def _case(
    *,
    now: float,
    observed: float,
    finished: float | None,
    state: str = "retryable",
    attempts: int = 1,
    age: int = 60,
    settings: RetrySettings | None = None,
) -> Case:
    """A retryable load with a quick estimate; times are seconds after ``ORIGIN``."""
    work = Work(duration=timedelta(seconds=30), validation=timedelta(seconds=5), safe_repeat=True)

    def at(seconds: float) -> datetime:
        return ORIGIN + timedelta(microseconds=round(seconds * 1_000_000))

    facts = TaskFacts(
        task_id="load",
        state=state,
        attempts=attempts,
        observed_at=at(observed),
        finished_at=None if finished is None else at(finished),
        work=work,
    )
    return Case(at(now), at(now + 3600), age, settings or _settings(), facts)


# -- the concrete cases ----------------------------------------------------------------


def test_an_observation_60_5_s_old_is_stale_under_a_60_s_limit() -> None:
    # the attempt ended and was observed at 10.5 s; the end rounds up to 11, and an
    # observation moved up to it would look 60 s old at 71 s, inside the limit
    case = _case(now=71, observed=10.5, finished=10.5)
    assert exact_decision(case) == ("refresh-observation", None)
    assert rounded_decision(case) == ("refresh-observation", None)


def test_a_stale_observation_keeps_a_valid_fixture() -> None:
    case = _case(now=71, observed=10.5, finished=10.2)
    fixture = ClockedFixture.build(
        as_of=case.now, deadline=case.deadline, max_observation_age=60,
        settings=case.settings, tasks=[case.facts], origin=ORIGIN,
    )  # fmt: skip
    task = fixture.payload["tasks"][0]
    assert task["lastFinishedAt"] <= task["observedAt"] <= fixture.payload["asOf"]
    assert fixture.payload["asOf"] - task["observedAt"] > 60


def test_a_backoff_never_ends_before_its_real_end() -> None:
    # the 10 s backoff after the end at 90.0 s ends at 100.0 s; at 99.5 s the retry must
    # wait, although now rounds up to 100
    case = _case(now=99.5, observed=90, finished=90, settings=_settings(initial=10, cap=10))
    assert exact_decision(case) == ("wait-backoff", ORIGIN.add(seconds=100))
    decision, start = rounded_decision(case)
    assert decision == "wait-backoff"
    assert start is not None and start >= ORIGIN.add(seconds=100)


def test_the_retry_policys_own_failure_costs_no_extra_second() -> None:
    # the policy observes at the moment of failure: end, observation and now coincide
    case = _case(now=50.25, observed=50.25, finished=50.25)
    fixture = ClockedFixture.build(
        as_of=case.now, deadline=case.deadline, max_observation_age=60,
        settings=case.settings, tasks=[case.facts], origin=ORIGIN,
    )  # fmt: skip
    task = fixture.payload["tasks"][0]
    assert (fixture.payload["asOf"], task["observedAt"], task["lastFinishedAt"]) == (51, 51, 51)
    assert rounded_decision(case) == ("wait-backoff", ORIGIN.add(seconds=56))


def test_an_api_clock_a_little_ahead_still_gives_a_valid_fixture() -> None:
    # the API server's clock runs 3 s ahead of the worker's, within the 5 s tolerance:
    # the try "ended" after the worker read it, and after the worker's now
    read_at = ORIGIN.add(seconds=100)
    row = TaskInstanceRow(
        task_id="load", map_index=-1, state="failed", try_number=1, max_tries=2,
        start_date=read_at.subtract(seconds=30), end_date=read_at.add(seconds=3),
        pool="default_pool", pool_slots=1, observed_at=read_at,
    )  # fmt: skip
    work = Work(duration=timedelta(seconds=30), validation=timedelta(seconds=5), safe_repeat=True)
    target = Target("load", work, _settings(), False, "default_pool", 1)
    view = observe(target, row, failure=None, failure_source="")
    table = decide(
        [view], as_of=read_at.add(microseconds=500), deadline=read_at.add(hours=1),
        max_observation_age=60, origin=ORIGIN,
        pools={"default_pool": PoolRow("default_pool", 128, 0, 0, 128, False)},
    )  # fmt: skip
    payload = table.fixtures[0]["fixture"]
    task = payload["tasks"][0]
    assert task["lastFinishedAt"] <= task["observedAt"] <= payload["asOf"]
    # the backoff counts from the reported end, so the retry waits
    assert table.decision("load").decision == "wait-backoff"


# -- every sub-second arrangement ----------------------------------------------------

_MICRO = 1_000_000


def _micros(low_seconds: float, high_seconds: float) -> st.SearchStrategy[int]:
    """Microsecond counts, favouring whole and half seconds and their neighbours."""
    low, high = round(low_seconds * _MICRO), round(high_seconds * _MICRO)
    edges = st.integers(int(low_seconds), int(high_seconds)).flatmap(
        lambda s: st.sampled_from([s * _MICRO + d for d in (-1, 0, 1, _MICRO // 2)])
    )
    return st.one_of(st.integers(low, high), edges).filter(lambda m: low <= m <= high)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    retries = draw(st.integers(0, 9))
    initial = draw(st.integers(1, 30))
    multiplier = draw(st.integers(1, 5))
    cap = draw(st.integers(initial, initial + 60)) if multiplier > 1 else initial
    settings_ = RetrySettings("load", retries, initial, multiplier, cap)
    attempts = draw(st.integers(1, retries + 1))
    backoff = min(cap, initial * multiplier ** (attempts - 1))
    age = draw(st.integers(0, 90))
    now = draw(_micros(200, 260))
    # often just past the age limit, where rounding decides
    observed = now - draw(st.one_of(_micros(0, age + 2), _micros(age, age + 1)))
    state = draw(st.sampled_from(STATES))
    finished = None
    if state not in ("running", "unknown"):
        finished = min(
            observed,
            draw(
                st.one_of(
                    _micros(observed / _MICRO - 1.5, observed / _MICRO),
                    _micros(observed / _MICRO - 120, observed / _MICRO),
                    # the backoff ends within a second of now, where rounding decides
                    _micros(now / _MICRO - backoff - 1, now / _MICRO - backoff + 1),
                )
            ),
        )
    work = Work(
        duration=timedelta(microseconds=draw(_micros(0.000001, 90))),
        validation=timedelta(microseconds=draw(_micros(0, 30))),
        safe_repeat=draw(st.booleans()),
    )
    facts = TaskFacts(
        task_id="load",
        state=state,
        attempts=attempts,
        observed_at=ORIGIN + timedelta(microseconds=observed),
        finished_at=None if finished is None else ORIGIN + timedelta(microseconds=finished),
        work=work,
    )
    deadline = ORIGIN + timedelta(microseconds=now + draw(_micros(-5, 400)))
    return Case(ORIGIN + timedelta(microseconds=now), deadline, age, settings_, facts)


@settings(max_examples=600, deadline=None)
@given(cases())
@example(_case(now=71, observed=10.5, finished=10.5))
@example(_case(now=99.5, observed=90, finished=90, settings=_settings(initial=10, cap=10)))
def test_rounding_never_gives_a_more_permissive_decision(case: Case) -> None:
    assert_no_looser(case)
