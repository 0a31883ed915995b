"""A retry policy that keeps a function closing over a window (Airflow DAG)."""

from tests.policy.hidden_windows import Delegating, closing_over, one_task_dag, window

dag = one_task_dag("rw_hidden_closure", Delegating(closing_over(window())))
