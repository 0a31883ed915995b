"""A run whose tasks really succeed, fail, fail terminally or lose their outcome,
then gates that decide every retry from Airflow's REST API.

``table_gate`` guards tasks that were never tried (first runs, pool capacity),
and, through a mapping, repeats of failed tasks. ``budget_gate`` guards a repeat
whose dry-run estimate is over budget. ``narrow_gate`` skips only its guarded
task and lets the trigger rules after it decide. ``policy_gate`` lists its
targets only: every estimate and the deadline come from their ``RetryWindowPolicy``
(``rebuild``'s takes seven hours, more than the six left to the deadline).

``load``, ``repair``, ``rebuild`` and ``policy_gate`` need retry policies (Airflow 3.3):
on older Airflow the DAG is the rest, every estimate the gates' own ``Work``.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, task
from settling import settle_past, stop_clock

from airflow_retrywindow import (
    Budget,
    Deadline,
    OutcomeUnknown,
    RetryWindowGateOperator,
    RetryWindowPolicy,
    TerminalFailure,
    Work,
)
from airflow_retrywindow.version_compat import AIRFLOW_V_3_3_PLUS, AirflowFailException

DEADLINE = Deadline.after_data_interval_end(hours=6)
POOL = "rw_gate_positions"  # 2 slots: one heavy (2) or two light (1) extractions
QUICK = Work(duration=timedelta(minutes=1), validation=timedelta(seconds=30), safe_repeat=True)
#: the targets under a RetryWindowPolicy, which Airflow 3.3 brought
POLICY_TARGETS = ("load", "repair", "rebuild") if AIRFLOW_V_3_3_PLUS else ()

with DAG(
    "rw_gate_table",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["retry-window-test"],
):

    @task(pool=POOL, pool_slots=1)
    def extract() -> str:
        return "positions extracted"

    @task(retries=0)
    def archive() -> None:
        raise RuntimeError("archive bucket unavailable")

    @task(retries=2, retry_delay=timedelta(hours=1))
    def append() -> None:
        raise AirflowFailException("append failed; the next attempt waits an hour")

    @task(retries=2, retry_delay=timedelta(seconds=1))
    def publish() -> None:
        raise AirflowFailException("publish failed after writing some rows")

    @task(retries=1, retry_delay=timedelta(seconds=1))
    def transform() -> None:
        raise AirflowFailException("transform failed; it takes 7 hours to run again")

    @task(retries=1, retry_delay=timedelta(seconds=1))
    def report() -> None:
        raise AirflowFailException("report failed")

    @task
    def monitor() -> str:
        return "monitor done"

    @task
    def lookup() -> str:
        return "lookup done"

    @task
    def reconcile() -> dict[str, object]:
        """What a reconciliation task found out about two remote jobs: the run's clock stops
        here, so the gates see monitor's observation as old as settle makes it, whenever a
        busy machine starts them."""
        stop_clock()
        now = pendulum.now("UTC")
        return {
            "monitor": {
                "state": "running",
                "observed_at": now.isoformat(),
                "finished_at": None,
                "source": "remote job monitor-7 still running",
            },
            "lookup": {
                "state": "retryable",
                "observed_at": now.subtract(hours=2).isoformat(),
                "finished_at": now.subtract(hours=2, minutes=5).isoformat(),
                "attempts": 1,
            },
        }

    @task
    def dry_run() -> int:
        return 260  # GB the repeat would read; 200 are approved

    @task(trigger_rule="all_done")
    def settle() -> None:
        settle_past(1)  # every 1 s backoff is over when the gates look

    targets = {
        "extract": QUICK,
        **dict.fromkeys(POLICY_TARGETS[:2], QUICK),
        "archive": QUICK,
        "append": QUICK,
        "publish": Work(duration=60, validation=30, safe_repeat=False),
        "transform": Work(duration=timedelta(hours=7), validation=60, safe_repeat=True),
        "report": QUICK,
        "monitor": QUICK,
        "lookup": QUICK,
        "fresh_light": QUICK,
        "fresh_heavy": QUICK,
        "huge": QUICK,
    }
    table_gate = RetryWindowGateOperator(
        task_id="table_gate",
        targets=targets,
        deadline=DEADLINE,
        guard={
            "fresh_light": "fresh_light",
            "fresh_heavy": "fresh_heavy",
            "huge": "huge",
            "rerun_report": "report",
            "rerun_append": "append",
        },
        # monitor's observation is fresh within the default 60 s: on the run's clock it is
        # settle's few seconds old; lookup's, two hours old, is not
        observations="{{ ti.xcom_pull(task_ids='reconcile') }}",
        work_unit={
            "business_date": "{{ ds }}",
            "input_partition": "positions/{{ ds_nodash }}",
            "transform_version": "v3",
            "destination": "warehouse.fund_positions",
            "remote_job_id": "load-1",
        },
        pool=POOL,
        pool_slots=1,
        trigger_rule="all_done",
    )

    @task(pool=POOL, pool_slots=1)
    def fresh_light() -> str:
        return "light extraction"

    @task(pool=POOL, pool_slots=2)
    def fresh_heavy() -> str:
        return "heavy extraction"

    @task(pool=POOL, pool_slots=3)
    def huge() -> str:
        return "never fits"

    @task
    def after_huge() -> str:
        return "after huge"

    @task
    def rerun_report() -> str:
        return "report again"

    @task
    def rerun_append() -> str:
        return "append again"

    budget_gate = RetryWindowGateOperator(
        task_id="budget_gate",
        targets={"report": QUICK},
        deadline=DEADLINE,
        guard={"rerun_report_budget": "report"},
        budget=Budget(limit=200, estimate="{{ ti.xcom_pull(task_ids='dry_run') }}", unit="GB"),
        trigger_rule="all_done",
    )

    @task
    def rerun_report_budget() -> str:
        return "report within budget"

    narrow_gate = RetryWindowGateOperator(
        task_id="narrow_gate",
        targets={"append": QUICK},
        deadline=DEADLINE,
        guard={"rerun_append_narrow": "append"},
        ignore_downstream_trigger_rules=False,
        trigger_rule="all_done",
    )

    @task
    def rerun_append_narrow() -> str:
        return "append again"

    @task(trigger_rule="none_failed")
    def after_narrow() -> str:
        return "runs: its trigger rule decides"

    failing = [extract(), archive(), append(), publish(), transform(), report()]
    gates = [table_gate, budget_gate, narrow_gate]
    if AIRFLOW_V_3_3_PLUS:
        POLICY = RetryWindowPolicy(
            deadline=DEADLINE, duration=timedelta(minutes=1), validation=timedelta(seconds=30),
            safe_repeat=True,
        )  # fmt: skip
        #: only this policy knows that a rebuild takes seven hours
        LONG = RetryWindowPolicy(
            deadline=DEADLINE, duration=timedelta(hours=7), validation=timedelta(minutes=20),
            safe_repeat=True,
        )  # fmt: skip

        @task(
            retries=2, retry_delay=timedelta(seconds=2), retry_policy=POLICY, pool=POOL,
            pool_slots=2,
        )  # fmt: skip
        def load() -> None:
            raise OutcomeUnknown("load response lost after submission", remote_job_id="load-1")

        @task(retries=2, retry_delay=timedelta(seconds=2), retry_policy=POLICY)
        def repair() -> None:
            raise TerminalFailure("schema mismatch in the destination table")

        @task(retries=2, retry_delay=timedelta(seconds=1), retry_policy=LONG)
        def rebuild() -> None:
            raise ConnectionError("warehouse connection reset during the rebuild")

        # no Work, no deadline: both from the targets' policies
        policy_gate = RetryWindowGateOperator(
            task_id="policy_gate",
            targets=list(POLICY_TARGETS),
            guard=[],
            trigger_rule="all_done",
        )
        failing += [load(), repair(), rebuild()]
        gates.append(policy_gate)
    observed = [monitor(), lookup(), reconcile(), dry_run()]
    pause = settle()
    failing >> pause
    observed >> pause
    pause >> gates
    narrow_gate >> rerun_append_narrow() >> after_narrow()
    huge_task = huge()
    table_gate >> [fresh_light(), fresh_heavy(), huge_task, rerun_report(), rerun_append()]
    huge_task >> after_huge()
    budget_gate >> rerun_report_budget()
