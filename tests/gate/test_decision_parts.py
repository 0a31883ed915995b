"""The gate's pure parts: state mapping, observations, capacity, budget, fixtures per policy."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pendulum
import pytest

from airflow_retrywindow.breaker.settings import BreakerSettings
from airflow_retrywindow.exceptions import ObservationError, RetryWindowGateError, TargetError
from airflow_retrywindow.gate.breaker_hold import BreakerHold
from airflow_retrywindow.gate.budget import Budget, BudgetError
from airflow_retrywindow.gate.capacity import assess
from airflow_retrywindow.gate.decide import decide, group_by_policy
from airflow_retrywindow.gate.observe import observe, observe_explicitly, parse_observations
from airflow_retrywindow.gate.read import RUNNING_STATES, latest_try, needs_history
from airflow_retrywindow.gate.run import GateSettings, decide_run
from airflow_retrywindow.gate.targets import Target, settings_of
from airflow_retrywindow.hooks.api_reader import (
    AirflowApi,
    AirflowApiError,
    PoolRow,
    TaskInstanceRow,
    connection_url,
)
from airflow_retrywindow.records.breaker_state import OPEN, BreakerState
from airflow_retrywindow.timing.retry_settings import RetrySettings
from airflow_retrywindow.timing.work import Work
from devstack.stack import free_port

NOW = pendulum.datetime(2026, 3, 2, 5, 40, tz="UTC")
WORK = Work(duration=timedelta(minutes=5), validation=timedelta(minutes=1), safe_repeat=True)


def _settings(task_id: str = "load", retries: int = 2, delay: int = 60) -> RetrySettings:
    return RetrySettings.of(
        task_id=task_id, retries=retries, retry_delay=timedelta(seconds=delay),
        retry_exponential_backoff=0, max_retry_delay=None,
    )  # fmt: skip


def _target(task_id: str = "load", *, gated: bool = False, retries: int = 2) -> Target:
    settings = _settings(task_id, retries)
    return Target(task_id, WORK, settings, gated, "positions_db", 1)


def _row(
    state: str | None, try_number: int = 1, max_tries: int = 2, task_id: str = "load"
) -> TaskInstanceRow:
    return TaskInstanceRow(
        task_id=task_id, map_index=-1, state=state, try_number=try_number, max_tries=max_tries,
        start_date=NOW.subtract(minutes=10), end_date=NOW.subtract(minutes=9),
        pool="positions_db", pool_slots=1, observed_at=NOW,
    )  # fmt: skip


# -- Airflow states onto model states ----------------------------------------------


@pytest.mark.parametrize(
    ("airflow_state", "gated", "failure", "model_state"),
    [
        ("success", False, None, "succeeded"),
        ("queued", False, None, "running"),
        ("scheduled", False, None, "running"),
        ("running", False, None, "running"),
        ("deferred", False, None, "running"),
        ("up_for_reschedule", False, None, "running"),
        ("restarting", False, None, "running"),
        ("failed", False, None, "retryable"),
        ("up_for_retry", False, None, "retryable"),
        ("failed", True, "unknown", "unknown"),
        ("failed", True, "terminal", "terminal"),
        ("up_for_retry", True, "retryable", "retryable"),
        ("failed", True, None, "unknown"),  # the policy saw no failure: killed, timed out
    ],
)
def test_the_latest_try_maps_onto_a_model_state(
    airflow_state: str, gated: bool, failure: str | None, model_state: str
) -> None:
    view = observe(_target(gated=gated), _row(airflow_state), failure=failure, failure_source="x")
    assert view.facts is not None
    assert view.state == model_state
    confirmed = model_state not in ("running", "unknown")
    assert (view.facts.finished_at is not None) == confirmed


@pytest.mark.parametrize("row", [None, _row(None, try_number=0), _row("skipped", try_number=0)])
def test_a_task_never_tried_is_not_attempted(row: TaskInstanceRow | None) -> None:
    view = observe(_target(), row, failure=None, failure_source="")
    assert view.facts is None
    assert view.state == "not-attempted"


#: Airflow 3.3.2's TaskInstanceState, each decided: the model state of a try in it, or
#: "reset" (the row no longer shows its try: read the earlier tries)
AIRFLOW_STATE_MEANINGS: dict[str | None, str] = {
    "success": "succeeded",
    "scheduled": "running",
    "queued": "running",
    "running": "running",
    "restarting": "running",
    "up_for_reschedule": "running",
    "deferred": "running",
    "awaiting_input": "running",
    "failed": "retryable",
    "up_for_retry": "retryable",
    None: "reset",
    "skipped": "reset",
    "upstream_failed": "reset",
    "removed": "reset",
}


def _airflow_states() -> list[str | None]:
    from airflow.utils.state import TaskInstanceState

    return [None, *(state.value for state in TaskInstanceState)]


@pytest.mark.parametrize("state", _airflow_states())
def test_every_airflow_state_has_a_decided_meaning(state: str | None) -> None:
    # a state Airflow adds later fails here until someone decides what it means
    meaning = AIRFLOW_STATE_MEANINGS[state]
    row = _row(state, try_number=2, max_tries=2)
    assert needs_history(row) == (meaning == "reset")
    view = observe(_target(), row, failure=None, failure_source="")
    assert view.state == ("not-attempted" if meaning == "reset" else meaning)
    assert (latest_try([_row("failed", 1), row]) is row) == (meaning != "reset")


@pytest.mark.parametrize("state", ["shutdown", "zombie", "SUCCESS", ""])
def test_a_state_the_gate_does_not_know_is_an_error_not_a_first_run(state: str) -> None:
    for try_number in (0, 2):
        with pytest.raises(TargetError) as raised:
            observe(_target(), _row(state, try_number), failure=None, failure_source="")
        assert "'load'" in str(raised.value) and repr(state) in str(raised.value)
    with pytest.raises(TargetError, match=f"task 'load'.*{state!r}"):
        needs_history(_row(state, try_number=2))
    # an earlier try in a state we do not know is not skipped over either
    with pytest.raises(TargetError, match=f"task 'load'.*{state!r}"):
        latest_try([_row("failed", 1), _row(state, 2), _row(None, 3)])


def test_attempts_count_the_window_the_way_the_policy_does() -> None:
    # a clear after try 2 raised max_tries to 2 + retries = 4; try 4 is attempt 4 - (4 - 2)
    view = observe(_target(), _row("failed", 4, 4), failure=None, failure_source="")
    assert view.facts is not None and view.facts.attempts == 2
    with pytest.raises(TargetError, match="gives 0 attempts in this window"):
        observe(_target(), _row("failed", 2, 4), failure=None, failure_source="")


def test_a_reset_task_is_judged_by_its_last_real_try() -> None:
    assert needs_history(_row(None, try_number=1))
    assert needs_history(_row("skipped", try_number=2))
    assert not needs_history(_row("failed", try_number=1))
    assert not needs_history(_row(None, try_number=0))
    tries = [_row("failed", 1), _row("success", 2, 3), _row("skipped", 2, 4), _row(None, 0)]
    latest = latest_try(tries)
    assert latest is not None and (latest.state, latest.try_number) == ("success", 2)
    assert latest_try([_row(None, 0)]) is None


def test_a_server_clock_ahead_is_refused() -> None:
    ahead = TaskInstanceRow(
        task_id="load", map_index=-1, state="failed", try_number=1, max_tries=2,
        start_date=NOW, end_date=NOW.add(seconds=30), pool="p", pool_slots=1, observed_at=NOW,
    )  # fmt: skip
    with pytest.raises(TargetError, match="the API server's clock runs ahead"):
        observe(_target(), ahead, failure=None, failure_source="")


# -- explicit observations -----------------------------------------------------------


def test_observations_override_airflow_and_keep_their_own_time() -> None:
    text = json.dumps(
        {
            "load": {
                "state": "retryable",
                "observed_at": "2026-03-02T05:39:00Z",
                "finished_at": "2026-03-02T05:31:10+00:00",
                "source": "job load-7: FAILED",
            }
        }
    )
    parsed = parse_observations(text, ["load"], as_of=NOW)
    airflow_view = observe(_target(), _row("failed", 1, 2), failure=None, failure_source="")
    view = observe_explicitly(_target(), parsed["load"], airflow_view)
    assert view.source == "observations"
    assert view.facts is not None
    assert (view.facts.state, view.facts.attempts) == ("retryable", 1)  # Airflow's count
    assert view.facts.observed_at == pendulum.datetime(2026, 3, 2, 5, 39, tz="UTC")


def _retryable(attempts: int) -> dict[str, Any]:
    return {
        "load": {
            "state": "retryable",
            "observed_at": "2026-03-02T05:39:00Z",
            "finished_at": "2026-03-02T05:31:10Z",
            "attempts": attempts,
        }
    }


def test_an_observation_never_gives_back_attempts_airflow_counted() -> None:
    # try 3 of 3 (retries=2) failed: the window is used up, whatever the observation counts
    parsed = parse_observations(_retryable(1), ["load"], as_of=NOW)
    airflow_view = observe(_target(), _row("failed", 3, 2), failure=None, failure_source="")
    view = observe_explicitly(_target(), parsed["load"], airflow_view)
    assert view.facts is not None and view.facts.attempts == 3
    table = decide(
        [view], as_of=NOW, deadline=NOW.add(hours=6), max_observation_age=3600,
        origin=NOW.subtract(days=1), pools={"positions_db": _pool(0)},
    )  # fmt: skip
    assert table.decision("load").decision == "attempts-exhausted"
    # more attempts than Airflow counted (another system's tries) still count
    more = observe_explicitly(
        _target(), parse_observations(_retryable(3), ["load"], as_of=NOW)["load"],
        observe(_target(), _row("failed", 1, 2), failure=None, failure_source=""),
    )  # fmt: skip
    assert more.facts is not None and more.facts.attempts == 3


@pytest.mark.parametrize("state", sorted(RUNNING_STATES))
def test_an_observation_cannot_override_a_try_airflow_sees_in_progress(state: str) -> None:
    parsed = parse_observations(_retryable(1), ["load"], as_of=NOW)
    airflow_view = observe(_target(), _row(state, 2, 2), failure=None, failure_source="")
    with pytest.raises(ObservationError) as raised:
        observe_explicitly(_target(), parsed["load"], airflow_view)
    message = str(raised.value)
    assert "'load'" in message and repr(state) in message and "try 2" in message


@pytest.mark.parametrize(
    "text",
    [
        "2026-03-02T05:39:00Z",  # the documented shape; Python 3.10 cannot read its Z
        "2026-03-02T05:39:00.000Z",
        "2026-03-02T05:39:00+00:00",
        "2026-03-02T06:39:00+01:00",
        " 2026-03-02T05:39:00Z ",
    ],
)
def test_observation_times_are_iso_8601_with_an_offset(text: str) -> None:
    observations = {"load": {"state": "unknown", "observed_at": text}}
    parsed = parse_observations(observations, ["load"], as_of=NOW)
    assert parsed["load"].observed_at == pendulum.datetime(2026, 3, 2, 5, 39, tz="UTC")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2026-03-02T05:39:00", "must be timezone-aware, got the naive datetime"),
        ("2026-03-02", "must be an ISO 8601 time with an offset"),
        ("05:39:00Z", "must be an ISO 8601 time with an offset"),
        ("P1D", "must be an ISO 8601 time with an offset"),
        ("yesterday", "must be an ISO 8601 time with an offset"),
        ("2026-13-02T05:39:00Z", "must be an ISO 8601 time with an offset"),
        ("1741000000", "must be an ISO 8601 time with an offset"),
    ],
)
def test_observation_times_that_are_not_instants_are_refused(text: str, message: str) -> None:
    observations = {"load": {"state": "unknown", "observed_at": text}}
    with pytest.raises(ObservationError) as raised:
        parse_observations(observations, ["load"], as_of=NOW)
    assert message in str(raised.value)
    assert "observations['load'].observed_at" in str(raised.value)


def test_a_python_literal_from_an_xcom_pull_is_read_too() -> None:
    text = str({"load": {"state": "unknown", "observed_at": "2026-03-02T05:39:00Z"}})
    assert parse_observations(text, ["load"], as_of=NOW)["load"].state == "unknown"
    for empty in (None, "", "None"):
        assert parse_observations(empty, ["load"], as_of=NOW) == {}


@pytest.mark.parametrize(
    ("observations", "message"),
    [
        ({"laod": {}}, "observations name 'laod', which is not a target of this gate"),
        ({"load": {"state": "done"}}, "state must be one of running, unknown, succeeded"),
        ({"load": {"state": "running"}}, "observed_at is required"),
        (
            {"load": {"state": "running", "observed_at": "2026-03-02T05:00:00"}},
            "must be timezone-aware, got the naive datetime",
        ),
        (
            {"load": {"state": "running", "observed_at": "2026-03-02T06:00:00Z"}},
            "is later than now",
        ),
        (
            {"load": {"state": "retryable", "observed_at": "2026-03-02T05:00:00Z"}},
            "a retryable task needs finished_at",
        ),
        (
            {
                "load": {
                    "state": "unknown",
                    "observed_at": "2026-03-02T05:00:00Z",
                    "finished_at": "2026-03-02T05:00:00Z",
                }
            },
            "a unknown task has no confirmed end; finished_at must be null",
        ),
        (
            {
                "load": {
                    "state": "succeeded",
                    "observed_at": "2026-03-02T05:00:00Z",
                    "finished_at": "2026-03-02T05:10:00Z",
                }
            },
            "is after observed_at",
        ),
        (
            {"load": {"state": "running", "observed_at": "2026-03-02T05:00:00Z", "attempts": 0}},
            "attempts must be a whole number from 1 to 10",
        ),
        (
            {"load": {"state": "running", "observed_at": "2026-03-02T05:00:00Z", "job": "x"}},
            "has unexpected fields job",
        ),
        ("[1, 2]", "observations must be a mapping of task id to observation"),
        ("{not json", "observations must be JSON (or a Python literal) of a mapping"),
    ],
)
def test_bad_observations_are_refused(observations: object, message: str) -> None:
    with pytest.raises(ObservationError) as raised:
        parse_observations(observations, ["load"], as_of=NOW)
    assert message in str(raised.value)


def test_observations_of_a_task_never_tried_need_attempts() -> None:
    parsed = parse_observations(
        {"load": {"state": "running", "observed_at": "2026-03-02T05:00:00Z"}}, ["load"], as_of=NOW
    )
    never = observe(_target(), None, failure=None, failure_source="")
    with pytest.raises(ObservationError, match="need 'attempts': Airflow has no try"):
        observe_explicitly(_target(), parsed["load"], never)


# -- credentials never stored ----------------------------------------------------------


def test_url_credentials_stay_out_of_the_api_url_and_its_errors() -> None:
    url = f"http://reader:secretpw@127.0.0.1:{free_port()}"
    api = AirflowApi(url, login="reader", password="other", timeout=2)
    assert api.base_url == url.replace("reader:secretpw@", "")
    with pytest.raises(AirflowApiError) as raised:
        api.task_instances("dag", "run", ["load"])  # nobody listens: the token request fails
    assert "could not be reached" in str(raised.value)
    assert "secretpw" not in str(raised.value)
    bad = "ftp://reader:secretpw@host"
    with pytest.raises(AirflowApiError) as refused:
        AirflowApi(bad)
    assert "secretpw" not in str(refused.value)


def test_a_gate_error_masks_secrets_in_what_it_quotes() -> None:
    from airflow.sdk import DAG, BaseOperator
    from airflow.sdk.log import mask_secret

    from airflow_retrywindow import Deadline

    mask_secret("rw-token-7f3a9c")  # as Airflow does with a connection's password
    with DAG("rw_gate_masking", schedule=None, start_date=pendulum.datetime(2026, 1, 1)) as dag:
        BaseOperator(task_id="load")
    settings = GateSettings(
        targets={"load": WORK}, deadline=Deadline.at(NOW.add(hours=6)), max_observation_age=60,
        conn_id="never_read", page_size=100, timeout=5,
    )  # fmt: skip
    context = {"dag": dag, "dag_run": SimpleNamespace(run_id="manual__1")}
    for quoted in ("postgres://etl:secretpw@db/positions", "rw-token-7f3a9c"):
        observations = {"load": {"state": "unknown", "observed_at": quoted}}
        with pytest.raises(RetryWindowGateError) as raised:
            decide_run(settings, context, observations=observations)
        message = str(raised.value)
        assert "observed_at must be an ISO 8601 time with an offset" in message
        assert "secretpw" not in message and "rw-token-7f3a9c" not in message


# -- a subclass of RetryWindowPolicy -----------------------------------------------------


def test_a_policy_subclass_gives_the_gate_its_own_settings() -> None:
    from airflow.sdk import DAG, BaseOperator

    from airflow_retrywindow import Deadline, RetryWindowPolicy

    class CappedPolicy(RetryWindowPolicy):
        """A team's policy: every wait is capped at 10 minutes."""

        def settings_of(self, task: Any) -> RetrySettings:
            return RetrySettings.of_task(task, delay_cap=600)

    policy = CappedPolicy(
        deadline=Deadline.after_data_interval_end(hours=6), duration=60, validation=30,
        safe_repeat=True,
    )  # fmt: skip
    with DAG("rw_gate_subclass", schedule=None, start_date=pendulum.datetime(2026, 1, 1)):
        task = BaseOperator(
            task_id="load", retries=3, retry_delay=timedelta(minutes=4),
            retry_exponential_backoff=2, retry_policy=policy,
        )  # fmt: skip
    assert settings_of(task) == policy.settings_of(task)
    assert settings_of(task).max_delay == 600


# -- pool capacity ---------------------------------------------------------------------


def _pool(occupied: int, deferred: int = 0, include_deferred: bool = False) -> PoolRow:
    held = occupied + (deferred if include_deferred else 0)
    return PoolRow("positions_db", 2, held, deferred, 2 - held, include_deferred)


@pytest.mark.parametrize(
    ("occupied", "pool_slots", "verdict"),
    [
        (0, 1, "fits-now"),
        (0, 2, "fits-now"),  # the heavy extraction alone
        (1, 1, "fits-now"),  # a second light one
        (1, 2, "wait-capacity"),  # heavy waits for the light one
        (2, 1, "wait-capacity"),
        (0, 3, "capacity-infeasible"),  # larger than the pool: never
    ],
)
def test_capacity_of_a_pool_of_two(occupied: int, pool_slots: int, verdict: str) -> None:
    found = assess("positions_db", pool_slots, _pool(occupied))
    assert found.verdict == verdict
    assert found.blocks == (verdict == "capacity-infeasible")


def test_deferred_tasks_hold_slots_only_when_the_pool_says_so() -> None:
    assert assess("positions_db", 2, _pool(0, deferred=1)).verdict == "fits-now"
    counted = assess("positions_db", 2, _pool(0, deferred=1, include_deferred=True))
    assert counted.verdict == "wait-capacity"
    assert "1 held by deferred tasks" in counted.reason


def test_a_missing_or_unlimited_pool() -> None:
    missing = assess("nowhere", 1, None)
    assert missing.verdict == "capacity-infeasible"
    assert "which does not exist" in missing.reason
    unlimited = PoolRow("big", -1, 50, 0, -1, False)
    assert assess("big", 9, unlimited).verdict == "fits-now"


def test_the_smaller_of_reported_and_computed_open_slots_counts() -> None:
    odd = PoolRow("positions_db", 2, 0, 0, 1, False)  # report says only 1 is open
    assert assess("positions_db", 2, odd).verdict == "wait-capacity"


def test_a_pool_its_breaker_holds_below_its_size_is_waited_for_not_refused() -> None:
    # the breaker opened: the pool's 2 slots are 0 until its dependency answers again
    held = PoolRow("positions_db", 0, 0, 0, 0, False)
    opened = BreakerState.closed("positions_db", 2, NOW.subtract(minutes=5), "watching the pool")
    opened = opened.moved(OPEN, 0, NOW.subtract(minutes=1), "3 calls refused, none served")
    view = observe(_target(), _row("failed", 1, 2), failure=None, failure_source="")
    table = decide(
        [view], as_of=NOW, deadline=NOW.add(hours=6), max_observation_age=3600,
        origin=NOW.subtract(days=1), pools={"positions_db": held},
        breakers={"positions_db": BreakerHold(opened, BreakerSettings())},
    )  # fmt: skip
    row = table.decision("load")
    assert row.decision == "dependency-held", row.reason
    # the pool's own size is 2: the repeat waits for a slot, it is not refused for good
    assert row.capacity.verdict == "wait-capacity", row.capacity.reason
    assert not row.capacity.blocks and row.waits
    assert "Held back by its pool" not in row.status
    # a task larger than the pool's own size still never fits
    assert assess("positions_db", 3, held, size=opened.size).blocks


# -- budget ----------------------------------------------------------------------------


def test_an_estimate_over_the_limit_is_refused_never_raised() -> None:
    verdict = Budget(limit=200, estimate=260, unit="GB").verdict()
    assert verdict.blocks
    assert verdict.reason == (
        "budget-exceeded: review the plan or get the budget changed; estimate 260 GB is over "
        "the approved 200 GB"
    )
    assert not Budget(limit=200, estimate=200, unit="GB").verdict().blocks


def test_a_templated_estimate_and_an_upper_bound() -> None:
    budget = Budget(limit=200, estimate="{{ x }}", unit="GB", estimate_is_upper_bound=True)
    rendered = budget.with_estimate(" 180.5 ")
    verdict = rendered.verdict()
    assert (verdict.verdict, verdict.estimate) == ("within-budget", 180.5)
    assert "an upper bound: the real use may be lower" in verdict.reason
    with pytest.raises(BudgetError, match="estimate must render to a number, got 'None'"):
        budget.with_estimate("None").verdict()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"limit": 0, "estimate": 1, "unit": "GB"}, "limit must be a positive finite number"),
        ({"limit": 1, "estimate": -1, "unit": "GB"}, "estimate must be a non-negative"),
        ({"limit": 1, "estimate": 1, "unit": ""}, "unit must name what the budget counts"),
        ({"limit": True, "estimate": 1, "unit": "GB"}, "limit must be a number, got True"),
    ],
)
def test_bad_budgets_are_refused(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(BudgetError, match=None) as raised:
        Budget(**arguments)  # type: ignore[arg-type]
    assert message in str(raised.value)


# -- fixtures per policy, 20 tasks at most ---------------------------------------------


def _failed_target(index: int, retries: int) -> tuple[Target, TaskInstanceRow]:
    task_id = f"load_{index:03d}"
    return _target(task_id, retries=retries), _row("failed", 1, retries, task_id)


def test_fixtures_are_grouped_by_policy_and_chunked_to_twenty() -> None:
    views = [
        observe(target, row, failure=None, failure_source="")
        for target, row in [_failed_target(i, 2) for i in range(45)]
        + [_failed_target(100 + i, 3) for i in range(3)]
        + [(_target("fresh"), None)]
    ]
    chunks = group_by_policy(views)
    assert [len(facts) for _, facts in chunks] == [20, 20, 5, 3]
    assert {settings.max_attempts for settings, _ in chunks} == {3, 4}
    table = decide(
        views, as_of=NOW, deadline=NOW.add(hours=6), max_observation_age=60,
        origin=NOW.subtract(days=1), pools={"positions_db": _pool(0)},
    )  # fmt: skip
    assert len(table.fixtures) == 4
    assert len(table.decisions) == 49
    assert table.decision("fresh").decision == "not-attempted"
    assert {row.decision for row in table.decisions if row.task_id != "fresh"} == {"retry-eligible"}
    # every fixture keeps its own clock origin: the data interval start
    assert {item["origin"] for item in table.fixtures} == {"2026-03-01T05:40:00Z"}


def test_connection_urls() -> None:
    assert connection_url("http://api:8080/", None, None, "c") == "http://api:8080"
    assert connection_url("api", "https", 8443, "c") == "https://api:8443"
    assert connection_url("http://api", None, 8080, "c") == "http://api:8080"
    with pytest.raises(RuntimeError, match="has no host"):
        connection_url(None, None, None, "c")


def test_the_pure_parts_import_no_airflow() -> None:
    modules = [
        "airflow_retrywindow",
        "airflow_retrywindow.gate.budget",
        "airflow_retrywindow.gate.capacity",
        "airflow_retrywindow.gate.targets",
        "airflow_retrywindow.timing.work",
        "airflow_retrywindow.gate.read",
        "airflow_retrywindow.gate.observe",
        "airflow_retrywindow.gate.decide",
        "airflow_retrywindow.gate.approve",
        "airflow_retrywindow.gate.record",
        "airflow_retrywindow.operators.arguments",
        "airflow_retrywindow.gate.estimates",
        "airflow_retrywindow.gate.run",
        "airflow_retrywindow.hooks.api_reader",
        # the breakers' pure parts, and the gate's hold on an open one
        "airflow_retrywindow.breaker.control",
        "airflow_retrywindow.breaker.law",
        "airflow_retrywindow.breaker.settings",
        "airflow_retrywindow.records.breaker_state",
        "airflow_retrywindow.gate.breaker_hold",
        "airflow_retrywindow.notifications.outage",
        "airflow_retrywindow.plugins.breaker_rows",
    ]
    code = (
        f"import importlib, sys\nfor m in {modules!r}: importlib.import_module(m)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('airflow', 'airflow_client')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
