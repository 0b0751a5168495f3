"""The approval path of ``on_schema_change="approve"`` end to end (tests/e2e/test_approval_e2e.py).

``import_orders`` imports the repo's orders file; ``drop_column`` writes the same file without its
last column (``returned``); ``replace`` would then remove that column from the table, so it asks a
person (human-in-the-loop) and waits ("awaiting input" on Airflow 3.3, deferred below) until the
test answers through the REST API.
Waits for reads run on the worker (not deferred): the test shortens the emulator's reading time.
"""

from __future__ import annotations

import csv
import tempfile
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG, task

from airflow_tables.operators.tables import DataTablesImportOperator, DataTablesReplaceOperator

ORDERS = Path(__file__).resolve().parents[3] / "dags" / "data" / "orders.csv"

with DAG(dag_id="e2e_approval", schedule=None, start_date=datetime(2024, 1, 1), catchup=False, tags=["e2e"]):
    imported = DataTablesImportOperator(
        task_id="import_orders", file_path=str(ORDERS), deferrable=False, poll_interval=0.5, timeout=120
    )

    @task
    def drop_column() -> str:
        out = Path(tempfile.mkdtemp(prefix="e2e-approval-")) / "orders.csv"
        with open(ORDERS, newline="", encoding="utf-8") as src, open(out, "w", newline="", encoding="utf-8") as dst:
            writer = csv.writer(dst)
            writer.writerows(row[:-1] for row in csv.reader(src))
        return str(out)

    imported >> DataTablesReplaceOperator(
        task_id="replace",
        card_id="{{ ti.xcom_pull(task_ids='import_orders') }}",
        file_path=drop_column(),
        on_schema_change="approve",
        approval_timeout=300,
        deferrable=False,
        poll_interval=0.5,
        timeout=120,
    )
