"""DAGs of one real ``BigQueryInsertJobOperator`` each, for the BigQuery jobs API stand-in.

No retry policy: the provider's own behaviour, the baseline. Every operator has a
configured ``job_id`` and ``force_rerun=False``, so the job id is the configured
one plus the md5 of the configuration (labels included): the same on every try
unless the configured id carries the try (``bq_templated``). What each job does
is scripted in the stand-in by the job id's prefix, which is the DAG's ``JOB_IDS``
entry (no entry is the prefix of another).
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.providers.google.cloud.operators.bigquery import BigQueryInsertJobOperator
from airflow.sdk import DAG

START = pendulum.datetime(2026, 1, 1, tz="UTC")
CONFIGURATION = {"query": {"query": "SELECT 1", "useLegacySql": False}}
LOCATION = "EU"
#: DAG id -> the configured job id (a template for bq_templated)
JOB_IDS = {
    "bq_clean": "bq_clean",
    "bq_reused": "bq_reused",
    "bq_retried_same_id": "bq_same",
    "bq_templated": "bq_tmpl_a{{ ti.try_number }}",
    "bq_deferrable": "bq_deferred_ok",
    "bq_deferrable_error": "bq_deferred_error",
}
#: DAGs whose task has one retry
RETRIED = ("bq_retried_same_id", "bq_templated")


for dag_id, job_id in JOB_IDS.items():
    with DAG(dag_id, schedule=None, start_date=START, catchup=False) as dag:
        BigQueryInsertJobOperator(
            task_id="query",
            configuration=CONFIGURATION,
            job_id=job_id,
            force_rerun=False,
            location=LOCATION,
            deferrable=dag_id.startswith("bq_deferrable"),
            poll_interval=0.5,
            retries=1 if dag_id in RETRIED else 0,
            retry_delay=timedelta(seconds=1),
        )
    globals()[dag_id] = dag
