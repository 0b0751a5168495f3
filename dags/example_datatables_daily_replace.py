"""Every day, replace one table's data with that day's file; the table keeps its CardID.

The table is published as an Asset (``datatables://<service>/<ProjectID>/<CardID>``), so
DAGs scheduled on it (see example_datatables_on_refresh) run after each refresh. The ids
come from the environment here (docs/examples.md); in your DAG they are the ids on the
service's API page.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG, task

from airflow_tables.operators.tables import DataTablesReplaceOperator

PROJECT_ID = os.environ.get("DATATABLES_PROJECT_ID", "PRJ-DEMO")
CARD_ID = os.environ.get("DATATABLES_DAILY_CARD_ID", "CRD-00000000-0000-4000-8000-000000000000")
DAILY_DIR = os.environ.get("DATATABLES_DAILY_DIR", "/tmp/datatables-daily")

# [START howto_datatables_daily_replace]
with DAG(
    dag_id="example_datatables_daily_replace",
    schedule="@daily",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["example", "datatables"],
    doc_md=__doc__,
    # Safe writes (docs/operators.md), for every replace of this DAG. A day's file that drops,
    # renames or retypes a column fails the replace before anything is sent ("approve" would ask
    # a person in the Airflow UI instead); a new column passes. A backfill of an earlier day never
    # puts its data over a later day's: that run's replace is skipped, sending nothing.
    default_args={"on_schema_change": "allow_new_columns", "if_older": "skip"},
) as dag:

    @task
    def extract(ds: str | None = None) -> str:
        """Stand-in for your extract: write the day's orders to a dated CSV."""
        import csv
        import random

        os.makedirs(DAILY_DIR, exist_ok=True)
        path = os.path.join(DAILY_DIR, f"orders_{ds}.csv")
        rng = random.Random(ds)
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["order_id", "order_date", "region", "amount"])
            for i in range(rng.randint(50, 150)):
                writer.writerow([i + 1, ds, rng.choice(["North", "South", "East", "West"]), rng.randint(5, 500)])
        return path

    # [START howto_operator_datatables_replace]
    # Waits if the table is still being read, replaces it, waits until the new file is read.
    # Each refresh records an event on the table's Asset (through the datatables-tables alias).
    replace = DataTablesReplaceOperator(
        task_id="replace_daily_orders",
        project_id=PROJECT_ID,
        card_id=CARD_ID,
        file_path=f"{DAILY_DIR}/orders_{{{{ ds }}}}.csv",
        deferrable=True,
        poll_interval=5,
    )
    # [END howto_operator_datatables_replace]

    extract() >> replace
# [END howto_datatables_daily_replace]
