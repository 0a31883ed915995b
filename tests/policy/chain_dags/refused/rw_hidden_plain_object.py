"""A retry policy that keeps its window inside a plain object of its own (Airflow DAG)."""

from tests.policy.hidden_windows import Configured, Settings, one_task_dag, window

dag = one_task_dag("rw_hidden_plain_object", Configured(Settings(window())))
