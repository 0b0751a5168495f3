"""Load a day's folder of ``.csv.gz`` part files into one table: one upload, one credit.

Exporters and Spark jobs write a day as many parts (``part-00000.csv.gz``, ...). With
``combine=True`` the import operator takes the folder's pattern as one table's parts: each part
is decompressed and validated on its own (an error names the part and its line), the headers
must name the same columns in the same order (``combine="by_name"`` allows any order), the header
is written once, and the whole is held to the service's 512 MB before anything is sent. The
day's table is replaced each run, keeping its CardID; ``skip_if_unchanged`` skips a day whose
parts did not change (its fingerprint covers every part, in order). The parts may as well sit
in object storage: ``s3://aws_default@landing/orders/{{ ds }}/`` reads every file under that
prefix (``pip install 'airflow-tables[s3]'``).
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_tables.operators.tables import DataTablesImportOperator

LANDING = os.environ.get("DATATABLES_PARTS_FOLDER", "/data/landing/orders")
POLL_INTERVAL = float(os.environ.get("DATATABLES_POLL_INTERVAL", "30"))

# [START howto_datatables_day_parts]
with DAG(
    dag_id="example_datatables_day_parts",
    schedule="@daily",
    start_date=datetime(2026, 11, 1),
    catchup=False,
    tags=["example", "datatables"],
    doc_md=__doc__,
) as dag:
    DataTablesImportOperator(
        task_id="import_day",
        file_path=LANDING + "/{{ ds }}/part-*.csv.gz",
        combine=True,
        table_name="orders_{{ ds_nodash }}",
        deferrable=True,
        poll_interval=POLL_INTERVAL,
        retries=2,
    )
# [END howto_datatables_day_parts]
