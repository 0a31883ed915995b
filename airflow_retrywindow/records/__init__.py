"""What the provider stores, and how it is read back: one place for every stored shape.

The stored shapes, all JSON and all stored in Airflow's metadata database:

* the policy's **evidence** (:mod:`~airflow_retrywindow.records.evidence`): one entry
  per decision of ``RetryWindowPolicy`` and of the retry-start check, in the task
  state store and in XCom under ``retry_window.evidence``, and the failure classes
  it stores; its entries are read back by
  :mod:`~airflow_retrywindow.records.evidence_entry`, and a reconciliation of a
  resumable job inside an entry by :mod:`~airflow_retrywindow.records.reconciliation`;
* a gate's or a sensor's **decision record**: its ``return_value`` XCom, written
  and read back by :mod:`~airflow_retrywindow.records.decision_record`; its
  approved override and its estimate sources by
  :mod:`~airflow_retrywindow.records.override` and
  :mod:`~airflow_retrywindow.records.estimate_source`;
* a resumable task's **try-start marker** in the task state store
  (:mod:`~airflow_retrywindow.records.try_start`, with its
  :mod:`~airflow_retrywindow.records.work_scope`), and a pool's **dependency
  record** (:mod:`~airflow_retrywindow.records.dependency_state`).

The evidence and the decision record keep ``{origin, fixture, result}`` for each
decision of the model, read and replayed (with the replays cached) by
:mod:`~airflow_retrywindow.records.stored_fixture`.

No module outside this package builds a stored dict itself: it calls the shape's
writer here (``tests/records/test_one_writer.py`` checks). Every evidence entry and
decision record says which shape it has (:mod:`~airflow_retrywindow.records.schema`),
and readers accept every shape an earlier release wrote. The policy, the gate,
the view and the notifier all read and write through here. Nothing here imports
Airflow.
"""
