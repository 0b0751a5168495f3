"""Run whenever the daily table has been refreshed (scheduled on its Asset)."""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG, task

from airflow_tables.assets import table_asset

PROJECT_ID = os.environ.get("DATATABLES_PROJECT_ID", "PRJ-DEMO")
CARD_ID = os.environ.get("DATATABLES_DAILY_CARD_ID", "CRD-00000000-0000-4000-8000-000000000000")
# The service the table lives on (the host of the tasks' connection): a table's asset names its
# service, so that two services with the same department ids are never confused. Naming it here
# keeps the DAG file from reading a connection each time it is parsed.
SERVICE = os.environ.get("DATATABLES_SERVICE", "http://127.0.0.1:8765")

# [START howto_datatables_on_refresh]
with DAG(
    dag_id="example_datatables_on_refresh",
    schedule=[table_asset(PROJECT_ID, CARD_ID, service=SERVICE)],
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["example", "datatables"],
    doc_md=__doc__,
) as dag:

    @task
    def report_refresh() -> dict:
        """The table was just refreshed and read: use it (here, log its summary)."""
        from airflow_tables.hooks.tables import DataTablesHook

        table = DataTablesHook().get_card(PROJECT_ID, CARD_ID)
        print(f"{table['CardName']} refreshed at {table['UploadCompletionTime']}: {table['Rows']} rows")
        return {key: table[key] for key in ("CardID", "Rows", "UploadCompletionTime")}

    report_refresh()
# [END howto_datatables_on_refresh]
