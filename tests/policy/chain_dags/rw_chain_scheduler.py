"""A window among Airflow's other retry policies, on a real scheduler.

A ``ChainRetryPolicy`` from common.compat with rules first and then the window (a
killed try, a ``PermissionError``, a retryable failure), and a window fed by a
``ClassifierRetryPolicy`` on pydantic-ai's test model and by a slow classifier.
Every body counts its runs, and each run's deadline comes from its conf, as in the
scheduler paths' DAGs (``counted_tries.py``, which the test copies beside this file).
The classifier's bodies also note which of its model's modules were loaded before
they ran.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from datetime import timedelta

from airflow.providers.common.compat.sdk import ChainRetryPolicy
from airflow.sdk import (
    ExceptionRetryPolicy,
    RetryAction,
    RetryDecision,
    RetryPolicy,
    RetryRule,
    task,
)
from counted_tries import count, deadline_in, test_dag

from airflow_retrywindow import Deadline, RetryWindowPolicy

#: the connection of pydantic-ai's test model (the test puts it in the services' environment)
MODEL_CONN_ID = "rw_test_model"


def _soon(context):  # type: ignore[no-untyped-def]
    # 45 s after the run was asked for: a 60 s wait never fits
    return context["dag_run"].run_after + timedelta(seconds=45)


def _window(**more):  # type: ignore[no-untyped-def]
    return RetryWindowPolicy(
        deadline=Deadline.computed(more.pop("deadline", deadline_in)),
        duration=timedelta(seconds=1),
        validation=timedelta(seconds=1),
        safe_repeat=True,
        **more,
    )


def _rules_first():  # type: ignore[no-untyped-def]
    denied = RetryRule(exception=PermissionError, action=RetryAction.FAIL, reason="no grant")
    return ChainRetryPolicy([ExceptionRetryPolicy(rules=[denied]), _window()])


class Unhurried(RetryPolicy):
    """A classifier that never answers, as a model that hangs: a decision that waited for it
    would never come, on a machine of any speed."""

    def evaluate(self, exception, try_number, max_tries, context=None):  # type: ignore[no-untyped-def]
        threading.Event().wait()
        return RetryDecision.fail(reason="never reached")


with test_dag("rw_chain_killed"):

    @task(retries=2, retry_delay=timedelta(seconds=1), retry_policy=_rules_first())
    def killed(**context):  # type: ignore[no-untyped-def]
        if count(context) == 1:
            os.kill(os.getpid(), signal.SIGKILL)  # the OOM killer's way
        return "ran again"

    killed()

with test_dag("rw_chain_denied"):

    @task(retries=2, retry_delay=timedelta(seconds=1), retry_policy=_rules_first())
    def denied(**context):  # type: ignore[no-untyped-def]
        count(context)
        raise PermissionError("the warehouse refused the grant")

    denied()

with test_dag("rw_chain_flaky"):

    @task(
        retries=3,
        retry_delay=timedelta(seconds=1),
        retry_exponential_backoff=2,
        retry_policy=_rules_first(),
    )
    def flaky(**context):  # type: ignore[no-untyped-def]
        if count(context) < 3:
            raise ConnectionError("connection reset by the warehouse")
        return "loaded"

    flaky()

with test_dag("rw_chain_slow_classifier"):

    @task(
        retries=1,
        retry_delay=timedelta(seconds=1),
        retry_policy=_window(classify=Unhurried(), classify_timeout=2),
    )
    def unhurried(**context):  # type: ignore[no-untyped-def]
        if count(context) == 1:
            raise ConnectionError("connection reset by the warehouse")
        return "loaded"

    unhurried()

try:
    from airflow.providers.common.ai.policies.retry import ClassifierRetryPolicy, ErrorCategory
except ImportError:  # no common-ai extra (Python 3.10): the test skips
    ClassifierRetryPolicy = None

if ClassifierRetryPolicy is not None:
    AUTH = ("auth", ErrorCategory("Credentials invalid or revoked.", retry=False))
    RATE_LIMIT = (
        "rate_limit",
        ErrorCategory("API throttling or a quota exceeded.", delay=timedelta(seconds=60)),
    )

    #: what the classifier's first answer in a task process would otherwise import
    MODEL_MODULES = ("airflow.providers.common.ai.hooks.pydantic_ai", "pydantic_ai.models.test")

    def _count_ready(context):  # type: ignore[no-untyped-def]
        # a body run, and which of the model's modules were loaded before the body ran
        count(context)
        loaded = [name for name in MODEL_MODULES if name in sys.modules]
        with open(context["dag_run"].conf["counter"], "a") as out:
            out.write(f"ready {context['ti'].task_id} {','.join(loaded)}\n")

    def _classified(*categories, **more):  # type: ignore[no-untyped-def]
        # pydantic-ai's test model answers with the first category; waited for as long
        # as the window waits for any classifier by default
        model = ClassifierRetryPolicy(llm_conn_id=MODEL_CONN_ID, categories=dict(categories))
        return _window(classify=model, **more)

    with test_dag("rw_chain_classifier"):

        @task(
            retries=2,
            retry_delay=timedelta(seconds=1),
            retry_policy=_classified(AUTH, RATE_LIMIT),
        )
        def revoked(**context):  # type: ignore[no-untyped-def]
            _count_ready(context)
            raise ValueError("401: the API key was revoked")

        @task(
            retries=2,
            retry_delay=timedelta(seconds=1),
            retry_policy=_classified(RATE_LIMIT, AUTH, deadline=_soon),
        )
        def throttled(**context):  # type: ignore[no-untyped-def]
            _count_ready(context)
            raise ValueError("429: slow down")

        @task(
            retries=2,
            retry_delay=timedelta(seconds=1),
            retry_policy=_classified(RATE_LIMIT, AUTH, unknown=[TimeoutError]),
        )
        def unanswered(**context):  # type: ignore[no-untyped-def]
            _count_ready(context)
            raise TimeoutError("the warehouse did not answer the submission")

        revoked()
        throttled()
        unanswered()
