"""Notifications that carry the retry window's decision to the people on call.

:class:`~airflow_retrywindow.notifications.notifier.RetryWindowNotifier` is the
Airflow part; :mod:`.notice` and :mod:`.message` read a stored decision and
compose the message without importing Airflow.
"""
