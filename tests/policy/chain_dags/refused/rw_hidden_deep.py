"""A window five levels deep: the fallback of common.ai's ClassifierRetryPolicy (Airflow DAG).

The classifier asks its model first and falls back to a chain of a chain; the model's
RETRY never reaches the window. The connection names pydantic-ai's test model.
"""

from datetime import timedelta

from airflow.providers.common.ai.policies.retry import ClassifierRetryPolicy, ErrorCategory
from airflow.providers.common.compat.sdk import ChainRetryPolicy
from airflow.sdk import ExceptionRetryPolicy, RetryAction, RetryRule

from tests.policy.hidden_windows import one_task_dag, window


def deny() -> ExceptionRetryPolicy:
    return ExceptionRetryPolicy(
        rules=[RetryRule(exception=PermissionError, action=RetryAction.FAIL)]
    )


categories = {
    "rate_limit": ErrorCategory("API throttling.", delay=timedelta(seconds=60)),
    "auth": ErrorCategory("Credentials revoked.", retry=False),
}
classifier = ClassifierRetryPolicy(
    llm_conn_id="rw_test_model",
    categories=categories,
    fallback_policy=ChainRetryPolicy([deny(), ChainRetryPolicy([deny(), window()])]),
)
dag = one_task_dag("rw_hidden_deep", classifier)
