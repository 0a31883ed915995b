"""A retry policy that keeps a window's bound method (Airflow DAG)."""

from tests.policy.hidden_windows import Delegating, one_task_dag, window

dag = one_task_dag("rw_hidden_bound_method", Delegating(window().evaluate))
