"""An event-driven DAG on the real stack: a replacement made straight on the service starts it, once.

``example_datatables_watch_refresh`` schedules on the watched table's asset, whose
``AssetWatcher`` runs ``DataTablesTableRefreshedTrigger`` in the real triggerer. The tests
replace the table's data directly on the emulator (as a person in the application would);
the DAG must run once per refresh, with the table's CardID and the read's completion time
in the triggering event: before the triggerer is SIGKILLed, while it is down, after it is
back, and with two triggerers, one of them killed while the other takes the watch over.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest
import requests

from .conftest import EMULATOR_PROCESSING_DELAY
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


def replace_on_the_service(emulator, card_id: str, rows: int) -> str:
    """Replace the table's data straight on the service and wait for the read; its completion time."""
    body = "id,region\n" + "".join(f"{i},North\n" for i in range(rows))
    resp = requests.post(
        f"{emulator.base_url}/v1.0/data/import",
        headers={"X-API-Key": emulator.api_key},
        data={"ProjectID": emulator.project_id, "CardID": card_id},
        files={"File": ("watched.csv", body.encode(), "text/csv")},
        timeout=30,
    )
    resp.raise_for_status()
    return emulator.wait_until_processed(emulator.project_id, card_id, timeout=60)["UploadCompletionTime"]


def reported(airflow_api) -> list[str]:
    """The completion times of the refreshes that started a run, over every run, oldest run first."""
    times = []
    for run in sorted(dag_runs(airflow_api, DAG_ID), key=lambda r: r["run_after"]):
        if airflow_api.wait_for_run(DAG_ID, run["dag_run_id"], timeout=180) != "success":
            raise AssertionError(airflow_api.run_report(DAG_ID, run["dag_run_id"]))
        times += [event["completion_time"] for event in airflow_api.xcom(DAG_ID, run["dag_run_id"], "report_refresh")]
    return times


def alive_triggerers(postgres) -> list[int]:
    return [row[0] for row in postgres.query(LIVE_TRIGGERERS)]


def started_triggerer(stack, postgres, name: str) -> int:
    """Start a triggerer as component ``name``; its job id, once it has registered."""
    known = set(alive_triggerers(postgres))
    stack.start_component(name, "triggerer")
    new = wait_until(
        lambda: set(alive_triggerers(postgres)) - known, timeout=120, what=f"{name} to start", check=stack.check_alive
    )
    return new.pop()


LIVE_TRIGGERERS = "SELECT id FROM job WHERE job_type = 'TriggererJob' AND end_date IS NULL AND state = 'running'"
#: The triggerer (job id) running the DAG's watcher, from the trigger row Airflow assigns to one triggerer.
WATCH_HOLDER = (
    "SELECT t.triggerer_id FROM trigger t JOIN asset_watcher w ON w.trigger_id = t.id"
    " WHERE w.name = 'datatables_refresh'"
)


def test_each_refresh_starts_one_run_across_a_killed_triggerer_and_two_triggerers(
    airflow_stack, airflow_api, datatables_emulator, watched_table, postgres
):
    if datatables_emulator is None:
        pytest.skip("airflow_tables.emulator.testing is missing")
    emulator, stack = datatables_emulator, airflow_stack
    airflow_api.wait_for_dag(DAG_ID, timeout=120, check=stack.check_alive)
    airflow_api.unpause(DAG_ID)
    before = reported(airflow_api)  # the refresh of the test above, when it ran: reported, never again

    emulator.reset_stats()
    wait_until(lambda: emulator.stats()["requests"], timeout=120, what="the watch's look", check=stack.check_alive)
    # Reads of 2 s (completion times have whole seconds; the stack's 10 s are for deferring tasks' sake).
    emulator.set_processing_delay(2.0)
    try:
        watched_across_kills(stack, airflow_api, emulator, postgres, watched_table, before)
    finally:  # the stack as the tests after this one expect it, whatever happened: one triggerer, 10 s reads
        emulator.set_processing_delay(EMULATOR_PROCESSING_DELAY)
        if "triggerer" not in stack.processes:
            stack.start_component("triggerer")
        if "triggerer-2" in stack.processes:
            stack.stop_component("triggerer-2")
    wait_until(stack._healthy, timeout=120, what="the stack to be healthy again", interval=1.0, check=stack.check_alive)


def watched_across_kills(stack, airflow_api, emulator, postgres, watched_table: str, before: list[str]) -> None:
    def run_for(completion_time: str, what: str) -> None:
        wait_until(
            lambda: completion_time in reported(airflow_api),
            timeout=120,
            what=f"the run for the refresh {what} (read at {completion_time})",
            check=stack.check_alive,
        )

    refreshes = [replace_on_the_service(emulator, watched_table, 2)]
    run_for(refreshes[-1], "before the kill")

    # SIGKILLed: no clean-up runs. The table is refreshed while no triggerer is up.
    stack.kill("triggerer")
    refreshes.append(replace_on_the_service(emulator, watched_table, 3))
    # Back, with a second triggerer: both may take the dead one's watch once its heartbeat is stale.
    jobs = {started_triggerer(stack, postgres, "triggerer"): "triggerer"}
    jobs[started_triggerer(stack, postgres, "triggerer-2")] = "triggerer-2"
    run_for(refreshes[-1], "made while the triggerer was down")
    refreshes.append(replace_on_the_service(emulator, watched_table, 4))
    run_for(refreshes[-1], "with two triggerers")

    # The triggerer running the watch is killed; the other one takes it over.
    (holder,) = postgres.query(WATCH_HOLDER)[0]
    assert holder in jobs, (holder, jobs)
    stack.kill(jobs[holder])
    refreshes.append(replace_on_the_service(emulator, watched_table, 5))
    run_for(refreshes[-1], f"made after {jobs[holder]}, which ran the watch, was killed")
    assert postgres.query(WATCH_HOLDER)[0][0] not in (holder, None)

    assert len(set(refreshes)) == len(refreshes)
    assert reported(airflow_api) == before + refreshes  # one event per refresh, none twice, in order
