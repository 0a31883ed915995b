"""Airflow's DeadlineAlert as the deadline: the instant Airflow computes, or a refusal.

The fixed-datetime reference is compared with Airflow's own core code on the
alert as the scheduler reads it back from the serialized DAG; the logical-date
reference needs Airflow's database and is compared with the deadline row of a
real run in ``test_deadline_alert_on_scheduler.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import pendulum
import pytest
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG, DeadlineAlert, DeadlineReference, SyncCallback
from airflow.sdk.definitions.deadline import BaseDeadlineReference, VariableInterval
from airflow.serialization.decoders import decode_deadline_alert
from airflow.serialization.encoders import encode_deadline_alert

from airflow_retrywindow import Deadline, RetryWindowPolicy
from airflow_retrywindow.exceptions import DeadlineError
from airflow_retrywindow.model import evaluate

CALLBACK = SyncCallback("tests.policy.deadline_dags.never_called")
LOGICAL = pendulum.datetime(2026, 12, 1, tz="UTC")


def alert(reference: Any, interval: Any = timedelta(hours=30), name: str | None = None) -> Any:
    return DeadlineAlert(reference=reference, interval=interval, callback=CALLBACK, name=name)


READY = alert(DeadlineReference.DAGRUN_LOGICAL_DATE, name="positions ready")
CUTOFF = alert(
    DeadlineReference.FIXED_DATETIME(datetime(2026, 12, 3, 5, 59, 59, 987654, tzinfo=timezone.utc)),
    interval=timedelta(minutes=-30),
    name="regulator cutoff",
)


def dag_with(*alerts: Any) -> DAG:
    return DAG("rw_alerts", schedule=None, start_date=LOGICAL, deadline=list(alerts) or None)


def run_of(dag: DAG | None, logical_date: pendulum.DateTime | None = LOGICAL) -> dict[str, Any]:
    return {"dag": dag, "logical_date": logical_date}


def airflow_instant(sdk_alert: Any) -> datetime:
    """What Airflow's core computes, on the alert as the scheduler decodes it."""
    stored = decode_deadline_alert(encode_deadline_alert(sdk_alert))
    instant = stored.reference.evaluate_with(session=None, interval=stored.interval)
    assert instant is not None
    return instant


# -- the instant --------------------------------------------------------------------


def test_logical_date_plus_interval() -> None:
    assert Deadline.from_alert(READY).resolve(run_of(dag_with(READY))) == LOGICAL.add(hours=30)


def test_logical_date_is_read_from_the_dag_run_too() -> None:
    @dataclass
    class DagRun:
        logical_date: pendulum.DateTime

    context = {"dag": dag_with(READY), "dag_run": DagRun(LOGICAL)}
    assert Deadline.from_alert(READY).resolve(context) == LOGICAL.add(hours=30)


@pytest.mark.parametrize(
    "when",
    [
        datetime(2026, 12, 3, 5, 59, 59, 987654, tzinfo=timezone.utc),
        # Airflow keeps a float timestamp; reading it back must round as Airflow does
        datetime(2031, 7, 9, 23, 1, 2, 345679, tzinfo=timezone.utc),
        pendulum.datetime(2026, 3, 29, 1, 30, tz="Europe/Lisbon"),
    ],
)
def test_fixed_datetime_is_the_instant_airflow_computes(when: datetime) -> None:
    fixed = alert(DeadlineReference.FIXED_DATETIME(when), interval=timedelta(minutes=-30))
    ours = Deadline.from_alert(fixed).resolve(run_of(dag_with(fixed)))
    assert ours == airflow_instant(fixed)
    assert ours.microsecond == airflow_instant(fixed).microsecond


def test_the_only_alert_of_the_dag_or_the_named_one() -> None:
    assert Deadline.dag_alert().resolve(run_of(dag_with(READY))) == LOGICAL.add(hours=30)
    both = run_of(dag_with(READY, CUTOFF))
    assert Deadline.dag_alert("regulator cutoff").resolve(both) == airflow_instant(CUTOFF)
    assert Deadline.dag_alert("positions ready").resolve(both) == LOGICAL.add(hours=30)


def test_a_copy_of_the_dags_alert_is_the_same_alert() -> None:
    copy = alert(DeadlineReference.DAGRUN_LOGICAL_DATE, name="positions ready")
    assert Deadline.from_alert(copy).resolve(run_of(dag_with(READY))) == LOGICAL.add(hours=30)


def test_a_deadline_alert_is_accepted_wherever_a_deadline_is() -> None:
    assert Deadline.coerce(READY) == Deadline.from_alert(READY)
    policy = RetryWindowPolicy(deadline=CUTOFF, duration=60, validation=0, safe_repeat=True)
    assert policy.deadline.describe() == (
        "Airflow deadline alert 'regulator cutoff': DeadlineReference.FIXED_DATETIME"
        "(2026-12-03T05:59:59.987654+00:00) - 0:30:00"
    )
    assert policy.serialize()["deadline"] == policy.deadline.describe()


# -- refusals -----------------------------------------------------------------------


class LastSuccess(BaseDeadlineReference):
    """A user's own reference: Airflow runs its code against the database."""


class ShiftedLogicalDate(type(DeadlineReference.DAGRUN_LOGICAL_DATE)):  # type: ignore[misc]
    """A user's subclass of a built-in reference: its own code decides, not the built-in's."""


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        (DeadlineReference.DAGRUN_QUEUED_AT, "DeadlineReference.DAGRUN_QUEUED_AT cannot be"),
        (DeadlineReference.AVERAGE_RUNTIME(), "DeadlineReference.AVERAGE_RUNTIME cannot be"),
        (LastSuccess(), "LastSuccess cannot be computed.*custom reference"),
        (ShiftedLogicalDate(), "ShiftedLogicalDate cannot be computed.*custom reference"),
    ],
)
def test_references_a_task_cannot_compute_are_refused_by_name(reference: Any, message: str) -> None:
    with pytest.raises(DeadlineError, match=message):
        Deadline.from_alert(alert(reference, name="late"))
    with pytest.raises(DeadlineError, match=f"'late': its reference .*{message}"):
        Deadline.dag_alert("late").resolve(run_of(dag_with(alert(reference, name="late"))))


def test_a_policy_refuses_such_an_alert_when_the_dag_is_parsed() -> None:
    with pytest.raises(DeadlineError, match="DAGRUN_QUEUED_AT"):
        RetryWindowPolicy(
            deadline=alert(DeadlineReference.DAGRUN_QUEUED_AT),
            duration=60,
            validation=0,
            safe_repeat=True,
        )


def test_a_variable_interval_is_refused() -> None:
    with pytest.raises(DeadlineError, match=r"interval VariableInterval\(key='sla_s'\)"):
        Deadline.from_alert(alert(DeadlineReference.DAGRUN_LOGICAL_DATE, VariableInterval("sla_s")))


def test_a_naive_fixed_datetime_is_refused() -> None:
    naive = alert(DeadlineReference.FIXED_DATETIME(datetime(2026, 12, 3, 6)), name="naive")
    with pytest.raises(DeadlineError, match="'naive': FIXED_DATETIME must be timezone-aware"):
        Deadline.from_alert(naive)


def test_something_else_is_not_an_alert() -> None:
    @dataclass
    class Lookalike:
        reference: object
        interval: timedelta
        callback: object

    with pytest.raises(DeadlineError, match="must be an Airflow DeadlineAlert"):
        Deadline.from_alert(Lookalike("DAGRUN_LOGICAL_DATE", timedelta(hours=1), None))


def test_a_run_without_a_logical_date_has_no_airflow_deadline() -> None:
    with pytest.raises(DeadlineError, match="the run has no logical date"):
        Deadline.from_alert(READY).resolve(run_of(dag_with(READY), logical_date=None))


def test_an_alert_the_dag_does_not_have_is_refused() -> None:
    with pytest.raises(DeadlineError, match="not one of the deadline alerts of DAG 'rw_alerts'"):
        Deadline.from_alert(CUTOFF).resolve(run_of(dag_with(READY)))


@pytest.mark.parametrize(
    ("alerts", "name", "message"),
    [
        ((READY, CUTOFF), None, "has 2 deadline alerts .'positions ready', 'regulator cutoff'."),
        ((), None, "has 0 deadline alerts .none."),
        ((READY,), "eod", "has no deadline alerts named 'eod'"),
        ((READY, READY), "positions ready", "has 2 deadline alerts named 'positions ready'"),
    ],
)
def test_the_dags_alert_must_be_one(
    alerts: tuple[Any, ...], name: str | None, message: str
) -> None:
    with pytest.raises(DeadlineError, match=message):
        Deadline.dag_alert(name).resolve(run_of(dag_with(*alerts)))


def test_without_the_dag_its_alerts_cannot_be_read() -> None:
    with pytest.raises(DeadlineError, match="the task context has no DAG"):
        Deadline.dag_alert().resolve(run_of(None))


@pytest.mark.parametrize("name", ["", 7])
def test_an_alert_name_must_be_a_string(name: Any) -> None:
    with pytest.raises(DeadlineError, match=f"non-empty string, got {name!r}"):
        Deadline.dag_alert(name)


# -- through the policy ---------------------------------------------------------------


class TaskInstance:
    """What the policy reads of Airflow's runtime task instance."""

    def xcom_push(self, key: str, value: Any) -> None:
        pass


class Store(dict[str, Any]):
    """The task state store's get and set."""

    def set(self, key: str, value: Any) -> None:
        self[key] = value


def test_the_policy_decides_on_the_alerts_instant_and_records_it() -> None:
    now = pendulum.now("UTC")
    fixed = alert(DeadlineReference.FIXED_DATETIME(now.add(hours=2)), interval=timedelta(0))
    gate = RetryWindowPolicy(
        deadline=Deadline.dag_alert(), duration=60, validation=30, safe_repeat=True
    )
    with dag_with(fixed) as dag:
        task = PythonOperator(
            task_id="load", python_callable=lambda: None, retries=1, retry_policy=gate
        )
    context = {
        "dag": dag,
        "task": task,
        "ti": TaskInstance(),
        "task_state_store": Store(),
        "logical_date": now,
        "data_interval_start": now.subtract(minutes=5),
    }
    gate.evaluate(ConnectionError("reset"), 1, 1, context)
    entry = context["task_state_store"]["retry_window.evidence"]["latest"]
    assert entry["deadlineAt"] == airflow_instant(fixed).isoformat()
    assert entry["deadline"] == "the DAG's only Airflow deadline alert"
    origin = pendulum.parse(entry["origin"])
    assert origin.add(seconds=entry["fixture"]["deadline"]) == now.add(hours=2).replace(
        microsecond=0
    )
    assert evaluate(entry["fixture"]) == entry["result"]


def test_alert_problems_are_found_without_a_run() -> None:
    dag = dag_with(READY, alert(DeadlineReference.DAGRUN_QUEUED_AT, name="late"))
    assert Deadline.dag_alert("positions ready").problems_in(dag) == []
    assert Deadline.from_alert(READY).problems_in(dag) == []
    (queued,) = Deadline.dag_alert("late").problems_in(dag)
    assert "DeadlineReference.DAGRUN_QUEUED_AT cannot be computed" in queued
    (several,) = Deadline.dag_alert().problems_in(dag)
    assert "has 2 deadline alerts" in several
    (foreign,) = Deadline.from_alert(CUTOFF).problems_in(dag)
    assert "'regulator cutoff'" in foreign and "is not one of the DAG's deadline alerts" in foreign
    assert Deadline.after_data_interval_end(hours=1).problems_in(dag) == []
