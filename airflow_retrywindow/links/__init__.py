"""Where a decision lives in Airflow's UI: the extra link of the gate and the sensor.

* :mod:`~airflow_retrywindow.links.retry_window` - ``RetryWindowLink``, the button on a
  gate's or sensor's task instance (imports the task SDK);
* :mod:`~airflow_retrywindow.links.addresses` - the Retry window view's mount point, tabs
  and addresses, shared with the view (imports nothing of Airflow).
"""
