"""The gate over a DAG run's targets, as a straight pipeline: read a snapshot of the
run, observe each target, decide with the model (capacity and budget included), and
record the decision. The operator and the sensor are thin Airflow classes over it.

* :mod:`~airflow_retrywindow.gate.run` - the orchestration, top to bottom
  (``decide_run``), and the gate's settings;
* :mod:`~airflow_retrywindow.gate.targets` - the targets as tasks of the gate's DAG;
* :mod:`~airflow_retrywindow.gate.instances` - a target's task instances (one per
  map index of a mapped target) and their model ids;
* :mod:`~airflow_retrywindow.gate.snapshot` - read: one snapshot of the run from the API;
* :mod:`~airflow_retrywindow.gate.airflow_states` - what Airflow's states say of a try;
* :mod:`~airflow_retrywindow.gate.observations` - explicit observations, as given;
* :mod:`~airflow_retrywindow.gate.observe` - observe: each target as model facts;
* :mod:`~airflow_retrywindow.gate.decide` - decide: fixtures, the model, capacity, budget;
* :mod:`~airflow_retrywindow.gate.capacity`, :mod:`~airflow_retrywindow.gate.budget` -
  the pool and budget verdicts;
* :mod:`~airflow_retrywindow.gate.record` - record: the decision record and status update;
* :mod:`~airflow_retrywindow.gate.arguments` - the arguments the operator and sensor share.

Only ``run`` and ``targets`` touch Airflow, and only when called; the stages import none.
"""
