"""The gate over a DAG run's targets, as a straight pipeline: read a snapshot of the
run, observe each target, decide with the model (capacity and budget included), and
record the decision. The operator and the sensor are thin Airflow classes over it.

* :mod:`~airflow_retrywindow.gate.run` - the orchestration, top to bottom
  (``decide_run``), and the gate's settings;
* :mod:`~airflow_retrywindow.gate.targets` - the targets as tasks of the gate's DAG;
* :mod:`~airflow_retrywindow.gate.estimates` - the estimates and the deadline each
  target is decided on, and where each came from;
* :mod:`~airflow_retrywindow.gate.read` - read: one snapshot of the run from the API,
  its task instances (one per map index) and what Airflow's states say of a try;
* :mod:`~airflow_retrywindow.gate.observe` - observe: each task instance as model
  facts, explicit observations included;
* :mod:`~airflow_retrywindow.gate.decide` - decide: fixtures, the model, and the pool
  (:mod:`~airflow_retrywindow.gate.capacity`) and budget
  (:mod:`~airflow_retrywindow.gate.budget`) verdicts;
* :mod:`~airflow_retrywindow.gate.approve` - a person's approval: read, judged, and
  what it lets through; its parse-time checks;
* :mod:`~airflow_retrywindow.gate.record` - record: the decision record and status update.

The operator's and sensor's arguments are checked in
:mod:`~airflow_retrywindow.operators.arguments`.

Each stage imports only the stages before it. Only ``run``, ``targets`` and
``approve``'s parse-time check touch Airflow, and only when called; the stages import none.
"""
