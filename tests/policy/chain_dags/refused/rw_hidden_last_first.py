"""A ChainRetryPolicy subclass that asks its last policy first (Airflow DAG).

Listed after a window that hands back what it cannot evaluate, the retrying rule would
be accepted by a chain that asks in order; this one asks it first, so its RETRY runs
with no deadline check.
"""

from airflow.sdk import ExceptionRetryPolicy, RetryRule

from tests.policy.hidden_windows import LastFirst, one_task_dag, window

retry_on_reset = ExceptionRetryPolicy(rules=[RetryRule(exception=ConnectionError)])
dag = one_task_dag("rw_hidden_last_first", LastFirst([window(on_error="default"), retry_on_reset]))
