"""Development tooling: a real Airflow started natively, and the commands that use it.

Not part of the provider (the wheel ships ``airflow_retrywindow`` only). Run the
entry points as modules from the repository root, as the Makefile does:

* ``python -m devstack.demo`` (``make demo``): the example DAG end to end, headless;
* ``python -m devstack.up`` (``make up``, ``make up AIRFLOW=3.1``): ``airflow standalone``
  with the example DAGs;
* ``python -m devstack.distributed`` (``make test-distributed``): the example on
  CeleryExecutor, PostgreSQL and Redis.

:mod:`devstack.stack` starts and stops the services; :mod:`devstack.example`
holds what the example DAG must do on each kind of day. The end-to-end tests
import both. :mod:`devstack.job_service` is a stand-in remote job service that
counts submissions, for resumable operators. :mod:`devstack.bigquery_standin` is a
stand-in of the BigQuery jobs API for the real ``google-cloud-bigquery`` client (the
``google`` extra), with the jobs in :mod:`devstack.bigquery_jobs` and the credentials
in :mod:`devstack.google_credentials`.
"""
