"""``PoolBreakerOperator`` and ``pool_breaker_dag``: where the breaker pools' controller runs.

The controller is one deferred task: its trigger
(:class:`~airflow_retrywindow.triggers.pool_breaker.PoolBreakerTrigger`) runs every
breaker pool's rounds in the triggerer, holding no worker and no slot of any breaker
pool. The deferral's timeout is its lease. While a pool is held the lease is short and
renewed before every round: on Airflow 3.3 the trigger ends its run, and the scheduler
defers the next run's task straight to a new trigger, with no worker (a worker's resume
would have the scheduler skip its idle sleep twice, and check every held run sooner,
which costs it more the more task instances wait); before 3.3 a worker resumes the task.
While none is held a worker renews it about every ten rounds. When the lease runs out,
no triggerer ran the trigger in time (none runs, or none came back after a restart):
Airflow's scheduler resumes the task anyway, and the task gives every held pool back its
owner's size, says so, and defers again. A held pool is back at its size within about
two of its rounds of losing its controller; a pool that holds nothing loses nothing.

Deploy it with one DAG file::

    from airflow_retrywindow import pool_breaker_dag

    pool_breaker_dag()
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import pendulum
from airflow.sdk import DAG, BaseOperator

from airflow_retrywindow import configuration
from airflow_retrywindow.breaker.settings import CONTROLLER_DAG, CONTROLLER_TASK

if TYPE_CHECKING:
    from airflow.sdk import Context

log = logging.getLogger(__name__)

#: a lease while no pool is held, in rounds of the shortest breaker round
LONG_LEASE_ROUNDS = 10
#: past a lease's end before Airflow's scheduler resumes the task: its check of deferral
#: timeouts runs every ``[scheduler] trigger_timeout_check_interval`` (15 s by default)
LEASE_GRACE = timedelta(seconds=15)
#: the method the trigger's event resumes
RENEW = "renew"


class PoolBreakerOperator(BaseOperator):
    """Run the breaker pools that ``[retry_window] breaker_pools`` names.

    It defers at once and stays deferred: its trigger reads each breaker pool through
    Airflow's REST API every round and sets its slots. Keep it out of every breaker
    pool (``default_pool`` is fine): it must run while they hold everything.

    :param airflow_conn_id: the connection to Airflow's REST API (default:
        ``[retry_window] default_conn_id``); its user must be allowed to edit pools,
        read task instances, XCom entries and Variables.
    """

    template_fields = ("airflow_conn_id",)

    def __init__(self, *, airflow_conn_id: str | None = None, **kwargs: Any) -> None:
        if airflow_conn_id is not None and not (
            isinstance(airflow_conn_id, str) and airflow_conn_id
        ):
            raise ValueError(f"airflow_conn_id must be a connection id, got {airflow_conn_id!r}")
        super().__init__(**kwargs)
        self.airflow_conn_id = airflow_conn_id
        for name, value in _started_by_the_scheduler(airflow_conn_id).items():
            setattr(self, name, value)

    def execute(self, context: Context) -> None:
        """Start the controller: the first lease is a short one, a pool may be held."""
        self._defer({}, holding=True)

    def renew(self, context: Context, event: Mapping[str, Any]) -> None:
        """Renew the lease the trigger's ``event`` asks for, and defer again."""
        self._defer(dict(event.get("due") or {}), holding=bool(event.get("holding", True)))

    def resume_execution(
        self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context
    ) -> Any:
        """Resume from the trigger, or, when its lease ran out, give every pool back."""
        if next_method == "__fail__":  # Airflow's own: the trigger failed or timed out
            error = str((next_kwargs or {}).get("error", "unknown"))
            self._lost(error)
            if error == "Trigger timeout":  # Airflow's word for a deferral that timed out
                return self._defer({}, holding=False)
            raise RuntimeError(
                f"the breakers' trigger failed ({error}); its pools were given back their size, "
                "and the task's retry starts the controller again"
            )
        return super().resume_execution(next_method, next_kwargs, context)

    def _defer(self, due: dict[str, str], *, holding: bool) -> None:
        from airflow_retrywindow.triggers.pool_breaker import PoolBreakerTrigger

        pools = configuration.breaker_pools()
        now = pendulum.now("UTC")
        round_ = timedelta(seconds=pools.shortest_round())
        first = min((pendulum.parse(at) for at in due.values()), default=now)
        assert isinstance(first, datetime)
        # held: renewed before each round; else about every ten rounds
        renew_at = first + round_ if holding else now + LONG_LEASE_ROUNDS * round_
        self.defer(
            trigger=PoolBreakerTrigger(
                conn_id=self._conn_id(), due=due, renew_at=renew_at.isoformat()
            ),
            method_name=RENEW,
            timeout=_lease(timedelta(seconds=(renew_at - now).total_seconds()), round_),
        )

    def _lost(self, error: str) -> None:
        from airflow_retrywindow.triggers.pool_breaker import breaker_controller

        reason = f"the breakers' controller was lost ({error}): back at the pool's size"
        turns = breaker_controller(self._conn_id()).give_back(reason)
        for turn in turns:
            log.warning("Retry window breaker %s: %s", turn.pool, reason)

    def _conn_id(self) -> str:
        return self.airflow_conn_id or configuration.default_conn_id()


def _lease(until_renewal: timedelta, round_: timedelta) -> timedelta:
    """The deferral's timeout for a renewal due in ``until_renewal``: half a round and the
    scheduler's check later. A plain timedelta: Airflow's message to the task's supervisor
    takes no pendulum type."""
    return until_renewal + round_ / 2 + LEASE_GRACE


def _started_by_the_scheduler(airflow_conn_id: str | None) -> dict[str, Any]:
    """The task's attributes that have the scheduler defer each run's task to the trigger
    on a short lease, with no worker (Airflow 3.3); none before 3.3, which starts no task
    from a trigger."""
    from airflow_retrywindow.version_compat import AIRFLOW_V_3_3_PLUS

    if not AIRFLOW_V_3_3_PLUS:
        return {}
    from airflow.triggers.base import StartTriggerArgs

    from airflow_retrywindow.triggers.pool_breaker import CLASSPATH

    round_ = timedelta(seconds=configuration.breaker_pools().shortest_round())
    conn_id = airflow_conn_id or configuration.default_conn_id()
    return {
        "start_from_trigger": True,
        "start_trigger_args": StartTriggerArgs(
            trigger_cls=CLASSPATH,
            next_method=RENEW,
            trigger_kwargs={"conn_id": conn_id, "due": {}, "renew_at": ""},
            timeout=_lease(round_, round_),
        ),
    }


def pool_breaker_dag(*, airflow_conn_id: str | None = None, pool: str | None = None) -> DAG:
    """The DAG that runs the breaker pools: one run that never ends, one deferred task.

    Its id is ``retry_window_pool_breakers``: a failing try trips its breaker only while
    this DAG's task runs, which it looks up by that id.

    :param airflow_conn_id: the connection its task reads and sets the pools with.
    :param pool: the pool of its task (default ``default_pool``); never a breaker pool.
    """
    breakers = configuration.breaker_pools()
    if pool is not None and breakers.of(pool) is not None:
        raise ValueError(
            f"pool={pool!r} is a breaker pool: the breakers' controller would wait for its "
            "own pool while it holds everything; give it default_pool or a pool of its own"
        )
    with DAG(
        CONTROLLER_DAG,
        schedule="@continuous",
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        is_paused_upon_creation=False,
        tags=["retry-window"],
        doc_md=__doc__,
    ) as dag:
        PoolBreakerOperator(
            task_id=CONTROLLER_TASK,
            airflow_conn_id=airflow_conn_id,
            # a task that fails (its trigger could not run) starts again after a round
            retries=1000,
            retry_delay=timedelta(seconds=breakers.shortest_round()),
            **({"pool": pool} if pool is not None else {}),
        )
    return dag
