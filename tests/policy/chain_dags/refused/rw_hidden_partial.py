"""A retry policy that keeps a functools.partial over a window (Airflow DAG)."""

from functools import partial

from tests.policy.hidden_windows import Delegating, ask_window, one_task_dag, window

dag = one_task_dag("rw_hidden_partial", Delegating(partial(ask_window, window())))
