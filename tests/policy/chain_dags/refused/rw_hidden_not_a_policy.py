"""A window asked by an object that is no RetryPolicy: Airflow calls its evaluate all the same."""

from tests.policy.hidden_windows import Asking, one_task_dag, window

dag = one_task_dag("rw_hidden_not_a_policy", Asking(window()))
