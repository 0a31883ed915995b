"""What the provider stores, and how it is read back: one place for every stored shape.

Two kinds of record, both JSON and both stored in Airflow's metadata database:

* the policy's **evidence** (:mod:`~airflow_retrywindow.records.evidence`): one entry
  per decision of ``RetryWindowPolicy`` and of the retry-start check, in the task
  state store and in XCom under ``retry_window.evidence``, and the failure classes
  it stores; its entries are read back by
  :mod:`~airflow_retrywindow.records.evidence_entry`, and a reconciliation of a
  resumable job inside an entry by :mod:`~airflow_retrywindow.records.reconciliation`;
* a gate's or a sensor's **decision record**: its ``return_value`` XCom (written
  by :mod:`airflow_retrywindow.gate.record`), read back by
  :mod:`~airflow_retrywindow.records.decision_record`; its approved override and
  its estimate sources by :mod:`~airflow_retrywindow.records.override` and
  :mod:`~airflow_retrywindow.records.estimate_source`.

Both keep ``{origin, fixture, result}`` for each decision of the model, read and
replayed (with the replays cached) by :mod:`~airflow_retrywindow.records.stored_fixture`.

Every record says which shape it has (:mod:`~airflow_retrywindow.records.schema`),
and readers accept every shape an earlier release wrote. The policy, the gate,
the view and the notifier all read and write through here. Nothing here imports
Airflow.
"""
