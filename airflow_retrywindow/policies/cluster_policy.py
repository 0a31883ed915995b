"""An Airflow cluster policy, registered through the ``airflow.policy`` entry point.

It refuses, when a DAG is parsed, any task whose ``RetryWindowPolicy`` cannot
express the task's retry settings, whose tries start in the triggerer
(``start_from_trigger=True``), or whose other retry policies could bypass the
window or hide it (:mod:`~airflow_retrywindow.policies.composition`), and puts two
``pre_execute`` hooks in front of every task that has one, its own, one of a
``ChainRetryPolicy`` or one held out of sight: the retry-start check
(:mod:`airflow_retrywindow.policies.retry_start`), then the hook that makes the
task defer to :class:`~airflow_retrywindow.triggers.gated.GatedTrigger`
(:mod:`airflow_retrywindow.triggers.deferral`), so a trigger's failure report is
decided by the policy too. Airflow applies cluster policies on the DAG processor
and again when the worker parses the DAG to run a task, so both are there in
every try, after every other distribution's policy (``trylast``), so it checks the
``retry_policy`` those leave. Tasks without that policy are untouched.

``[retry_window] policy_checks`` (:mod:`airflow_retrywindow.configuration`) says
what it does: ``enforce`` (the default) all of the above; ``warn`` logs the
problems instead of refusing the DAG, and still installs the hooks; ``off`` does
nothing, so a retry Airflow starts without the policy runs undecided.

**Settings are checked when this module is loaded.** Every Airflow component
that applies cluster policies (the DAG processor, the scheduler, the worker, the
API server) imports it through the ``airflow.policy`` entry point when Airflow
starts; each bad ``[retry_window]`` value is then logged as an ERROR naming the
option, the value and its environment variable. Loading never raises, so a bad
value stops no component. A gated task is refused when its DAG is parsed
(``enforce``; ``warn`` logs it), and every gated decision refuses with the same
message until the value is fixed (:func:`~airflow_retrywindow.configuration.check`).
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.exceptions import AirflowClusterPolicyViolation
from airflow.policies import hookimpl

log = logging.getLogger(__name__)


def report_bad_settings() -> None:
    """Log each bad ``[retry_window]`` value as an ERROR; never raise.

    Airflow loads cluster policies before it configures its logging, so the lines
    reach the component's standard error through Python's last-resort handler.
    """
    try:
        from airflow_retrywindow import configuration

        for problem in configuration.problems():
            log.error(
                "retry window: %s; every gated decision is refused until it is fixed", problem
            )
    except Exception:  # a component must start whatever the settings hold
        log.exception("retry window: the [retry_window] settings could not be checked")


@hookimpl(trylast=True)
def task_policy(task: Any) -> None:
    """Refuse settings the gate cannot express; install the gate's hooks on gated tasks.

    :param task: an operator or mapped operator of the DAG being parsed.
    :raises AirflowClusterPolicyViolation: naming the setting the gate cannot express,
        or a ``[retry_window] policy_checks`` value that is not one of the three.
    """
    from airflow_retrywindow import configuration
    from airflow_retrywindow.policies.check import gated, task_problem

    is_gated = gated(task)  # a window held out of sight too: warn hooks it
    if not is_gated and not hasattr(task, "retry_window_problems"):
        return  # most tasks: nothing of ours, and no configuration read
    try:
        mode = configuration.policy_checks()
    except configuration.ConfigurationError as error:
        # an unreadable switch must not silently switch the gate off
        raise AirflowClusterPolicyViolation(f"retry window gate: {error}") from None
    if mode == configuration.OFF:
        return
    problem = _settings_problem() or task_problem(task)
    if problem and mode == configuration.WARN:
        log.warning("retry window gate ([retry_window] policy_checks = warn): %s", problem)
    elif problem:
        raise AirflowClusterPolicyViolation(f"retry window gate: {problem}")
    if is_gated:
        from airflow_retrywindow.policies import retry_start
        from airflow_retrywindow.triggers import deferral

        # installed first so that it runs second: after the retry-start check let the try start
        deferral.install(task)
        retry_start.install(task)


def _settings_problem() -> str | None:
    """Why the ``[retry_window]`` settings refuse every gated decision, or ``None``."""
    from airflow_retrywindow import configuration

    try:
        configuration.check()
    except configuration.SettingsInvalid as error:
        return f"{error}; every decision of a gated task is refused until it is fixed"
    return None


report_bad_settings()  # on import: where each Airflow component loads the policy
