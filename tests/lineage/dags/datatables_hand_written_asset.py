"""A DAG scheduled on a table's asset written by hand, spelled differently from the operators' (issue 43).

`datatables://LOCALHOST:<port>/<ProjectID>/<CardID>`: the host in capitals and by name, where the
operators write `127.0.0.1`. The table, its department and the port come from the environment the
test sets before the file is parsed.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG, Asset, task

from airflow_tables.operators.tables import DataTablesReplaceOperator

HAND_WRITTEN = os.environ.get("DT_HAND_WRITTEN_URI", "datatables://LOCALHOST:8765/PRJ-test/CRD-unset")
PROJECT_ID = os.environ.get("DT_HAND_WRITTEN_PROJECT_ID", "PRJ-test")
CARD_ID = os.environ.get("DT_HAND_WRITTEN_CARD_ID", "CRD-unset")

with DAG(
    "dt_hand_written_producer", schedule=None, start_date=datetime(2026, 1, 1), catchup=False, params={"file_path": ""}
) as producer:
    DataTablesReplaceOperator(
        task_id="replace",
        project_id=PROJECT_ID,
        card_id=CARD_ID,
        file_path="{{ params.file_path }}",
        poll_interval=0.2,
        timeout=60,
    )

with DAG(
    "dt_hand_written_consumer", schedule=[Asset(HAND_WRITTEN)], start_date=datetime(2026, 1, 1), catchup=False
) as consumer:

    @task
    def use_table() -> None:
        return None

    use_table()
