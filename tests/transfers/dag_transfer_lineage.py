"""One transfer from PostgreSQL, for tests/transfers/test_lineage.py: run with `airflow dags test`."""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_tables.transfers.sql_to_datatables import SqlToDataTablesOperator

with DAG("dt_transfer_lineage", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    SqlToDataTablesOperator(
        task_id="transfer",
        sql=f"SELECT id, name FROM {os.environ.get('DT_TRANSFER_TABLE', 'missing')} ORDER BY id",
        conn_id="transfer_pg",
        table_name="lineage_transfer",
        poll_interval=0.2,
        timeout=60,
    )
