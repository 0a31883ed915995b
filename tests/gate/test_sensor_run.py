"""RetryWindowSensor on a real DAG run: deferrable, poke and reschedule, skips and timeouts.

The run is on a clock of its own (``tests/gate/run_clock.py``), the API server's ``Date``
too, as the run reads it. Each target stops it as it fails: its sensor finds the whole
backoff to wait, however late a busy machine starts it, and says until when it waits
(defers, sleeps or pokes); on that line the test sets the clock running from that instant,
or from the reschedule the reschedule sensor recorded, and the sensor's next look finds the
backoff over.
"""

from __future__ import annotations

from typing import Any

import pendulum
import pytest

from tests.gate.gate_runs import (
    ApiServer,
    dags_test,
    decisions,
    gate_env,
    on_run_clock,
    query,
    states,
    xcom,
)

pytestmark = [pytest.mark.airflow, pytest.mark.slow(minutes=1.5)]
DAG_ID = "rw_gate_sensor"
#: [retry_window] sensor_short_wait in the run: the DAG's deferred backoff is as long
SHORT_WAIT = 10


@pytest.fixture(scope="module")
def run(api_server: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    with on_run_clock(api_server, tmp_path_factory.mktemp("sensor-run")) as (clock, server):
        env = gate_env(server, AIRFLOW__RETRY_WINDOW__SENSOR_SHORT_WAIT=str(SHORT_WAIT))
        return dags_test(DAG_ID, env, clock=clock, rescheduled=["wait_reschedule"])


def _times(run_id: str) -> dict[str, tuple[pendulum.DateTime, pendulum.DateTime]]:
    rows = query(
        "select task_id, start_date, end_date from task_instance where dag_id=? and run_id=?",
        DAG_ID, run_id,
    )  # fmt: skip
    return {
        task: (pendulum.parse(start, tz="UTC"), pendulum.parse(end, tz="UTC"))  # type: ignore[misc]
        for task, start, end in rows
        if start and end
    }


def _first_look(run_id: str, task_id: str) -> pendulum.DateTime:
    """When the sensor first ran: its start, or its first reschedule's start."""
    rows = query(
        "select min(r.start_date) from task_reschedule r join task_instance t on r.ti_id = t.id "
        "where t.dag_id=? and t.run_id=? and t.task_id=?",
        DAG_ID, run_id, task_id,
    )  # fmt: skip
    first = rows[0][0] if rows and rows[0][0] else None
    found = pendulum.parse(first, tz="UTC") if first else _times(run_id)[task_id][0]
    assert isinstance(found, pendulum.DateTime)
    return found


def _record(run_id: str, task_id: str) -> dict[str, Any]:
    found = xcom(DAG_ID, run_id, task_id)
    assert isinstance(found, dict), f"{task_id} kept no decision record"
    return found


#: what a decision says it took from the sensor (``gate``) or the target's policy
ESTIMATES = ("duration", "validation", "safeRepeat", "deadline")
#: each mode's backoff in the DAG (rw_gate_sensor.py)
BACKOFF_SECONDS = {"deferred": 10, "short": 1, "poke": 1, "reschedule": 1}


@pytest.mark.parametrize("mode", list(BACKOFF_SECONDS))
def test_the_retry_runs_once_the_backoff_is_over(run: tuple[str, str], mode: str) -> None:
    run_id, output = run
    found = states(DAG_ID, run_id)
    assert (found[f"append_{mode}"], found[f"wait_{mode}"], found[f"retry_{mode}"]) == (
        "failed", "success", "success",
    ), output[-5000:]  # fmt: skip
    times = _times(run_id)
    failed_at = times[f"append_{mode}"][1]
    backoff = BACKOFF_SECONDS[mode]
    # the sensor really waited: it looked during the backoff, nothing ran before its end
    assert _first_look(run_id, f"wait_{mode}") < failed_at.add(seconds=backoff)
    assert times[f"wait_{mode}"][1] >= failed_at.add(seconds=backoff)
    assert times[f"retry_{mode}"][0] >= failed_at.add(seconds=backoff)
    record = _record(run_id, f"wait_{mode}")
    assert decisions(record) == {f"append_{mode}": "retry-eligible"}
    assert record["action"] == "run"
    assert record["decisions"][0]["attempts"] == 1
    assert record["decisions"][0]["backoffSeconds"] == backoff


def test_the_deferrable_sensor_waited_in_a_trigger(run: tuple[str, str]) -> None:
    record = _record(run[0], "wait_deferred")
    assert len(record["waits"]) == 1
    wait = record["waits"][0]
    assert wait["reason"].startswith("wait-backoff: attempt 2 of 2 may start at")
    # evaluated again, with fresh observations, once the trigger fired
    assert record["asOf"] >= wait["until"] > wait["at"]
    assert record["decisions"][0]["observedAt"] >= wait["until"]
    # a target without a policy: the sensor's own work and deadline
    assert record["decisions"][0]["estimateSource"] == dict.fromkeys(ESTIMATES, "gate")


def test_a_wait_shorter_than_a_deferral_is_worth_is_slept_in_the_worker(
    run: tuple[str, str],
) -> None:
    run_id, output = run
    record = _record(run_id, "wait_short")
    assert len(record["waits"]) == 1
    assert record["asOf"] >= record["waits"][0]["until"]
    # the 10 s wait went to the triggerer, the 1 s one did not
    deferred = [line for line in output.splitlines() if "deferring until" in line]
    slept = [line for line in output.splitlines() if "waiting here until" in line]
    assert len(deferred) == 1 and len(slept) == 1, (deferred, slept)


def test_the_reschedule_sensor_gave_its_slot_back(run: tuple[str, str]) -> None:
    rescheduled = query(
        "select count(*) from task_reschedule r join task_instance t on r.ti_id = t.id "
        "where t.dag_id=? and t.run_id=? and t.task_id='wait_reschedule'",
        DAG_ID, run[0],
    )[0][0]  # fmt: skip
    assert rescheduled >= 1


@pytest.mark.requires_airflow_3_3
def test_a_refused_retry_is_skipped_with_its_downstream(run: tuple[str, str]) -> None:
    run_id, output = run
    found = states(DAG_ID, run_id)
    assert found["wait_broken"] == "success"
    assert (found["retry_broken"], found["after_broken"]) == ("skipped", "skipped")
    record = _record(run_id, "wait_broken")
    assert decisions(record) == {"broken": "repair-cause"}
    assert record["action"] == "skip"
    assert record["skipped"] == ["after_broken", "retry_broken"]
    assert "Retry window broken: repair-cause: attempt 1 failed terminally" in output
    # no work and no deadline given: the sensor decided on its target's policy
    (fixture,) = record["fixtures"]
    (task,) = fixture["fixture"]["tasks"]
    assert (task["duration"], task["validation"], task["safeRepeat"]) == (90, 45, False)
    assert record["deadlineRule"] == "data_interval_end + 5:00:00"
    assert record["decisions"][0]["estimateSource"] == dict.fromkeys(ESTIMATES, "policy")


def test_timeouts_behave_like_any_sensor(run: tuple[str, str]) -> None:
    run_id, _ = run
    found = states(DAG_ID, run_id)
    # the hour-long backoff ends after the 30 s timeout
    assert (found["wait_late"], found["retry_late"]) == ("skipped", "skipped")  # soft_fail
    assert (found["wait_late_hard"], found["retry_late_hard"]) == ("failed", "upstream_failed")
    for task_id in ("wait_late", "wait_late_hard"):
        record = _record(run_id, task_id)
        assert record["action"] == "timeout"
        assert decisions(record) == {"late": "wait-backoff"}
