"""Triggers of the retry window gate.

:mod:`airflow_retrywindow.triggers.gated` holds :class:`GatedTrigger`, the
wrapper a gated task defers to instead of its own trigger, and
:mod:`airflow_retrywindow.triggers.deferral` the ``pre_execute`` hook that makes
a gated task hand Airflow that wrapper. Importing this package imports no Airflow.
"""
