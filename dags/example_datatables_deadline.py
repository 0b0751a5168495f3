"""The orders table is read by 07:00 UTC; if it is not, say why (a deadline alert with DataTablesFreshnessNotifier).

Each day at midnight UTC the run waits (deferred, no worker held) for the orders table to
finish a read after the run's logical date, then uses it. The run's deadline is 07:00: if the
run has not succeeded by then, Airflow calls ``DataTablesFreshnessNotifier`` in the
triggerer, which looks at the table once and says what state it is in: still being read, read
badly (with the service's own reason), or stale since its last read. It logs the sentence as a
warning (override ``send`` to pass it to chat or mail).

Environment: ``DATATABLES_PROJECT_ID`` and ``DATATABLES_DAILY_CARD_ID`` (the table
``example_datatables_daily_replace`` refreshes), ``DATATABLES_POLL_INTERVAL`` (seconds between
looks, default 60).
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow.sdk import DAG, task

# Exported by airflow.sdk from Airflow 3.2; this path holds them on 3.1 too.
from airflow.sdk.definitions.deadline import AsyncCallback, DeadlineAlert, DeadlineReference

from airflow_tables.notifiers import DataTablesFreshnessNotifier
from airflow_tables.sensors.tables import DataTablesProcessedSensor

PROJECT_ID = os.environ.get("DATATABLES_PROJECT_ID", "PRJ-DEMO")
CARD_ID = os.environ.get("DATATABLES_DAILY_CARD_ID", "CRD-00000000-0000-4000-8000-000000000000")
POLL_INTERVAL = float(os.environ.get("DATATABLES_POLL_INTERVAL", "60"))
#: From the run's logical date (midnight UTC) to the time the table must be read by.
READ_BY = timedelta(hours=7)

# [START howto_datatables_deadline]
with DAG(
    dag_id="example_datatables_deadline",
    schedule="0 0 * * *",  # midnight (the default timezone, UTC unless configured): the logical date
    start_date=datetime(2026, 1, 1),
    catchup=False,
    deadline=DeadlineAlert(
        reference=DeadlineReference.DAGRUN_LOGICAL_DATE,
        interval=READ_BY,
        # Runs in the triggerer; the kwargs are templated against the deadline's context (the run as JSON).
        callback=AsyncCallback(
            DataTablesFreshnessNotifier,
            kwargs={
                "card_id": CARD_ID,
                "project_id": PROJECT_ID,
                "completed_after": "{{ dag_run.logical_date }}",
            },
        ),
    ),
    tags=["example", "datatables"],
    doc_md=__doc__,
) as dag:
    # Today's read, not yesterday's: only a read that finished after the logical date counts.
    wait_for_orders = DataTablesProcessedSensor(
        task_id="wait_for_orders",
        project_id=PROJECT_ID,
        card_id=CARD_ID,
        completed_after="{{ logical_date }}",
        deferrable=True,
        poke_interval=POLL_INTERVAL,
        timeout=READ_BY.total_seconds(),
    )

    @task
    def use_orders(summary: dict) -> int:
        """The table is fresh: use it (here, report its rows)."""
        print(f"orders read at {summary.get('UploadCompletionTime')}: {summary.get('Rows')} rows")
        return int(summary.get("Rows") or 0)

    use_orders(wait_for_orders.output)  # type: ignore[arg-type]  # an XComArg: the summary at run time
# [END howto_datatables_deadline]
