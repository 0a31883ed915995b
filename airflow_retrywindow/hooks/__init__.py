"""Airflow hooks of the provider: reading another run through Airflow's REST API.

* :mod:`~airflow_retrywindow.hooks.airflow_api` - ``AirflowApiHook``, the hook (imports Airflow);
* :mod:`~airflow_retrywindow.hooks.api_reader` - the REST reader it builds and the rows it
  returns (imports no Airflow);
* :mod:`~airflow_retrywindow.hooks.connection_type` - the connection type and its form.
"""
