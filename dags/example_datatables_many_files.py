"""Import every CSV under an object-storage prefix as a table of its own: one mapped task per file.

The files are read where they land (S3 here; GCS or Azure the same way), through Airflow's
object storage and the connection named in the URI: ``s3://aws_default@landing/exports/``
reads bucket ``landing`` with connection ``aws_default`` (``pip install
'airflow-tables[s3]'``). Each file is its own task instance: it is validated (a bad file
fails alone and costs nothing), imported once, and waited for in the triggerer; a retry or
a resumed wait of one file never touches another, and never imports twice. Tables are
named after the files. docs/sources.md says how many files one deployment takes at once.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow.sdk import DAG, Param, task

from airflow_tables.operators.tables import DataTablesImportOperator

LANDING = os.environ.get("DATATABLES_LANDING_PREFIX", "s3://aws_default@landing/exports/")
POLL_INTERVAL = float(os.environ.get("DATATABLES_POLL_INTERVAL", "30"))

# [START howto_datatables_many_files]
with DAG(
    dag_id="example_datatables_many_files",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["example", "datatables"],
    doc_md=__doc__,
    # Files validated and uploaded at once (each holds a worker slot and up to 512 MiB of temporary
    # disk while it does); deferred waits are not counted here, so every file can wait at once.
    max_active_tasks=8,
    params={
        "prefix": Param(LANDING, type="string", description="where the CSV files are (a URI with its connection)"),
        "encoding": Param(None, type=["null", "string"], description="their encoding, when not UTF-8"),
    },
) as dag:

    @task
    def list_csv_files(params: dict | None = None) -> list[dict]:
        """One set of arguments per ``*.csv`` under the prefix; URIs keep the connection (``s3://conn@bucket/key``)."""
        from airflow.sdk import ObjectStoragePath

        params = params or {}
        prefix = ObjectStoragePath(params["prefix"])
        files = sorted(str(path) for path in prefix.rglob("*") if path.suffix.lower() == ".csv")
        print(f"{len(files)} CSV file(s) under {prefix}")
        return [{"file_path": file, "encoding": params["encoding"]} for file in files]

    DataTablesImportOperator.partial(
        task_id="import_file",
        deferrable=True,  # the wait holds no worker slot
        poll_interval=POLL_INTERVAL,
        timeout=6 * 3600,
        retries=3,  # per file: a retry re-attaches to the table its first try imported
        retry_delay=timedelta(minutes=1),
    ).expand_kwargs(list_csv_files())
# [END howto_datatables_many_files]
