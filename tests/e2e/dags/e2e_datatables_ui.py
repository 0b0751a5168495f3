"""The Data Tables page's end-to-end tests import a table with this DAG, so the page names it.

It waits in the worker (not deferred): the test shortens the emulator's reading time, and
a wait that short would race the deferral (see EMULATOR_PROCESSING_DELAY in conftest.py).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG

from airflow_tables.operators.tables import DataTablesImportOperator

ORDERS = Path(__file__).resolve().parents[3] / "dags" / "data" / "orders.csv"

with DAG(dag_id="e2e_datatables_ui", schedule=None, start_date=datetime(2024, 1, 1), catchup=False, tags=["e2e"]):
    DataTablesImportOperator(
        task_id="import_orders", file_path=str(ORDERS), deferrable=False, poll_interval=0.5, timeout=120
    )
