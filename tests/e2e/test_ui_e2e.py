"""The "Data Tables" page and the task instance's "Table" tab in the real Airflow UI, in Chromium.

* The navigation's Browse > "Data Tables" opens the page (an iframe of ``/datatables/``),
  which shows a ready table that a DAG imported (naming the DAG, with a link to its run that
  opens the run in Airflow), a table whose reading failed and one still being read; while
  that one is read the page asks the server again every refresh interval.
* The import task's "Table" tab shows its table and state.
* The JSON routes and the pages answer 401 without a login and 403 to a viewer, who may not
  read connections; the page's HTML, scripts and JSON never hold the API key.

Screenshots: ``artifacts/e2e/datatables-ui-*.png``.
"""

from __future__ import annotations

import json
import re
from urllib.parse import quote

import pytest
import requests

from .conftest import UI_REFRESH_SECONDS, datatables_connection
from .harness import REPO

UI_DAG = "e2e_datatables_ui"  # tests/e2e/dags/e2e_datatables_ui.py
TASK = "import_orders"

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def emulator(datatables_emulator):
    if datatables_emulator is None:
        pytest.skip("airflow_tables.emulator.testing is missing")
    return datatables_emulator


def import_directly(emulator) -> str:
    """A table imported outside Airflow (the test process's own hook), so no DAG is named for it."""
    from airflow_tables.hooks.tables import DataTablesHook

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AIRFLOW_CONN_DATATABLES_E2E_UI", json.dumps(datatables_connection(emulator)))
        return DataTablesHook("datatables_e2e_ui").import_csv(None, REPO / "dags" / "data" / "orders.csv")


@pytest.fixture(scope="module")
def tables(airflow_stack, airflow_api, emulator):
    """A ready table imported by a DAG run, a failed one and one being read (for an hour)."""
    airflow_api.wait_for_dag(UI_DAG, timeout=120, check=airflow_stack.check_alive)
    airflow_api.unpause(UI_DAG)
    emulator.set_processing_delay(1)
    try:
        run_id = airflow_api.trigger(UI_DAG)
        state = airflow_api.wait_for_run(UI_DAG, run_id, timeout=180, check=airflow_stack.check_alive)
        assert state == "success", airflow_api.run_report(UI_DAG, run_id)
        ready = airflow_api.xcom(UI_DAG, run_id, TASK)
        emulator.set_fail_readings(1)
        failed = import_directly(emulator)
        emulator.wait_until_processed(emulator.project_id, failed)
        emulator.set_processing_delay(3600)
        reading = import_directly(emulator)
        yield {"run_id": run_id, "ready": ready, "failed": failed, "reading": reading}
    finally:
        emulator.reset_settings()


def test_nav_entry_opens_the_page_with_each_state_and_the_importing_dag(airflow_stack, tables, page, browser):
    page.goto(f"{airflow_stack.base_url}/", wait_until="domcontentloaded")
    page.get_by_role("button", name="Browse").click()
    page.get_by_role("menuitem", name="Data Tables").click()
    page.wait_for_url(re.compile(r"/plugin/datatables"))
    frame = page.frame_locator("iframe[title='Data Tables']")

    expected = {tables["ready"]: "Ready", tables["failed"]: "Failed", tables["reading"]: "Being read"}
    for card_id, label in expected.items():
        row = frame.locator(f"tr[data-card-id='{card_id}']")
        row.wait_for(timeout=30_000)
        assert row.locator(".badge").inner_text() == label, card_id
    ready_row = frame.locator(f"tr[data-card-id='{tables['ready']}']")
    assert UI_DAG in ready_row.inner_text() and TASK in ready_row.inner_text()
    assert "not by Airflow" in frame.locator(f"tr[data-card-id='{tables['failed']}']").inner_text()
    summary = frame.locator("section[data-conn-id='datatables_default'] .summary").inner_text()
    assert re.search(r"\d+ Ready, [1-9]\d* Being read, [1-9]\d* Failed", summary), summary
    assert re.search(r"Credits spent by Airflow: [1-9]\d* today", summary), summary
    browser.screenshot("datatables-ui-page.png", full_page=False)

    # While a table is being read, the page asks again every refresh interval by itself.
    for _ in range(2):
        with page.expect_request(
            lambda request: "/datatables/api/tables" in request.url, timeout=UI_REFRESH_SECONDS * 3000
        ):
            pass

    # The DAG link leaves the iframe and opens the run in the Airflow UI itself.
    ready_row.get_by_role("link", name=UI_DAG).click()
    page.wait_for_url(re.compile(rf"/dags/{UI_DAG}/runs/"))
    assert quote(tables["run_id"], safe="") in page.url or tables["run_id"] in page.url


def test_task_instance_table_tab_shows_the_table_and_its_state(airflow_stack, tables, page, browser):
    run = quote(tables["run_id"], safe="")
    page.goto(f"{airflow_stack.base_url}/dags/{UI_DAG}/runs/{run}/tasks/{TASK}", wait_until="domcontentloaded")
    page.get_by_role("link", name="Table", exact=True).click()
    frame = page.frame_locator("iframe[title='Table']")
    frame.locator("#task-table-state").wait_for(timeout=30_000)
    assert frame.locator("#task-table-state").inner_text() == "Ready"
    assert tables["ready"] in frame.locator("main").inner_text()
    browser.screenshot("datatables-ui-task-table.png", full_page=False)


def routes(tables) -> list[str]:
    task = f"dag_id={UI_DAG}&run_id={quote(tables['run_id'], safe='')}&task_id={TASK}&map_index=-1"
    return [
        "/datatables/",
        f"/datatables/task?{task}",
        "/datatables/api/connections",
        "/datatables/api/tables?conn_id=datatables_default",
        f"/datatables/api/task?{task}",
    ]


def test_the_plugin_loads_once_without_import_errors(airflow_api):
    names = [plugin["name"] for plugin in airflow_api.get("/api/v2/plugins")["plugins"]]
    assert names.count("datatables") == 1, names
    errors = airflow_api.get("/api/v2/plugins/importErrors")["import_errors"]
    assert not [e for e in errors if "datatables" in json.dumps(e)], errors


def test_routes_refuse_anonymous_and_unauthorised_users(airflow_stack, tables):
    viewer = {"Authorization": f"Bearer {airflow_stack.token('viewer')}"}
    admin = {"Authorization": f"Bearer {airflow_stack.token('admin')}"}
    for path in routes(tables):
        url = airflow_stack.base_url + path
        assert requests.get(url, timeout=30).status_code == 401, path
        assert requests.get(url, headers=viewer, timeout=30).status_code == 403, path
        assert requests.get(url, headers=admin, timeout=30).status_code == 200, path
    # The viewer may read assets and DAGs: it is the connections it may not read that close the page.
    assert requests.get(f"{airflow_stack.base_url}/api/v2/assets", headers=viewer, timeout=30).status_code == 200


def test_pages_scripts_and_json_never_hold_the_key(airflow_stack, emulator, tables):
    admin = {"Authorization": f"Bearer {airflow_stack.token('admin')}"}
    paths = [*routes(tables), "/datatables/static/common.js", "/datatables/static/index.js"]
    paths += [f"/datatables/api/tables?conn_id=datatables_default&state={s}" for s in ("ready", "failed", "being_read")]
    seen = {}
    for path in paths:
        resp = requests.get(airflow_stack.base_url + path, headers=admin, timeout=30)
        assert resp.status_code == 200, (path, resp.status_code)
        seen[path] = resp.text
    assert emulator.api_key not in "\n".join(seen.values())
    listed = json.loads(seen["/datatables/api/tables?conn_id=datatables_default"])
    assert {tables["ready"], tables["failed"], tables["reading"]} <= {row["card_id"] for row in listed["rows"]}


def test_rendered_page_never_holds_the_key(airflow_stack, emulator, tables, page):
    page.goto(f"{airflow_stack.base_url}/datatables/", wait_until="domcontentloaded")
    page.locator(f"tr[data-card-id='{tables['ready']}']").wait_for(timeout=30_000)
    assert emulator.api_key not in page.content()
