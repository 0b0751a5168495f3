"""A DAG whose imports check an object in every way that reads it, for ``tests/sources/test_read_once.py``.

Each task reads its own object (params), so the test can count the GET requests each one made:
validation, a replacement's fingerprint (``skip_if_unchanged``) and its column types (the schema
check), and a replacement that checks only the column types (``validate=False``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_tables.operators.tables import DataTablesImportOperator, DataTablesReplaceOperator

TASK = {"poll_interval": 0.2, "timeout": 60, "retries": 0, "retry_delay": timedelta(0)}

ARGS = {"schedule": None, "start_date": datetime(2026, 1, 1), "catchup": False}

with DAG("dt_read_once", params={"validated": "", "everything": "", "card_id": ""}, **ARGS) as checked:
    validated = DataTablesImportOperator(task_id="validated", file_path="{{ params.validated }}", **TASK)
    everything = DataTablesReplaceOperator(
        task_id="everything",
        file_path="{{ params.everything }}",
        card_id="{{ params.card_id }}",
        skip_if_unchanged=True,
        on_schema_change="fail",
        **TASK,
    )
    validated >> everything

with DAG("dt_read_once_types", params={"typed": "", "card_id": ""}, **ARGS) as types_only:
    DataTablesReplaceOperator(
        task_id="typed",
        file_path="{{ params.typed }}",
        card_id="{{ params.card_id }}",
        validate=False,
        on_schema_change="fail",
        **TASK,
    )
