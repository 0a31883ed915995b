"""Bounded jitter: waits only lengthen, stay within their bounds, and replay exactly.

The model has no jitter; the jittered wait reaches it as the fixture's policy.
These tests hold the bounds and the determinism on generated waits, settings and
tries, and run the real policy in-process for the decision Airflow gets. The
same on a real scheduler is in ``test_deadline_alert_on_scheduler.py``.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from datetime import timedelta
from fractions import Fraction
from typing import Any

import pendulum
import pytest
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_retrywindow import Deadline, OutcomeUnknown, RetryWindowPolicy
from airflow_retrywindow.exceptions import UnsupportedRetrySettings
from airflow_retrywindow.model.bounds import DURATION_LIMIT, MAX_ATTEMPTS, MAX_MULTIPLIER
from airflow_retrywindow.model.validation import check_policy
from airflow_retrywindow.timing.jitter import Jitter, TryKey
from airflow_retrywindow.timing.retry_settings import RetrySettings

SETTINGS = settings(max_examples=300, deadline=None)
START = pendulum.datetime(2026, 12, 1, tz="UTC")

ids = st.text(min_size=1, max_size=30)
keys = st.builds(
    TryKey,
    dag_id=ids,
    task_id=ids,
    run_id=ids,
    map_index=st.integers(-1, 10_000),
    try_number=st.integers(1, 100),
)
fractions = st.floats(0, 1, allow_nan=False)


@st.composite
def retry_settings(draw: st.DrawFn) -> RetrySettings:
    """Airflow retry settings the model can express, exponential or constant."""
    multiplier = draw(st.integers(0, MAX_MULTIPLIER))
    initial = draw(st.integers(1, 100_000))
    cap = draw(st.one_of(st.none(), st.integers(initial, DURATION_LIMIT)))
    return RetrySettings.of(
        task_id="load",
        retries=draw(st.integers(1, MAX_ATTEMPTS - 1)),
        retry_delay=timedelta(seconds=initial),
        retry_exponential_backoff=multiplier,
        max_retry_delay=None if cap is None else timedelta(seconds=cap),
        delay_cap=draw(st.integers(initial, 2 * DURATION_LIMIT)),
    )


# -- bounds and determinism ------------------------------------------------------------


@SETTINGS
@given(st.integers(1, DURATION_LIMIT), fractions, keys, st.integers(0, DURATION_LIMIT))
def test_a_wait_only_lengthens_and_by_at_most_its_fraction(
    wait: int, fraction: float, key: TryKey, headroom: int
) -> None:
    longest = wait + headroom
    stretched = Jitter(fraction).stretch(wait, longest=longest, key=key)
    assert wait <= stretched <= longest
    assert stretched - wait <= Fraction(repr(fraction)) * wait
    assert stretched == Jitter(fraction).stretch(wait, longest=longest, key=key)


@SETTINGS
@given(st.integers(1, DURATION_LIMIT), fractions, keys)
def test_a_wait_at_its_longest_is_never_shortened(wait: int, fraction: float, key: TryKey) -> None:
    assert Jitter(fraction).stretch(wait, longest=wait, key=key) == wait


@SETTINGS
@given(retry_settings(), fractions, keys, st.data())
def test_the_fixture_policy_gives_the_model_exactly_the_jittered_wait(
    settings_: RetrySettings, fraction: float, key: TryKey, data: st.DataObject
) -> None:
    attempts = data.draw(st.integers(1, settings_.max_attempts))
    jittered, drawn = Jitter(fraction).apply(settings_, attempts, key)
    assert drawn.wait == settings_.backoff(attempts)
    assert drawn.wait <= drawn.delay <= settings_.longest_wait
    assert drawn.delay - drawn.wait <= math.floor(Fraction(repr(fraction)) * drawn.wait)
    policy = jittered.model_policy()
    check_policy(
        policy["maxAttempts"], policy["initialDelay"], policy["maxDelay"], policy["multiplier"]
    )
    assert jittered.backoff(attempts) == drawn.delay
    assert (policy["maxAttempts"], policy["multiplier"]) == (
        settings_.max_attempts,
        settings_.multiplier,
    )


def test_the_draw_is_a_stable_hash_of_the_try() -> None:
    # fixed numbers: a change of hash, encoding or order would change every replay
    key = TryKey("positions", "load", "scheduled__2026-12-01T00:00:00+00:00", 3, 2)
    # the first 8 bytes of SHA-256 of '["positions", "load", "scheduled__...", 3, 2]'
    assert key.draw() == 0x8CF0AFBC480AB435


def test_every_part_of_the_try_changes_the_draw() -> None:
    key = TryKey("positions", "load", "r1", 3, 2)
    others = [
        TryKey("positionz", "load", "r1", 3, 2),
        TryKey("positions", "loaf", "r1", 3, 2),
        TryKey("positions", "load", "r2", 3, 2),
        TryKey("positions", "load", "r1", 4, 2),
        TryKey("positions", "load", "r1", 3, 3),
        # no separator trick: ("ab", "c") is not ("a", "bc")
        TryKey("position", "sload", "r1", 3, 2),
    ]
    assert len({key.draw(), *(other.draw() for other in others)}) == len(others) + 1


def test_a_mapped_load_is_spread_out() -> None:
    jitter = Jitter(0.5)
    delays = [
        jitter.stretch(60, longest=3600, key=TryKey("positions", "load", "r1", index, 1))
        for index in range(50)
    ]
    assert all(60 <= delay <= 90 for delay in delays)
    assert len(set(delays)) >= 15


def test_the_fraction_is_the_decimal_written() -> None:
    # 0.3 as a binary float is a little under 0.3; 30 % of 10 s is still 3 s
    assert Jitter(0.3).room(10) == 3
    assert Jitter(0.2).room(9) == 1
    assert Jitter(1).room(7) == 7
    assert Jitter(0).room(1_000_000) == 0


@pytest.mark.parametrize("value", [True, "0.2", None, math.nan, math.inf, -0.01, 1.01, 2])
def test_a_bad_jitter_is_refused_naming_it(value: Any) -> None:
    message = f"jitter must be a number from 0 .off. to 1 .a wait may double., got {value!r}"
    with pytest.raises(UnsupportedRetrySettings, match=message):
        Jitter(value)
    with pytest.raises(UnsupportedRetrySettings, match="jitter must be"):
        RetryWindowPolicy(
            deadline=Deadline.after_data_interval_end(hours=1),
            duration=60,
            validation=0,
            safe_repeat=True,
            jitter=value,
        )


# -- the longest wait -------------------------------------------------------------------


def test_exponential_waits_stop_at_max_retry_delay() -> None:
    capped = RetrySettings.of(
        task_id="load",
        retries=5,
        retry_delay=timedelta(seconds=10),
        retry_exponential_backoff=2,
        max_retry_delay=timedelta(seconds=60),
    )
    key = TryKey("positions", "load", "r1", -1, 1)
    assert capped.longest_wait == 60
    assert capped.backoff(4) == 60
    # at the cap there is no room left: jitter cannot spread these out
    assert Jitter(1).apply(capped, 4, key)[1].delay == 60
    assert Jitter(1).apply(capped, 3, key)[1].delay <= 60


def test_constant_waits_stop_at_max_retry_delay_or_airflows_cap() -> None:
    def constant(cap: timedelta | None) -> RetrySettings:
        return RetrySettings.of(
            task_id="load",
            retries=2,
            retry_delay=timedelta(seconds=100),
            retry_exponential_backoff=0,
            max_retry_delay=cap,
            delay_cap=86_400,
        )

    assert constant(timedelta(seconds=110)).longest_wait == 110
    assert constant(timedelta(seconds=50)).longest_wait == 100
    assert constant(None).longest_wait == 86_400
    # Airflow's own constant delay is unchanged: the model still sees 100 s
    assert constant(timedelta(seconds=110)).model_policy()["maxDelay"] == 100


def test_a_wait_outside_its_bounds_is_not_given_to_the_model() -> None:
    base = RetrySettings("load", 3, 4, 2, 12)
    with pytest.raises(UnsupportedRetrySettings, match="a wait of 7 s after 2 attempts"):
        base.with_backoff(2, 7)
    with pytest.raises(UnsupportedRetrySettings, match="outside 8 s to 12 s"):
        base.with_backoff(2, 13)


# -- the policy ---------------------------------------------------------------------------


class TaskInstance:
    """What the policy reads of Airflow's runtime task instance."""

    def __init__(self, map_index: int = -1) -> None:
        self.dag_id, self.task_id, self.run_id = "rw_jitter", "load", "scheduled__2026-12-01"
        self.map_index = map_index
        self.xcom: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value


class Store(dict[str, Any]):
    """The task state store's get and set."""

    def set(self, key: str, value: Any) -> None:
        self[key] = value


def gated(jitter: float, *, deadline: Any = None, retry_delay: int = 60) -> Any:
    policy = RetryWindowPolicy(
        deadline=deadline or Deadline.after_data_interval_end(hours=6),
        duration=timedelta(minutes=5),
        validation=timedelta(minutes=1),
        safe_repeat=True,
        jitter=jitter,
    )
    with DAG("rw_jitter", schedule=None, start_date=START):
        return PythonOperator(
            task_id="load",
            python_callable=lambda: None,
            retries=3,
            retry_delay=timedelta(seconds=retry_delay),
            retry_exponential_backoff=2,
            max_retry_delay=timedelta(minutes=10),
            retry_policy=policy,
        )


def decide(task: Any, *, try_number: int = 1, map_index: int = -1) -> tuple[Any, dict[str, Any]]:
    now = pendulum.now("UTC")
    context = {
        "task": task,
        "ti": TaskInstance(map_index),
        "task_state_store": Store(),
        "data_interval_start": now.subtract(minutes=5),
        "data_interval_end": now,
    }
    decision = task.retry_policy.evaluate(ConnectionError("reset"), try_number, 3, context)
    return decision, context["task_state_store"]["retry_window.evidence"]["latest"]


def test_airflow_gets_the_jittered_wait_the_model_checked() -> None:
    decision, entry = decide(gated(0.5), try_number=2)
    drawn = entry["jitter"]
    assert drawn["wait"] == 120  # 60 s doubled once
    assert 120 <= drawn["delay"] <= 180
    assert drawn["try"] == {
        "dagId": "rw_jitter",
        "taskId": "load",
        "runId": "scheduled__2026-12-01",
        "mapIndex": -1,
        "tryNumber": 2,
    }
    result = entry["result"]["tasks"][0]
    assert result["decision"] == "wait-backoff"
    assert result["backoff"] == drawn["delay"]
    assert decision.retry_delay == timedelta(seconds=drawn["delay"])
    assert f"after a {drawn['delay']} s backoff" in decision.reason


def test_the_same_try_gets_the_same_wait_and_replays_byte_for_byte() -> None:
    first, entry = decide(gated(0.5), try_number=2, map_index=7)
    again, _ = decide(gated(0.5), try_number=2, map_index=7)
    assert first.retry_delay == again.retry_delay
    key = TryKey("rw_jitter", "load", "scheduled__2026-12-01", 7, 2)
    assert entry["jitter"]["delay"] == Jitter(0.5).stretch(120, longest=600, key=key)
    replay = subprocess.run(
        [sys.executable, "-m", "airflow_retrywindow", "evaluate"],
        input=json.dumps(entry["fixture"]),
        capture_output=True,
        text=True,
        check=True,
    )
    assert replay.stdout == json.dumps(entry["result"], sort_keys=True) + "\n"


def test_the_deadline_check_uses_the_jittered_wait() -> None:
    # find a mapped instance whose jitter adds time, then a deadline that only the
    # unjittered wait would meet: the jittered wait must make it infeasible
    def jittered(index: int) -> int:
        key = TryKey("rw_jitter", "load", "scheduled__2026-12-01", index, 1)
        return Jitter(0.5).stretch(60, longest=600, key=key)

    index = next(i for i in range(100) if jittered(i) > 62)
    finish_unjittered = 60 + 5 * 60 + 60
    due = pendulum.now("UTC").add(seconds=finish_unjittered + 2)
    _, plain = decide(gated(0, deadline=due), map_index=index)
    _, spread = decide(gated(0.5, deadline=due), map_index=index)
    assert plain["result"]["tasks"][0]["decision"] == "wait-backoff"
    assert "jitter" not in plain
    assert spread["result"]["tasks"][0]["decision"] == "deadline-infeasible"
    assert spread["result"]["tasks"][0]["backoff"] == spread["jitter"]["delay"] > 60


def test_off_by_default_and_the_fixture_is_the_tasks_own_policy() -> None:
    decision, entry = decide(gated(0))
    assert "jitter" not in entry
    assert entry["fixture"]["policy"] == {
        "maxAttempts": 4,
        "initialDelay": 60,
        "maxDelay": 600,
        "multiplier": 2,
    }
    assert decision.retry_delay == timedelta(seconds=60)
    assert gated(0).retry_policy.serialize()["jitter"] == 0.0


def test_only_a_retryable_failure_draws_a_wait() -> None:
    task = gated(0.5)
    now = pendulum.now("UTC")
    context = {
        "task": task,
        "ti": TaskInstance(),
        "task_state_store": Store(),
        "data_interval_start": now.subtract(minutes=5),
        "data_interval_end": now,
    }
    task.retry_policy.evaluate(OutcomeUnknown("no answer"), 1, 3, context)
    entry = context["task_state_store"]["retry_window.evidence"]["latest"]
    assert entry["result"]["tasks"][0]["decision"] == "reconcile-remote"
    assert "jitter" not in entry


def test_without_the_try_to_draw_for_the_policy_fails_closed() -> None:
    task = gated(0.5)
    context = {"task": task, "ti": object(), "data_interval_end": pendulum.now("UTC")}
    decision = task.retry_policy.evaluate(ConnectionError("reset"), 1, 3, context)
    assert decision.action.value == "fail"
    assert "jitter needs the task instance's dag_id" in decision.reason


# -- the gate's view: it never sees the draw, so it decides on the longest wait ----


@settings(max_examples=300, deadline=None)
@given(
    retries=st.integers(min_value=1, max_value=MAX_ATTEMPTS - 1),
    delay=st.integers(min_value=1, max_value=900),
    multiplier=st.integers(min_value=1, max_value=MAX_MULTIPLIER),
    cap=st.one_of(st.none(), st.integers(min_value=1, max_value=4000)),
    fraction=st.sampled_from([0.05, 0.1, 0.2, 0.3, 0.5, 1.0]),
    run=st.integers(min_value=0, max_value=10**6),
    map_index=st.integers(min_value=-1, max_value=50),
    data=st.data(),
)
def test_the_gate_never_finds_a_jittered_task_ready_before_airflow_retries_it(
    *,
    retries: int,
    delay: int,
    multiplier: int,
    cap: int | None,
    fraction: float,
    run: int,
    map_index: int,
    data: st.DataObject,
) -> None:
    if multiplier > 1 and cap is not None and cap < delay:
        cap = delay
    task_settings = RetrySettings.of(
        task_id="load",
        retries=retries,
        retry_delay=timedelta(seconds=delay),
        retry_exponential_backoff=multiplier if multiplier > 1 else 0,
        max_retry_delay=None if cap is None else timedelta(seconds=cap),
    )
    jitter = Jitter(fraction)
    gate_view = jitter.longest_waits(task_settings)
    policy = gate_view.model_policy()
    check_policy(
        policy["maxAttempts"], policy["initialDelay"], policy["maxDelay"], policy["multiplier"]
    )
    attempts = data.draw(st.integers(min_value=1, max_value=retries))
    key = TryKey("rw", "load", f"run_{run}", map_index, attempts)

    _, drawn = jitter.apply(task_settings, attempts, key)

    assert gate_view.backoff(attempts) >= drawn.delay
    assert gate_view.backoff(attempts) <= gate_view.longest_wait <= task_settings.longest_wait


def test_a_gate_target_with_jitter_is_decided_on_its_longest_wait() -> None:
    from airflow_retrywindow.gate.targets import settings_of

    def policy(fraction: float) -> RetryWindowPolicy:
        return RetryWindowPolicy(
            deadline=Deadline.after_data_interval_end(hours=6),
            duration=timedelta(minutes=1),
            validation=timedelta(0),
            safe_repeat=True,
            jitter=fraction,
        )

    with DAG("rw_gate_jitter", schedule=None, start_date=pendulum.datetime(2026, 12, 1)):
        plain, spread = (
            PythonOperator(
                task_id=task_id,
                python_callable=print,
                retries=3,
                retry_delay=timedelta(seconds=10),
                retry_exponential_backoff=2,
                max_retry_delay=timedelta(seconds=100),
                retry_policy=policy(fraction),
            )
            for task_id, fraction in (("plain", 0.0), ("spread", 0.3))
        )

    assert [settings_of(plain).backoff(n) for n in (1, 2, 3)] == [10, 20, 40]
    assert [settings_of(spread).backoff(n) for n in (1, 2, 3)] == [13, 26, 52]
