"""Every Data Tables task once, for the OpenLineage events tests (tests/lineage): run with `airflow dags test`.

Import a file, replace the table's data (deferred wait: the COMPLETE event comes from the try that
resumes), wait on it with the sensor; delete another table; and an import that validation refuses
(a FAIL event); an import checked by a Great Expectations suite and one with a bad row set aside
(their data-quality facets); a file imported twice as the two parts of one table (``combine=``); a
dry run of a replace; and a task of the user's with a table's asset as its inlet. The files, the
table to delete and the inlet's URI come from the environment the test sets.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG, Asset, task

from airflow_tables.operators.tables import (
    DataTablesDeleteOperator,
    DataTablesImportOperator,
    DataTablesReplaceOperator,
)
from airflow_tables.sensors.tables import DataTablesProcessedSensor

with DAG("dt_lineage", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    made = DataTablesImportOperator(
        task_id="import", file_path=os.environ.get("DT_LINEAGE_FILE", "orders.csv"), poll_interval=0.2, timeout=60
    )
    replaced = DataTablesReplaceOperator(
        task_id="replace",
        card_id=made.output,
        file_path=os.environ.get("DT_LINEAGE_NEXT_FILE", "orders.csv"),
        deferrable=True,
        poll_interval=0.2,
        timeout=60,
    )
    read = DataTablesProcessedSensor(task_id="wait", card_id=made.output, poke_interval=0.2, timeout=60)
    made >> replaced >> read
    DataTablesReplaceOperator(  # a rehearsal: it reads the file and decides, and writes nothing
        task_id="rehearsed",
        card_id=made.output,
        file_path=os.environ.get("DT_LINEAGE_FILE", "orders.csv"),
        dry_run=True,
        if_older="replace",
    )

    DataTablesDeleteOperator(
        task_id="delete", card_id=os.environ.get("DT_LINEAGE_DROP_CARD", "CRD-unset"), poll_interval=0.2, timeout=60
    )

    DataTablesImportOperator(
        task_id="checked",
        file_path=os.environ.get("DT_LINEAGE_FILE", "orders.csv"),
        expectations={
            "name": "orders",
            "expectations": [{"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "order_id"}}],
        },
        wait_for_completion=False,
    )
    DataTablesImportOperator(
        task_id="quarantined",
        file_path=os.environ.get("DT_LINEAGE_RAGGED_FILE", "ragged.csv"),
        on_bad_rows="quarantine",
        wait_for_completion=False,
    )

    DataTablesImportOperator(
        task_id="combined",
        file_path=[os.environ.get("DT_LINEAGE_FILE", "orders.csv"), os.environ.get("DT_LINEAGE_FILE", "orders.csv")],
        combine=True,
        table_name="orders_twice",
        wait_for_completion=False,
    )

    @task(inlets=[Asset(os.environ.get("DT_LINEAGE_ASSET_URI", "datatables://LOCALHOST:8765/PRJ-test/CRD-unset"))])
    def report_on_table() -> None:
        """A task of the user's own that reads a table, declared as its inlet (spelled by hand)."""

    report_on_table()

    DataTablesImportOperator(task_id="refused", file_path=os.environ.get("DT_LINEAGE_BAD_FILE", "bad.csv"), retries=0)
