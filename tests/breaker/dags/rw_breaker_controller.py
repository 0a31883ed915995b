"""The breakers' controller: the one DAG file a deployment adds to run its breaker pools."""

from airflow_retrywindow import pool_breaker_dag

pool_breaker_dag()
