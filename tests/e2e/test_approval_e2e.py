"""``on_schema_change="approve"`` in the real stack: the run waits for a person's answer, given through the REST API.

A DAG run (tests/e2e/dags/e2e_approval.py) imports the orders file, then replaces the table with
the file less one column: the replace writes its approval form (Airflow's human-in-the-loop)
and waits ("awaiting input" on Airflow 3.3, deferred below). The test finds the form through the
REST API, photographs it in the Airflow UI (``docs/images/approval-form.png``, shown in
docs/operators.md), approves it through the REST API (``PATCH .../hitlDetails``) and the run ends
with the table replaced: one credit more, the column gone.
"""

from __future__ import annotations

import time
from urllib.parse import quote

import pytest

from .harness import REPO, wait_until

DAG_ID = "e2e_approval"
pytestmark = pytest.mark.timeout(600)  # the first e2e test of a session also starts the stack


@pytest.fixture
def reading_quickly(datatables_emulator):
    """The session's emulator reading each file in a second (the stack's default is 10)."""
    if datatables_emulator is None:
        pytest.skip("airflow_tables.emulator.testing is missing")
    datatables_emulator.set_processing_delay(1)
    yield datatables_emulator
    datatables_emulator.reset_settings()


def parked_try_seen(airflow_stack, run_id: str) -> bool:
    """Whether the scheduler has taken the executor's event for the try that parked on the form (its log says so)."""
    key = f"TaskInstanceKey(dag_id='{DAG_ID}', task_id='replace', run_id='{run_id}'"
    log = airflow_stack.log_dir / "scheduler.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    return any("Received executor event" in line and key in line for line in text.splitlines())


def wait_for_form(airflow_api, run_id: str, check, timeout: float = 120) -> dict:
    """The replace's approval form, once the task waits on it."""
    path = f"/api/v2/dags/{DAG_ID}/dagRuns/{quote(run_id, safe='')}/taskInstances/replace/-1/hitlDetails"
    deadline = time.monotonic() + timeout
    while True:
        check()
        states = {ti["task_id"]: ti["state"] for ti in airflow_api.task_instances(DAG_ID, run_id)}
        if states.get("replace") in ("awaiting_input", "deferred"):  # Airflow 3.3 / 3.1 and 3.2
            resp = airflow_api.request("GET", path, ok=(200, 404))
            if resp.status_code == 200:
                return resp.json()
        if states.get("replace") in ("failed", "success", "upstream_failed") or time.monotonic() > deadline:
            raise AssertionError(f"no approval form: {states}\n{airflow_api.run_report(DAG_ID, run_id)}")
        time.sleep(0.5)


def test_a_schema_change_waits_for_approval_given_through_the_rest_api(
    airflow_stack, airflow_api, reading_quickly, page, browser
):
    emulator = reading_quickly
    airflow_api.wait_for_dag(DAG_ID, timeout=120, check=airflow_stack.check_alive)
    airflow_api.unpause(DAG_ID)
    run_id = airflow_api.trigger(DAG_ID)
    form = wait_for_form(airflow_api, run_id, airflow_stack.check_alive)
    assert form["options"] == ["Approve", "Reject"] and "`returned: removed`" in form["body"]
    card_id = airflow_api.xcom(DAG_ID, run_id, "import_orders")
    credits = emulator.credits()

    run = quote(run_id, safe="")
    page.goto(f"{airflow_stack.base_url}/dags/{DAG_ID}/runs/{run}/tasks/replace/required_actions")
    page.get_by_text("returned: removed").first.wait_for(timeout=30_000)
    page.get_by_role("button", name="Approve").wait_for(timeout=30_000)
    browser.screenshot(REPO / "docs" / "images" / "approval-form.png", full_page=False)

    # A person answers seconds after the form appears; the test could answer before the scheduler has
    # taken the parked try's end from the executor, and Airflow 3.3 then fails the resumed task ("the
    # executor reported success, but the task instance is running"). Answer once it has.
    wait_until(
        lambda: parked_try_seen(airflow_stack, run_id),
        timeout=60,
        what="the scheduler to take the parked try's end",
        check=airflow_stack.check_alive,
    )
    path = f"/api/v2/dags/{DAG_ID}/dagRuns/{run}/taskInstances/replace/-1/hitlDetails"
    answer = airflow_api.request("PATCH", path, json={"chosen_options": ["Approve"]}).json()
    assert answer["chosen_options"] == ["Approve"]

    state = airflow_api.wait_for_run(DAG_ID, run_id, timeout=120, check=airflow_stack.check_alive)
    assert state == "success", airflow_api.run_report(DAG_ID, run_id)
    assert credits - emulator.credits() == 1
    detail = emulator.request("GET", f"/v1.0/projects/{emulator.project_id}/cards/{card_id}", key=emulator.api_key)[1]
    assert "returned" not in [c["ColumnName"] for c in detail["Columns"]] and detail["Processed"] is True
