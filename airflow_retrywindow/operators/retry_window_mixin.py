"""What the gate operator and the sensor share: their arguments and their execute steps.

Both decide the targets of their own DAG run the same way: they take the same
deadline, observations, budget, unit of work, observation age, API connection,
skipping rule and API page size and timeout, template the same fields, render a
budget's estimate the same way, and go through the same steps: check their
configuration, settle the estimates, decide the run, record the decision, publish
it and hold back what may not run. :class:`RetryWindowMixin` declares the
arguments once and runs those steps; the gate adds its guard and approval, the
sensor its waiting.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk import BaseOperator

from airflow_retrywindow import metrics
from airflow_retrywindow.exceptions import RetryWindowGateError
from airflow_retrywindow.gate.budget import Budget
from airflow_retrywindow.gate.estimates import Estimates, GivenEstimate, resolve_estimates
from airflow_retrywindow.gate.record import build
from airflow_retrywindow.gate.run import GateDecision, GateSettings, decide_run
from airflow_retrywindow.links.retry_window import RetryWindowLink
from airflow_retrywindow.operators.arguments import (
    budget_argument,
    conn_id_argument,
    deadline_argument,
    flag_argument,
    observation_age_argument,
    observations_argument,
    page_size_argument,
    timeout_argument,
    work_unit_argument,
)
from airflow_retrywindow.read_retry import ReadTally
from airflow_retrywindow.redaction import credentials_masked, safe_json
from airflow_retrywindow.timing.deadline import Deadline

if TYPE_CHECKING:
    import jinja2
    from airflow.sdk import Context

    from airflow_retrywindow.gate.approve import Override


# an operator class itself, so that Airflow fills its arguments from default_args too,
# as it does every operator class's that defines __init__
class RetryWindowMixin(BaseOperator):
    """The arguments and the execute steps of a task that decides its run's retries.

    Put it before the Airflow operator class among the bases, so that its
    attributes and :meth:`render_template` take precedence.

    :param deadline: when the delivery is due: a :class:`~airflow_retrywindow.Deadline`,
        an aware datetime, or a callable of the context returning one. Default:
        the deadline of the targets' policies, which must all give the same one.
    :param observations: explicit observations overriding Airflow's view of
        targets, as a mapping or its JSON text (templated); see
        :mod:`airflow_retrywindow.gate.observe` for the shape.
    :param budget: an approved resource budget for the next attempt; its
        ``estimate`` is templated.
    :param work_unit: the unit of work (business_date, input_partition,
        transform_version, destination, remote_job_id), templated.
    :param max_observation_age: how old an observation may be (default 60 s).
    :param airflow_conn_id: the connection to Airflow's REST API (default:
        ``[retry_window] default_conn_id``, ``airflow_api_default``).
    :param ignore_downstream_trigger_rules: if ``True`` (default), what is held back is
        skipped with everything downstream of it; if ``False``, only the direct
        downstream tasks, and the trigger rules of the tasks after them decide.
    :param page_size: rows asked for per API page (default: ``[retry_window] api_page_size``).
    :param api_timeout: seconds to wait for each API request (default:
        ``[retry_window] api_timeout``).
    """

    template_fields: Sequence[str] = ("observations", "budget", "work_unit")
    template_fields_renderers: ClassVar[dict[str, str]] = {
        "observations": "json",
        "work_unit": "json",
    }
    ui_color = "#f6e7c8"
    inherits_from_skipmixin = True
    # a button on the task instance to its Retry window tab
    operator_extra_links = (RetryWindowLink(),)

    #: ``gate`` or ``sensor``, in messages and metrics
    kind: ClassVar[str]

    def __init__(
        self,
        *,
        deadline: Deadline | Any | None = None,
        observations: Mapping[str, Any] | str | None = None,
        budget: Budget | None = None,
        work_unit: Mapping[str, Any] | str | None = None,
        max_observation_age: timedelta | float = timedelta(seconds=60),
        airflow_conn_id: str | None = None,
        ignore_downstream_trigger_rules: bool = True,
        page_size: int | None = None,
        api_timeout: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.deadline = deadline_argument(deadline)
        self.observations = observations_argument(observations)
        self.budget = budget_argument(budget)
        self.work_unit = work_unit_argument(work_unit)
        self.max_observation_age = observation_age_argument(max_observation_age)
        self.airflow_conn_id = conn_id_argument(airflow_conn_id)
        self.ignore_downstream_trigger_rules = flag_argument(
            ignore_downstream_trigger_rules, "ignore_downstream_trigger_rules"
        )
        self.page_size = page_size_argument(page_size)
        self.api_timeout = timeout_argument(api_timeout)

    def render_template(
        self,
        content: Any,
        context: Context,
        jinja_env: jinja2.Environment | None = None,
        seen_oids: set[int] | None = None,
    ) -> Any:
        """Render a budget's estimate; everything else as Airflow does.

        Airflow stores and logs the rendered fields, masked by its own secrets masker
        only. These fields are only shown and stored, never used to reach a service:
        the credentials they show (an observation's ``source`` with userinfo, a unit
        of work's ``token``, ...) are masked in the rendered value itself, and nothing
        is registered with Airflow's masker for them.
        """
        if isinstance(content, Budget):
            estimate = super().render_template(content.estimate, context, jinja_env, seen_oids)
            return content.with_estimate(credentials_masked(estimate))
        rendered = super().render_template(content, context, jinja_env, seen_oids)
        return credentials_masked(rendered)

    # -- what each kind says for itself -----------------------------------------

    def given_estimates(self) -> Mapping[str, GivenEstimate]:
        """Target task id -> the estimate this task was given for it (``None``: its policy's)."""
        raise NotImplementedError

    def retry_window_problems(self) -> list[str]:
        """Everything wrong with this task in its DAG, checked when the DAG is parsed."""
        raise NotImplementedError

    # -- the shared steps ---------------------------------------------------------

    def estimates(self) -> Estimates:
        """Each target's estimate and the deadline, from the arguments and the policies."""
        return resolve_estimates(self.dag, self.given_estimates(), self.deadline, kind=self.kind)

    def gate_settings(self) -> GateSettings:
        """What this task decides about, and how it reads its run."""
        return self._gate_settings(self.estimates())

    def _gate_settings(self, estimates: Estimates) -> GateSettings:
        return GateSettings(
            targets=estimates.works,
            deadline=estimates.deadline,
            max_observation_age=self.max_observation_age,
            conn_id=self.airflow_conn_id,
            page_size=self.page_size,
            timeout=self.api_timeout,
        )

    def _refuse_if_misconfigured(self, what_runs: str) -> None:
        """Fail the task, so ``what_runs`` does not run, when its configuration is wrong."""
        problems = self.retry_window_problems()
        if problems:
            raise RetryWindowGateError(
                f"the retry window {self.kind} is misconfigured, so {what_runs} does not run: "
                + "; ".join(problems)
            )

    def _decide(self, context: Context, estimates: Estimates) -> GateDecision:
        """Read the run and decide every target, logging each decision."""
        decided = decide_run(
            self._gate_settings(estimates),
            context,
            observations=self.observations,
            budget=self.budget,
        )
        for row in decided.table.decisions:
            # a reason may quote an observation's source: logged as the record stores it
            self.log.info("Retry window %s: %s", row.label, safe_json(row.reason))
        return decided

    def _record(
        self,
        context: Context,
        decided: GateDecision,
        estimates: Estimates,
        *,
        guard: list[dict[str, Any]],
        skipped: list[str],
        requests: int = 0,
        override: Override | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The decision record, counted in the metrics.

        :param requests: API requests made beside the run's read (an approval's).
        """
        record = build(
            decided.table,
            requests=decided.requests + requests,
            api=decided.api,
            gate=self.task_id,
            dag_id=self.dag_id,
            run_id=str(context["dag_run"].run_id),
            try_number=int(context["ti"].try_number),
            deadline_rule=estimates.deadline.describe(),
            work_unit=self.work_unit,
            guard=guard,
            skipped=skipped,
            estimate_sources=estimates.sources,
            override=override,
            extra={**_retried_reads(decided.reader), **(dict(extra) if extra else {})},
        )
        metrics.gate_decided(record, by=metrics.GATE if self.kind == "gate" else metrics.SENSOR)
        return record

    def _publish(self, context: Context, record: dict[str, Any], to_skip: Sequence[Any]) -> None:
        """Push the record, then hold back ``to_skip``: skipping ends the task."""
        ti = context["ti"]
        self.log.info("Retry window status update:\n%s", record["statusUpdate"])
        # the record first: skipping ends the task, and the evidence must survive it
        ti.xcom_push(key="return_value", value=record)
        if not to_skip:
            return
        self.log.info("Skipping %s", ", ".join(task.task_id for task in to_skip))
        self._hold_back(ti, to_skip)

    def _hold_back(self, ti: Any, tasks: Sequence[Any]) -> None:
        """Skip the downstream ``tasks`` that may not run, then end this task.

        Outside a mapped task group this is ``SkipMixin.skip``. Inside one (the
        deciding task instance has a map index), Airflow 3.3.2 does not skip the
        downstream tasks of one map index: ``SkipMixin`` leaves them to a check that
        looks the skip list up at map index -1 and so never finds it. The deciding
        task then skips itself instead: its ``all_success`` downstream tasks of the
        same map index are skipped by their trigger rule, every one of them, so a
        gate that would let some guarded tasks through holds them all (it fails
        closed).

        :param ti: the deciding task instance.
        :param tasks: the downstream tasks to skip, not empty.
        """
        if not tasks:
            return
        if int(getattr(ti, "map_index", -1)) < 0:
            self.skip(ti=ti, tasks=tasks)  # type: ignore[attr-defined]
            return
        from airflow_retrywindow.version_compat import AirflowSkipException

        names = ", ".join(task.task_id for task in tasks)
        raise AirflowSkipException(
            f"map index {ti.map_index} of {self.task_id} holds back {names}: skipped itself, "
            "so that its downstream tasks of this map index are skipped by their trigger rule"
        )


def _retried_reads(reader: object) -> dict[str, Any]:
    """The reads tried again while Airflow was briefly away, when there were any."""
    tally = getattr(reader, "reads", None)
    if isinstance(tally, ReadTally) and tally.retries:
        return {"retriedReads": tally.as_dict()}
    return {}
