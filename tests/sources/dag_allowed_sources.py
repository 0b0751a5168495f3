"""A DAG whose import and replace may read only from ``DATATABLES_TEST_ALLOWED`` (``allowed_sources=``).

``tests/sources/test_allowed.py`` copies it to the dags folder (dag.test() runs DAGs from
there) after setting the variable; the file to read comes in through params, as a trigger
form would send it.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_tables.operators.tables import DataTablesImportOperator, DataTablesReplaceOperator

ALLOWED = [os.environ.get("DATATABLES_TEST_ALLOWED", "/nonexistent")]
# Retries that would be used if a refusal were not final.
TASK = {"allowed_sources": ALLOWED, "poll_interval": 0.2, "timeout": 60, "retries": 2, "retry_delay": timedelta(0)}

with DAG(
    "dt_import_allowed_sources",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    params={"file_path": "", "card_id": "CRD-never-sent"},
) as dag:
    DataTablesImportOperator(task_id="import", file_path="{{ params.file_path }}", **TASK)
    DataTablesReplaceOperator(
        task_id="replace", file_path="{{ params.file_path }}", card_id="{{ params.card_id }}", **TASK
    )
