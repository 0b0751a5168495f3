"""Run whenever a table finishes a successful read, whoever refreshed it (an event-driven DAG).

The table's asset carries an ``AssetWatcher`` whose trigger,
``DataTablesTableRefreshedTrigger``, watches the table from the triggerer: a refresh made
through the service's application, by a connector or by another DAG all start this DAG.
Watchers share the triggerer's listing of the department with every other wait there.

An Airflow import or replace of the same table also records an event on this asset when it
ends, so for a refresh made by Airflow the DAG may run once for each of the two events (when
the scheduler sees them apart). Schedule on ``table_asset(...)`` without a watcher to react to
Airflow's own refreshes only.

Environment: ``DATATABLES_PROJECT_ID``, ``DATATABLES_WATCHED_CARD_ID`` and
``DATATABLES_SERVICE`` (the base URL of the service, the host of ``datatables_default``),
``DATATABLES_POLL_INTERVAL`` (seconds between looks, default 60).
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG, Asset, AssetWatcher, task

from airflow_tables.assets import table_asset
from airflow_tables.triggers.tables import DataTablesTableRefreshedTrigger

PROJECT_ID = os.environ.get("DATATABLES_PROJECT_ID", "PRJ-DEMO")
CARD_ID = os.environ.get("DATATABLES_WATCHED_CARD_ID", "CRD-00000000-0000-4000-8000-000000000000")
SERVICE = os.environ.get("DATATABLES_SERVICE", "http://127.0.0.1:8765")
POLL_INTERVAL = float(os.environ.get("DATATABLES_POLL_INTERVAL", "60"))

# [START howto_datatables_watch_refresh]
# [START howto_trigger_datatables_table_refreshed]
table = table_asset(PROJECT_ID, CARD_ID, service=SERVICE)
refreshed = Asset(
    name=table.name,
    uri=table.uri,
    group="datatables",
    watchers=[
        AssetWatcher(
            name="datatables_refresh",
            trigger=DataTablesTableRefreshedTrigger(
                project_id=PROJECT_ID, card_id=CARD_ID, poll_interval=POLL_INTERVAL
            ),
        )
    ],
)
# [END howto_trigger_datatables_table_refreshed]

with DAG(
    dag_id="example_datatables_watch_refresh",
    schedule=[refreshed],
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["example", "datatables"],
    doc_md=__doc__,
) as dag:

    @task
    def report_refresh(triggering_asset_events=None) -> list[dict]:
        """The events that started this run: one per refresh, with the table's CardID, rows and read time."""
        seen = []
        for events in (triggering_asset_events or {}).values():
            for event in events:
                extra = event.extra or {}
                payload = extra.get("payload", extra)  # a watcher's event keeps the trigger's payload
                card, when, rows = payload.get("card_id"), payload.get("completion_time"), payload.get("rows")
                print(f"{card} refreshed at {when}: {rows} rows")
                seen.append({"card_id": card, "completion_time": when})
        return seen

    report_refresh()
# [END howto_datatables_watch_refresh]
