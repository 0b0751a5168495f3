"""Imports of compressed files, for ``tests/sources/test_compressed_imports.py``: validated, and sent unchecked.

Each task reads its own file (params), so one run can import a file both ways, or a test can
leave a task's file empty and look at the other alone.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_tables.operators.tables import DataTablesImportOperator

TASK = {"poll_interval": 0.2, "timeout": 60, "retries": 0, "retry_delay": timedelta(0)}

with DAG(
    "dt_compressed",
    params={"validated": "", "unchecked": ""},
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
) as compressed:
    DataTablesImportOperator(task_id="validated", file_path="{{ params.validated }}", **TASK)
    DataTablesImportOperator(task_id="unchecked", file_path="{{ params.unchecked }}", validate=False, **TASK)
