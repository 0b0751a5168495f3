"""An event-driven DAG on the real stack: a replacement made straight on the service starts it.

``example_datatables_watch_refresh`` schedules on the watched table's asset, whose
``AssetWatcher`` runs ``DataTablesTableRefreshedTrigger`` in the real triggerer. The test
replaces the table's data directly on the emulator (as a person in the application would),
and the DAG must run once, with the table's CardID in the triggering event.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest
import requests

from .harness import wait_until

DAG_ID = "example_datatables_watch_refresh"

pytestmark = pytest.mark.timeout(600)


def dag_runs(airflow_api, dag_id: str) -> list[dict]:
    return airflow_api.get(f"/api/v2/dags/{quote(dag_id, safe='')}/dagRuns", params={"limit": 50})["dag_runs"]


def test_a_refresh_made_on_the_service_starts_the_watching_dag(
    airflow_stack, airflow_api, datatables_emulator, watched_table
):
    if datatables_emulator is None:
        pytest.skip("airflow_tables.emulator.testing is missing")
    emulator = datatables_emulator
    emulator.wait_until_processed(emulator.project_id, watched_table, timeout=60)
    airflow_api.wait_for_dag(DAG_ID, timeout=120, check=airflow_stack.check_alive)
    airflow_api.unpause(DAG_ID)
    assert dag_runs(airflow_api, DAG_ID) == []

    # The watcher is running once the triggerer looks at the table's department.
    emulator.reset_stats()

    def watching() -> bool:
        return any(r["method"] == "GET" and r["path"].endswith("/cards") for r in emulator.stats()["requests"])

    wait_until(watching, timeout=120, what="the refresh watcher's first look", check=airflow_stack.check_alive)

    resp = requests.post(
        f"{emulator.base_url}/v1.0/data/import",
        headers={"X-API-Key": emulator.api_key},
        data={"ProjectID": emulator.project_id, "CardID": watched_table},
        files={"File": ("watched.csv", b"id,region\n1,North\n2,South\n3,East\n", "text/csv")},
        timeout=30,
    )
    resp.raise_for_status()

    runs = wait_until(
        lambda: dag_runs(airflow_api, DAG_ID), timeout=180, what=f"a run of {DAG_ID}", check=airflow_stack.check_alive
    )
    run_id = runs[0]["dag_run_id"]
    state = airflow_api.wait_for_run(DAG_ID, run_id, timeout=180, check=airflow_stack.check_alive)
    assert state == "success", airflow_api.run_report(DAG_ID, run_id)
    seen = airflow_api.xcom(DAG_ID, run_id, "report_refresh")
    assert [event["card_id"] for event in seen] == [watched_table]
    assert len(dag_runs(airflow_api, DAG_ID)) == 1
