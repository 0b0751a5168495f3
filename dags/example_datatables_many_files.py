"""Import every CSV under an object-storage prefix as a table of its own: one mapped task per file.

The files are read where they land (S3 here; GCS or Azure the same way), through Airflow's
object storage and the connection named in the URI: ``s3://aws_default@landing/exports/``
reads bucket ``landing`` with connection ``aws_default`` (``pip install
'airflow-tables[s3]'``). Each file is its own task instance: it is validated (a bad file
fails alone and costs nothing), imported once, and waited for in the triggerer; a retry or
a resumed wait of one file never touches another, and never imports twice. Each table is
named after the file's path below the prefix (``d1/orders.csv`` becomes ``d1.orders``), so two
``orders.csv`` in two folders never make two tables of one name, which neither people nor a
retry after a lost answer could tell apart. docs/sources.md says how many files one deployment
takes at once.

Whoever triggers the DAG picks the folder, so the folder is bounded three times: the trigger
form accepts only folders under the landing prefix (its ``pattern``: no other connection,
bucket or ``..``), the listing checks it against the same prefix, and the import tasks read
only from it (``allowed_sources=``), within whatever the deployment's ``[datatables]
allowed_sources`` allows (docs/sources.md, "Security").
"""

from __future__ import annotations

import os
import re
from datetime import datetime, timedelta

from airflow.sdk import DAG, Param, task

from airflow_tables.operators.tables import DataTablesImportOperator

LANDING = os.environ.get("DATATABLES_LANDING_PREFIX", "s3://aws_default@landing/exports/").rstrip("/") + "/"
# The landing prefix, then folders whose names do not start with a dot (so never '..'). Escaped by
# hand: a JSON Schema pattern may also be compiled by JavaScript, where re.escape's "\-" is an error.
FOLDERS = "^" + re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", LANDING) + r"(?:[A-Za-z0-9_=-][A-Za-z0-9_.=-]*/)*$"
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
        "prefix": Param(
            LANDING, type="string", pattern=FOLDERS, description=f"where the CSV files are: {LANDING} or a folder in it"
        ),
        "encoding": Param(None, type=["null", "string"], description="their encoding, when not UTF-8"),
    },
) as dag:

    def table_name(prefix, path) -> str:
        """The file's path below the prefix, folders joined by dots, no ``.csv``: ``d1/orders.csv`` is ``d1.orders``.

        A table name holds no slash: the service keeps only the last part of a file name.
        """
        below = str(path)[len(str(prefix).rstrip("/")) + 1 :]
        return os.path.splitext(below)[0].replace("/", ".")

    @task
    def list_csv_files(params: dict | None = None) -> list[dict]:
        """One set of arguments per ``*.csv`` under the prefix; URIs keep the connection (``s3://conn@bucket/key``)."""
        from airflow.sdk import ObjectStoragePath

        from airflow_tables.sources.allowed import check

        params = params or {}
        check(params["prefix"], allowed=[LANDING])  # before the listing: the form's pattern, checked again here
        prefix = ObjectStoragePath(params["prefix"])
        files = sorted(path for path in prefix.rglob("*") if path.suffix.lower() == ".csv")
        print(f"{len(files)} CSV file(s) under {prefix}")
        return [
            {"file_path": str(path), "encoding": params["encoding"], "table_name": table_name(prefix, path)}
            for path in files
        ]

    DataTablesImportOperator.partial(
        task_id="import_file",
        allowed_sources=[LANDING],  # each file, as it is opened: where the listing found it, nowhere else
        deferrable=True,  # the wait holds no worker slot
        poll_interval=POLL_INTERVAL,
        timeout=6 * 3600,
        retries=3,  # per file: a retry re-attaches to the table its first try imported
        retry_delay=timedelta(minutes=1),
    ).expand_kwargs(list_csv_files())
# [END howto_datatables_many_files]
