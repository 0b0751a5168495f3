"""Import a messy daily orders export: the good rows become the table, the bad ones are set aside with why.

The export (``data/orders_export.csv`` here; your extract's file in practice) has 400 orders,
three of which the service would refuse or misread: an order id left as ``N/A``, a note with a
comma nobody quoted, a note pasted from a Windows-1252 spreadsheet. Refusing the whole file
for them would leave the day without a table; sending them would turn ``order_id`` into a text
column. With ``on_bad_rows="quarantine"`` the import sends the 397 good rows, byte for byte, and
writes each bad row, its line and what is wrong with it to a rejects CSV, one per day. More than
1 % of bad rows means the export itself is broken: then nothing is sent and no credit is spent.
The next task reads the import's XCom ``bad_rows`` and reports what was set aside.
See docs/operators/import.md, "Bad rows".

Connection ``datatables_default`` (docs/connection.md). Environment: ``DATATABLES_REJECTS_DIR``,
an existing directory or an object-storage prefix (``s3://aws_default@bucket/rejects``) where
the rejects files go (default ``/tmp``).
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG, XComArg, task

from airflow_tables.operators.tables import DataTablesImportOperator

EXPORT = Path(__file__).parent / "data" / "orders_export.csv"
REJECTS_DIR = os.environ.get("DATATABLES_REJECTS_DIR", "/tmp")

# [START howto_datatables_bad_rows]
with DAG(
    dag_id="example_datatables_bad_rows",
    schedule="@daily",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["example", "datatables"],
    doc_md=__doc__,
) as dag:
    # [START howto_operator_datatables_bad_rows]
    # Sends the good rows (one credit); each bad row goes to the day's rejects file instead.
    import_orders = DataTablesImportOperator(
        task_id="import_orders",
        file_path=str(EXPORT),
        table_name="orders_{{ ds_nodash }}",  # one table a day
        on_bad_rows="quarantine",
        max_bad_fraction=0.01,  # over 1 % bad: refuse the file, send nothing, no retry
        rejects_path=f"{REJECTS_DIR}/orders_export_{{{{ ds }}}}.rejects.csv",
        # An order id that is not a whole number makes its row bad, so the column stays long.
        column_types={"order_id": "long"},
        deferrable=True,
        poll_interval=2,
        timeout=600,
    )
    # [END howto_operator_datatables_bad_rows]

    @task
    def review_bad_rows(bad_rows: dict) -> dict:
        """Log what was set aside, row by row, and count it by code: the place to tell the export's owner."""
        import csv
        from collections import Counter

        from airflow.sdk import ObjectStoragePath

        where = bad_rows["rejects"]
        if not bad_rows["count"]:
            print("no bad row: the whole export was sent")
            return {"count": 0, "rejects": None, "by_code": {}}
        # A local path or a storage URI, as rejects_path was given.
        path = ObjectStoragePath(where if "://" in where else f"file://{where}")
        with path.open("r", encoding="utf-8", newline="") as f:
            rejects = list(csv.DictReader(f))  # line, byte_offset, code, message, column, record
        for row in rejects:
            print(f"line {row['line']}: {row['code']}: {row['message']}")
        by_code = dict(Counter(row["code"] for row in rejects))
        print(f"{bad_rows['count']} rows set aside in {where}: {by_code}")
        return {"count": bad_rows["count"], "rejects": where, "by_code": by_code}

    review_bad_rows(XComArg(import_orders, key="bad_rows"))  # type: ignore[arg-type]  # the dict at run time
# [END howto_datatables_bad_rows]
