"""Every `datatables.*` metric once, for tests/lineage/test_metrics.py: run with `airflow dags test`.

Import a file and wait for its read (imports, credits_spent, bytes_uploaded, wait_seconds), replace
the table's data with the same bytes twice with ``skip_if_unchanged``: the first is sent (there is
no record of the table's bytes yet), the second is not (imports_skipped).
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_tables.operators.tables import DataTablesImportOperator, DataTablesReplaceOperator

FILE = os.environ.get("DT_METRICS_FILE", "orders.csv")

with DAG("dt_metrics", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    made = DataTablesImportOperator(task_id="import", file_path=FILE, poll_interval=0.2, timeout=60)
    first = DataTablesReplaceOperator(
        task_id="replace", card_id=made.output, file_path=FILE, skip_if_unchanged=True, poll_interval=0.2, timeout=60
    )
    again = DataTablesReplaceOperator(
        task_id="replace_again",
        card_id=made.output,
        file_path=FILE,
        skip_if_unchanged=True,
        poll_interval=0.2,
        timeout=60,
    )
    made >> first >> again
