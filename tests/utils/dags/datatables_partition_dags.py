"""A replace whose asset event carries a partition key, and a partitioned consumer of the table (Airflow 3.2+).

The table, its department and its service come from the environment the test sets before the
file is parsed: a consumer is scheduled on one table's asset, known at parse time.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG, task

from airflow_tables.assets import table_asset
from airflow_tables.operators.tables import DataTablesReplaceOperator

PROJECT_ID = os.environ.get("DT_PARTITION_PROJECT_ID", "PRJ-test")
CARD_ID = os.environ.get("DT_PARTITION_CARD_ID", "CRD-00000000-0000-4000-8000-000000000000")
SERVICE = os.environ.get("DT_PARTITION_SERVICE", "http://127.0.0.1:8765")

with DAG(
    "dt_partition_replace",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    params={"file_path": "", "region": ""},
) as producer:
    DataTablesReplaceOperator(
        task_id="replace",
        project_id=PROJECT_ID,
        card_id=CARD_ID,
        file_path="{{ params.file_path }}",
        partition_key="{{ params.region }}",  # empty: the run's own key, if it has one
        poll_interval=0.2,
        timeout=60,
    )

try:  # Airflow 3.2+
    from airflow.sdk import PartitionedAssetTimetable
except ImportError:  # Airflow 3.1: no partitions
    PartitionedAssetTimetable = None

if PartitionedAssetTimetable is not None:
    with DAG(
        "dt_partition_consumer",
        schedule=PartitionedAssetTimetable(assets=table_asset(PROJECT_ID, CARD_ID, service=SERVICE)),
        start_date=datetime(2026, 1, 1),
        catchup=False,
    ) as consumer:

        @task
        def use_partition(partition_key=None) -> str | None:
            return partition_key

        use_partition()

with DAG(
    "dt_ordinary_consumer",
    schedule=[table_asset(PROJECT_ID, CARD_ID, service=SERVICE)],  # not partition-aware
    start_date=datetime(2026, 1, 1),
    catchup=False,
) as ordinary_consumer:

    @task
    def use_table() -> None:
        return None

    use_table()
