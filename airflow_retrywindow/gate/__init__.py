"""The gate over a DAG run's targets, as a straight pipeline: read a snapshot of the
run, observe each target, decide with the model (capacity and budget included), and
record the decision. The operator and the sensor are thin Airflow classes over it.

* :mod:`~airflow_retrywindow.gate.run` - the orchestration, top to bottom
  (``decide_run``), and the gate's settings;
* :mod:`~airflow_retrywindow.gate.targets` - the targets as tasks of the gate's DAG,
  and the estimates each is decided on;
* :mod:`~airflow_retrywindow.gate.read` - read: one snapshot of the run from the API,
  its task instances (one per map index) and what Airflow's states say of a try;
* :mod:`~airflow_retrywindow.gate.observe` - observe: each task instance as model
  facts, explicit observations included;
* :mod:`~airflow_retrywindow.gate.decide` - decide: fixtures, the model, and the pool
  (:mod:`~airflow_retrywindow.gate.capacity`) and budget
  (:mod:`~airflow_retrywindow.gate.budget`) verdicts;
* :mod:`~airflow_retrywindow.gate.approve` - a person's approval: read and judged;
* :mod:`~airflow_retrywindow.gate.record` - record: the decision record and status update;
* :mod:`~airflow_retrywindow.gate.arguments` - the arguments the operator and sensor share.

Each stage imports only the stages before it. Only ``run`` and ``targets`` touch
Airflow, and only when called; the stages import none.
"""
