"""An import and a sensor that defer, for tests/packaged/test_upgrade.py (deferred by one release, resumed by the next).

Environment: ``UPGRADE_CSV`` (the file to import), ``UPGRADE_CARD_ID`` (the table the sensor waits on).
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_tables.operators.tables import DataTablesImportOperator
from airflow_tables.sensors.tables import DataTablesProcessedSensor

with DAG(dag_id="datatables_upgrade", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    DataTablesImportOperator(
        task_id="import_csv",
        file_path=os.environ.get("UPGRADE_CSV", "/nonexistent.csv"),
        deferrable=True,
        poll_interval=1,
    )
    DataTablesProcessedSensor(
        task_id="wait_for_table",
        card_id=os.environ.get("UPGRADE_CARD_ID", "CRD-00000000-0000-4000-8000-000000000000"),
        deferrable=True,
        poke_interval=1,
    )
