"""The "Data Tables" page and the task instance's "Table" tab in the real Airflow UI, in Chromium.

* The navigation's Browse > "Data Tables" opens the page (an iframe of ``/datatables/``),
  which shows a ready table that a DAG imported (naming the DAG, with a link to its run that
  opens the run in Airflow), a table whose reading failed and one still being read; while
  that one is read the page asks the server again every refresh interval.
* The import task's "Table" tab shows its table and state.
* The JSON routes and the pages answer 401 without a login and 403 to a viewer, who may not
  read connections; the page's HTML, scripts and JSON never hold the API key.
* Kept open at 1024x768 (issue 27), one DAG run whose read fails feeds it all: its table
  appears without a reload, turns from "Being read" to "Failed" with the service's reason
  and its DAG, its credit joins "credits spent by Airflow" exactly as the emulator counted
  it; the table's page shows its columns and types and the import; columns sort, rows take
  the keyboard, the state lives in the URL, nothing overflows and no ``null`` shows.
* While the service answers 503 with ``Retry-After: 300`` the page answers within 5 s with the
  last listing, its age and the error, and the api-server's health endpoint answers meanwhile.

Screenshots: ``artifacts/e2e/datatables-ui-*.png`` (those of docs/ui.md are copied from there).
"""

from __future__ import annotations

import json
import re
import threading
import time
from urllib.parse import quote

import pytest
import requests

from .conftest import BUDGET, UI_REFRESH_SECONDS, datatables_connection
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
    credits = frame.locator("section[data-conn-id='datatables_default'] .credits").inner_text()
    assert re.search(r"Credits spent by Airflow: [1-9]\d* today", credits), credits
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
        f"/datatables/api/table?conn_id=datatables_default&card_id={tables['ready']}",
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


# -- a page kept open (issue 27) --------------------------------------------------------------------

REASON = "Column 2 of row 4 holds text where the column is numeric."
SECTION = "section[data-conn-id='datatables_default']"
NARROW = {"width": 1024, "height": 768}


def credits_today(page) -> int:
    text = page.locator(f"{SECTION} .credits").inner_text()
    found = re.search(r"Credits spent by Airflow: ([\d,]+) today", text)
    assert found, text
    return int(found.group(1).replace(",", ""))


def budget_today(page) -> tuple[int, int, int]:
    """The budget line: the department's budget, what its ledger claimed today, what is left."""
    text = page.locator(f"{SECTION} .credits").inner_text()
    found = re.search(r"Budget: ([\d,]+) a day; ([\d,]+) claimed today, ([\d,]+) left\.", text)
    assert found, text
    budget, claimed, left = (int(group.replace(",", "")) for group in found.groups())
    return budget, claimed, left


def no_overflow(frame_or_page) -> None:
    width = frame_or_page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert width[0] <= width[1], f"the page is {width[0]} px wide in a {width[1]} px window"


def no_null(text: str) -> None:
    assert not re.search(r"\bnull\b|\bundefined\b|\bNaN\b", text), text


def test_a_page_kept_open_follows_a_failed_import_live(airflow_stack, airflow_api, emulator, tables, page, browser):
    """One DAG run after the page loaded: live appearance, state change, reason, DAG, credits, the table's page."""
    page.set_viewport_size(NARROW)
    page.goto(f"{airflow_stack.base_url}/datatables/", wait_until="domcontentloaded")
    page.locator(f"{SECTION} .credits").wait_for(timeout=30_000)
    before_credits, before_imports = credits_today(page), emulator.stats()["imports_accepted"]
    budget, claimed, left = budget_today(page)
    assert (budget, left) == (BUDGET, BUDGET - claimed) and claimed >= 1  # the fixtures' own run claimed one
    known = set(page.locator(f"{SECTION} tr[data-card-id]").evaluate_all("rows => rows.map(r => r.dataset.cardId)"))

    emulator.set_processing_delay(6)
    emulator.set_fail_readings(1, REASON)
    try:
        run_id = airflow_api.trigger(UI_DAG)
        new_row = page.locator(f"{SECTION} tr[data-card-id][data-state='being_read']").filter(has_text=UI_DAG)
        new_row.first.wait_for(timeout=120_000)  # no reload: the page polls
        card_id = new_row.first.get_attribute("data-card-id")
        assert card_id not in known
        row = page.locator(f"{SECTION} tr[data-card-id='{card_id}']")
        page.locator(f"{SECTION} tr[data-card-id='{card_id}'][data-state='failed']").wait_for(timeout=60_000)
        row.locator(".reason").filter(has_text=REASON).wait_for(timeout=30_000)
        assert UI_DAG in row.inner_text()
        state = airflow_api.wait_for_run(UI_DAG, run_id, timeout=180, check=airflow_stack.check_alive)
        assert state == "failed", airflow_api.run_report(UI_DAG, run_id)
        row.locator(".outcome-failed").wait_for(timeout=30_000)  # the task's end, too, without a reload
    finally:
        emulator.set_fail_readings(0)
        emulator.set_processing_delay(3600)
    spent = emulator.stats()["imports_accepted"] - before_imports
    assert spent == 1
    deadline = time.monotonic() + 30
    while credits_today(page) != before_credits + spent:
        assert time.monotonic() < deadline, (credits_today(page), before_credits, spent)
        page.wait_for_timeout(500)
    # The worker's claim reached the ledger through the api-server, and the page counts it.
    assert budget_today(page) == (BUDGET, claimed + spent, left - spent)
    no_overflow(page)
    no_null(page.inner_text("body"))
    browser.screenshot("datatables-ui-live.png", full_page=False)

    # Sorting, by click; its state in the URL survives a reload.
    page.locator(f"{SECTION} th button[data-sort='rows']").click()
    page.locator(f"{SECTION} th[aria-sort='descending']:has(button[data-sort='rows'])").wait_for(timeout=10_000)
    page.wait_for_url(re.compile(r"sort=rows"))
    page.reload(wait_until="domcontentloaded")
    page.locator(f"{SECTION} th[aria-sort='descending']:has(button[data-sort='rows'])").wait_for(timeout=30_000)
    counts = page.locator(f"{SECTION} td.col-rows").evaluate_all(
        "cells => cells.map(c => c.textContent.replace(/,/g, '')).filter(t => t !== '').map(Number)"
    )
    assert counts == sorted(counts, reverse=True), counts

    # The keyboard: rows take focus, arrows move it, Enter opens the table's page, Escape comes back.
    search = page.locator(f"{SECTION} input[name='q']")
    search.fill(card_id)
    page.locator(f"{SECTION} tr[data-card-id='{card_id}']").wait_for(timeout=30_000)
    page.wait_for_url(re.compile(r"q=CRD"))
    page.locator(f"{SECTION} tr[data-card-id='{card_id}']").focus()
    page.keyboard.press("Enter")
    page.locator("#table-state").wait_for(timeout=30_000)
    assert page.locator("#table-state").inner_text() == "Failed"
    assert REASON in page.locator("#table-reason").inner_text()
    made = page.locator(f"table.imports tr[data-run-id='{run_id}']")
    assert made.get_attribute("data-outcome") == "failed" and UI_DAG in made.inner_text()
    assert "card_id=" in page.url
    no_overflow(page)
    no_null(page.inner_text("body"))
    page.keyboard.press("Escape")
    page.locator(f"{SECTION} tr[data-card-id]").first.wait_for(timeout=30_000)
    assert "card_id=" not in page.url

    # A table read well, opened from a shared link: its columns and their types, and the import.
    page.goto(f"{airflow_stack.base_url}/datatables/?conn_id=datatables_default&card_id={tables['ready']}")
    page.locator("table.columns tbody tr").first.wait_for(timeout=30_000)
    columns = page.locator("table.columns tbody tr").evaluate_all(
        "rows => rows.map(r => [r.cells[0].textContent, r.cells[1].textContent])"
    )
    assert ["order_id", "long"] in columns and all(kind for _, kind in columns), columns
    recorded = page.locator(f"table.imports tr[data-run-id='{tables['run_id']}']")
    assert recorded.get_attribute("data-outcome") == "recorded" and UI_DAG in recorded.inner_text()
    no_overflow(page)
    no_null(page.inner_text("body"))
    browser.screenshot("datatables-ui-table.png", full_page=True)

    # In the Airflow UI itself, at 1024 px, the iframe's page fits too.
    page.goto(f"{airflow_stack.base_url}/plugin/datatables", wait_until="domcontentloaded")
    frame = page.frame_locator("iframe[title='Data Tables']")
    frame.locator(f"{SECTION} tr[data-card-id]").first.wait_for(timeout=30_000)
    inner = next(f for f in page.frames if "/datatables/" in f.url)
    no_overflow(inner)
    page.set_viewport_size({"width": 1440, "height": 1000})


def test_the_task_table_tab_prints_no_null(airflow_stack, tables, page):
    """As served, then with every optional field empty (a connection without app_url, a table not yet read)."""
    run = quote(tables["run_id"], safe="")
    url = f"{airflow_stack.base_url}/datatables/task?dag_id={UI_DAG}&run_id={run}&task_id={TASK}&map_index=-1"
    page.goto(url)
    page.locator("#task-table-state").wait_for(timeout=30_000)
    no_null(page.inner_text("body"))

    def emptied(route) -> None:
        body = route.fetch().json()
        body["table"].update(app_link=None, name=None, rows=None, completed=None, connector=None, last=None)
        route.fulfill(json=body)

    page.route("**/datatables/api/task?*", emptied)
    try:
        page.goto(url)
        page.locator("#task-table-state").wait_for(timeout=30_000)
        assert "Open in Data Tables" not in page.inner_text("body")
        no_null(page.inner_text("body"))
    finally:
        page.unroute("**/datatables/api/task?*")


def test_a_503_with_retry_after_leaves_the_page_and_the_api_server_answering(
    airflow_stack, emulator, tables, page, browser
):
    admin = {"Authorization": f"Bearer {airflow_stack.token('admin')}"}
    url = f"{airflow_stack.base_url}/datatables/api/tables?conn_id=datatables_default"
    assert requests.get(url, headers=admin, timeout=30).json()["total"] > 0  # a listing to fall back on
    emulator.set_faults([{"path": r"/cards$", "methods": ["GET"], "status": 503, "retry_after": 300}])
    health: list[float] = []
    stop = threading.Event()

    def watch_health() -> None:
        while not stop.is_set():
            started = time.monotonic()
            resp = requests.get(f"{airflow_stack.base_url}/api/v2/monitor/health", timeout=30)
            health.append(time.monotonic() - started if resp.ok else float("inf"))
            stop.wait(0.5)

    watcher = threading.Thread(target=watch_health, daemon=True)
    watcher.start()
    try:
        deadline = time.monotonic() + UI_REFRESH_SECONDS * 10
        while True:  # the next listing after the interval meets the 503
            started = time.monotonic()
            body = requests.get(url, headers=admin, timeout=30).json()
            assert time.monotonic() - started < 5, "a page request waited on the service"
            if body["error"]:
                break
            assert time.monotonic() < deadline, body
            time.sleep(0.3)
        assert "503" in body["error"] and body["total"] > 0 and body["error_at"] >= body["as_of"]
        page.goto(f"{airflow_stack.base_url}/datatables/", wait_until="domcontentloaded")
        started = time.monotonic()
        page.locator(f"{SECTION} [data-role='service-error']").wait_for(timeout=5_000)
        assert time.monotonic() - started < 5
        assert "503" in page.locator(f"{SECTION} [data-role='service-error']").inner_text()
        assert "ago" in page.locator(f"{SECTION} [data-role='stale-listing']").inner_text()
        assert page.locator(f"{SECTION} tr[data-card-id]").count() > 0
        browser.screenshot("datatables-ui-service-503.png", full_page=False)
    finally:
        stop.set()
        watcher.join(10)
        emulator.clear_faults()
    assert health and max(health) < 5, health
