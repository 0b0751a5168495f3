"""The harness proves itself: a DAG of its own through the REST API, a deferral, the UI in Chromium."""

from __future__ import annotations

import pytest

from .harness import ARTIFACTS

DAG_ID = "e2e_smoke"  # tests/e2e/dags/e2e_smoke.py, loaded as the "e2e-smoke" bundle

pytestmark = pytest.mark.timeout(600)


def test_stack_is_healthy(airflow_stack):
    health = airflow_stack.health()
    for component in airflow_stack.HEALTH_KEYS:
        assert health[component]["status"] == "healthy", health


def test_smoke_dag_runs_and_defers_to_the_triggerer(airflow_stack, airflow_api):
    airflow_api.wait_for_dag(DAG_ID, timeout=120, check=airflow_stack.check_alive)
    airflow_api.unpause(DAG_ID)
    run_id = airflow_api.trigger(DAG_ID, conf={"from": "e2e"})

    state = airflow_api.wait_for_run(DAG_ID, run_id, timeout=180, check=airflow_stack.check_alive)

    report = airflow_api.run_report(DAG_ID, run_id)
    assert state == "success", report
    seen = airflow_api.observed_states(DAG_ID, run_id)
    assert "deferred" in seen["wait_in_triggerer"], report
    assert "deferred" not in seen["hello"], report
    assert airflow_api.xcom(DAG_ID, run_id, "hello") == "hello from a worker"
    assert airflow_api.xcom(DAG_ID, run_id, "wait_in_triggerer") == "woke up"
    # What run_report shows of a failed task: its log, as the API gives it.
    assert "hello is written to the task's log" in airflow_api.task_log(DAG_ID, run_id, "hello")
    conf = airflow_api.dag_run(DAG_ID, run_id)["conf"]
    assert conf == {"from": "e2e"}


def test_connections_round_trip_through_the_rest_api(airflow_api):
    airflow_api.set_connection("e2e_smoke_http", "http", host="http://127.0.0.1:1", extra={"a": 1})
    airflow_api.set_connection("e2e_smoke_http", "http", host="http://127.0.0.1:2", extra={"a": 2})
    conn = airflow_api.connection("e2e_smoke_http")
    assert conn["host"] == "http://127.0.0.1:2"
    assert '"a": 2' in conn["extra"]


def test_ui_home_and_add_connection_form_render(airflow_stack, page, browser):
    page.goto(f"{airflow_stack.base_url}/", wait_until="domcontentloaded")
    # Rendered, translated and with data: the navigation's "Dags" and the health panel's badges.
    page.get_by_role("link", name="Dags", exact=True).wait_for()
    for component in ("Scheduler", "Triggerer"):
        page.get_by_text(component, exact=True).first.wait_for()
    page.wait_for_load_state("networkidle")
    shot = browser.screenshot("smoke-home.png")
    assert shot.stat().st_size > 0

    page.goto(f"{airflow_stack.base_url}/connections", wait_until="domcontentloaded")
    page.get_by_role("button", name="Add Connection").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_text("Connection ID").wait_for()
    dialog.get_by_role("combobox").wait_for()
    browser.screenshot("smoke-add-connection.png")
    assert (ARTIFACTS / "smoke-add-connection.png").exists()
