"""What the provider stores, and how it is read back.

Two kinds of record, both JSON and both stored in Airflow's metadata database:

* the policy's **evidence**: one entry per decision of ``RetryWindowPolicy`` and
  of the retry-start check, in the task state store and in XCom under
  ``retry_window.evidence`` (written by :mod:`airflow_retrywindow.policies.evidence`);
* a gate's or a sensor's **decision record**: its ``return_value`` XCom (written
  by :mod:`airflow_retrywindow.gate.record`).

Every record says which shape it has (:mod:`~airflow_retrywindow.records.schema`),
and readers accept every shape an earlier release wrote. A reconciliation of a
resumable job, kept inside an evidence entry, is read back by
:mod:`~airflow_retrywindow.records.reconciliation`. Nothing here imports Airflow.
"""
