"""Imports of compressed, Parquet and JSON Lines files: validated, sent unchecked, and declared as JSON Lines.

For ``tests/sources/test_compressed_imports.py`` and ``test_tabular_imports.py``. Each task
reads its own file (params), so one run can import a file several ways, or a test can leave a
task's file empty and look at another alone (a task given no file fails at once; the tasks are independent).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_tables.operators.tables import DataTablesImportOperator

TASK = {"poll_interval": 0.2, "timeout": 60, "retries": 0, "retry_delay": timedelta(0)}

with DAG(
    "dt_formats",
    params={"validated": "", "unchecked": "", "jsonl": ""},
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
) as formats:
    DataTablesImportOperator(task_id="validated", file_path="{{ params.validated }}", **TASK)
    DataTablesImportOperator(task_id="unchecked", file_path="{{ params.unchecked }}", validate=False, **TASK)
    DataTablesImportOperator(task_id="jsonl", file_path="{{ params.jsonl }}", input_format="jsonl", **TASK)
