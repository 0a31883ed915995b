"""The breakers' controller: it runs the pools ``[retry_window] breaker_pools`` names
(``make demo`` names ``positions_api``, the pool of ``retry_window_outage``'s loads)."""

from airflow_retrywindow import pool_breaker_dag

pool_breaker_dag()
