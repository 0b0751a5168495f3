"""Imports of many files into one table (``combine=``), for ``tests/sources/test_combine.py``.

The templates render as native objects, so ``parts`` may be a list of paths as well as one
pattern or prefix. Each task reads its own param; a test leaves the others empty (those fail at
once, before any request: the tasks are independent).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_tables.operators.tables import DataTablesImportOperator

TASK = {"poll_interval": 0.2, "timeout": 60, "retries": 0, "retry_delay": timedelta(0)}

with DAG(
    "dt_combine",
    params={"parts": "", "by_name": "", "retried": "", "one": ""},
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    render_template_as_native_obj=True,
) as combine:
    DataTablesImportOperator(
        task_id="combined", file_path="{{ params.parts }}", combine=True, table_name="orders", **TASK
    )
    DataTablesImportOperator(
        task_id="by_name", file_path="{{ params.by_name }}", combine="by_name", table_name="orders_by_name", **TASK
    )
    DataTablesImportOperator(  # one retry at once: a lost answer's next try
        task_id="retried",
        file_path="{{ params.retried }}",
        combine=True,
        table_name="orders_retried",
        **{**TASK, "retries": 1},
    )
    DataTablesImportOperator(  # no combine: a name that reads as a pattern is one file if one is named so
        task_id="one", file_path="{{ params.one }}", table_name="orders_one", **TASK
    )
