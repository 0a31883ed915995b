"""The gate over a DAG run's targets, as a straight pipeline: read a snapshot of the
run, observe each target, decide with the model (capacity and budget included), and
record the decision. The operator and the sensor are thin Airflow classes over it.
"""
