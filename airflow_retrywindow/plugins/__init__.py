"""The Retry window view: an Airflow plugin that shows every decision the gate took.

The API server mounts the view (:mod:`~airflow_retrywindow.plugins.app`) and the
UI shows it as a tab on each task instance and each DAG run
(:mod:`~airflow_retrywindow.plugins.plugin`). The parts that turn stored evidence
into rows (:mod:`~airflow_retrywindow.plugins.decision_rows`), a timeline picture
(:mod:`~airflow_retrywindow.plugins.timeline`) and HTML
(:mod:`~airflow_retrywindow.plugins.page`) import nothing from Airflow.
"""
