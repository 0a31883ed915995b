"""Airflow hooks of the provider: reading another run through Airflow's REST API.

* :mod:`~airflow_retrywindow.hooks.airflow_api` - the reader (``AirflowApi``), the rows
  it returns, and ``AirflowApiHook``, loaded on first access;
* :mod:`~airflow_retrywindow.hooks.airflow_api_hook` - the hook itself (imports Airflow);
* :mod:`~airflow_retrywindow.hooks.connection_type` - the connection type and its form.
"""
