"""Issue 40 point 3: the Data Tables page says how many rows an import set aside, and where.

A real DAG run quarantines two bad rows of a file into a rejects file whose (templated) path holds
``<script>`` and quotes; its asset event carries ``bad_rows`` and ``rejects``. Events that other
tasks' records would make (one row set aside in an http(s) file, twelve in S3, none bad, no
quarantine, a ``javascript:`` location) are recorded on the same table's asset, signed with the
connection's key as the operators sign theirs. The page's JSON is read through the plugin's
FastAPI app, and the page itself is rendered by headless Chromium (the e2e tests' browser) from
that app served on 127.0.0.1.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlencode

import pytest
from tests._dag_files import imported as imported_dag_file
from tests.operators._runs import run, state, xcom
from tests.plugins.conftest import default_connection
from tests.plugins.test_app import allowed

from airflow_tables.assets import UploadRecord, table_ref
from airflow_tables.plugins.models import TableDetailPage, TablesPage
from airflow_tables.plugins.monitor import Monitor

HEADER = b"order_id,region,amount,note\n"
#: A directory and a file name that make the rejects path ``.../<script>alert("x")</script>'.csv``.
HOSTILE_DIR = 'it\'s "quoted" <script>alert("x")<'
HOSTILE_FILE = "script>'.rejects.csv"
WEB_REJECTS = "https://files.example/rejects/orders.rejects.csv?run=a%22b&x=1"
S3_REJECTS = "s3://rejects-bucket/orders/2026-05-20.rejects.csv"
SCRIPT_URL = "javascript:alert(1)"
#: Events recorded by hand: run id -> (bad_rows, rejects); the last one recorded is the table's last import.
OTHERS = {
    "web_one": (1, WEB_REJECTS),
    "clean": (0, None),
    "no_quarantine": (None, None),
    "scripted": (3, SCRIPT_URL),
    "s3_twelve": (12, S3_REJECTS),
}
OTHER_DAG = "dt_other_quarantine"


@pytest.fixture(scope="module")
def quarantined(dags_module, emulator, tmp_path_factory):
    """A real run of ``br_quarantine`` that set two rows aside, and events of other imports of its table.

    Returns (dag_run, card_id, rejects path).
    """
    folder = tmp_path_factory.mktemp("bad_rows_ui")
    source = folder / "orders.csv"
    good = [b"%d,North,%d,x\n" % (i, 10 + i) for i in range(1, 9)]
    source.write_bytes(HEADER + b"".join(good[:3]) + b"98,North\n" + b"".join(good[3:]) + b"99,South,5,x,extra\n")
    rejects = folder / HOSTILE_DIR / HOSTILE_FILE
    rejects.parent.mkdir()
    br_dags = imported_dag_file("bad_rows_test_dags.py")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AIRFLOW_CONN_DATATABLES_DEFAULT", default_connection(emulator))
        dag_run = run(br_dags, "br_quarantine", file_path=str(source), rejects_path=str(rejects))
    assert state(dag_run, "import") == "success"
    card_id = xcom(dag_run, "import")
    assert isinstance(card_id, str) and card_id.startswith("CRD-"), card_id
    assert xcom(dag_run, "import", key="bad_rows") == {"count": 2, "rejects": str(rejects)}
    assert rejects.read_text(encoding="utf-8").count("field-count") == 2
    record_others(emulator, card_id)
    return dag_run, card_id, str(rejects)


def record_others(emulator, card_id: str) -> None:
    """Signed upload records of other imports of the table, each with its own quarantine, on its asset."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    ref = table_ref(emulator.project_id, card_id, service=emulator.base_url)
    at = datetime.now(UTC) - timedelta(days=1)
    with create_session() as session:
        asset_id = session.scalar(select(AssetModel.id).where(AssetModel.uri == ref.uri))
        assert asset_id is not None, f"the run recorded no event on {ref.uri}"
        for n, (run_id, (bad_rows, rejects)) in enumerate(OTHERS.items()):
            extra = UploadRecord(
                ref.service,
                ref.project_id,
                ref.card_id,
                fingerprint="xxh3-128:ab:64",
                bad_rows=bad_rows,
                rejects=rejects,
                dag_id=OTHER_DAG,
                task_id="import",
                run_id=run_id,
            ).to_extra(emulator.api_key)
            session.add(
                AssetEvent(
                    asset_id=asset_id,
                    extra=extra,
                    timestamp=at + timedelta(minutes=n),
                    source_dag_id=OTHER_DAG,
                    source_task_id="import",
                    source_run_id=run_id,
                    source_map_index=-1,
                )
            )


def test_an_import_that_set_rows_aside_says_how_many_and_where_in_the_json(quarantined, datatables_conn):
    dag_run, card_id, rejects = quarantined
    http = allowed(Monitor(30, base_path="/airflow", ui_timeout=30))
    resp = http.get("/api/table?" + urlencode({"conn_id": "datatables_default", "card_id": card_id}))
    assert resp.status_code == 200, resp.text
    page = TableDetailPage.model_validate_json(resp.content)
    by_run = {made.run_id: made for made in page.imports}
    real = by_run[dag_run.run_id]
    assert (real.bad_rows, real.rejects, real.outcome) == (2, rejects, "recorded")
    assert "<script>" in real.rejects, "the path is given as the task wrote it, not escaped twice"
    assert {run_id: (by_run[run_id].bad_rows, by_run[run_id].rejects) for run_id in OTHERS} == OTHERS

    listing = TablesPage.model_validate_json(
        http.get("/api/tables?" + urlencode({"conn_id": "datatables_default", "q": card_id})).content
    )
    (row,) = [r for r in listing.rows if r.card_id == card_id]
    assert (row.last.run_id, row.last.bad_rows, row.last.rejects) == ("s3_twelve", 12, S3_REJECTS)


def test_an_import_without_a_quarantine_carries_no_count(imported, datatables_conn):
    dag_run, card_id = imported
    http = allowed(Monitor(30, base_path="/airflow", ui_timeout=30))
    page = TableDetailPage.model_validate_json(
        http.get("/api/table?" + urlencode({"conn_id": "datatables_default", "card_id": card_id})).content
    )
    (made,) = [i for i in page.imports if i.run_id == dag_run.run_id]
    assert (made.bad_rows, made.rejects) == (None, None)


# -- the page as Chromium renders it ------------------------------------------------------------------


@pytest.fixture
def served(datatables_conn):
    """The plugin's app served on 127.0.0.1 (Airflow's authorisation allowing everything); yields its URL."""
    import uvicorn

    app = allowed(Monitor(30, base_path="/airflow", ui_timeout=30)).app
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the app did not start serving"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        listener.close()


@pytest.fixture
def browser():
    """Headless Chromium as the e2e tests drive it (tests/e2e/harness.py)."""
    from tests.e2e.harness import CHROMIUM, Browser

    if not Path(CHROMIUM).exists():
        reason = f"{CHROMIUM} is missing (scripts/system-deps.sh installs it): the page's rendering is not tested"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    b = Browser().start()
    try:
        yield b
    finally:
        b.stop()


def bad_rows_cell(page, run_id: str):
    return page.locator(f'tr[data-run-id="{run_id}"] td[data-role="bad-rows"]')


def test_the_table_page_shows_rows_set_aside_with_a_link_or_the_path_never_markup(quarantined, served, browser):
    dag_run, card_id, rejects = quarantined
    page = browser.page
    errors: list[str] = []
    # Script errors and CSP refusals; a failed load is named by its response (the browser asks for a favicon).
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    failed: list[str] = []
    page.on("response", lambda response: failed.append(response.url) if response.status >= 400 else None)
    page.goto(f"{served}/?" + urlencode({"conn_id": "datatables_default", "card_id": card_id}))
    real = bad_rows_cell(page, dag_run.run_id)
    real.wait_for()
    assert page.locator("table.imports th").all_inner_texts()[-1] == "Bad rows"

    # The real run: two rows, a local path shown as text to copy, never a link, never parsed as HTML.
    assert real.locator(".set-aside").inner_text() == "2 rows set aside"
    path = real.locator("code.rejects-path")
    assert path.text_content() == rejects and path.get_attribute("title") == rejects
    assert real.locator("a").count() == 0
    assert real.evaluate("cell => [...cell.querySelectorAll('*')].map(e => e.tagName)") == [
        "SPAN",
        "BR",
        "SPAN",
        "CODE",
    ]
    assert page.evaluate("document.querySelectorAll('script').length") == 2, "only the page's own two scripts"
    assert page.evaluate("window.getSelection().toString()") == ""
    path.click()  # one click selects the whole path, ready to copy
    assert page.evaluate("window.getSelection().toString()") == rejects

    # One row in an https file: a link opening it; S3 and a javascript: location: text.
    web = bad_rows_cell(page, "web_one")
    assert web.locator(".set-aside").inner_text() == "1 row set aside"
    assert web.locator("a").get_attribute("href") == WEB_REJECTS and web.locator("a").inner_text() == WEB_REJECTS
    s3 = bad_rows_cell(page, "s3_twelve")
    assert s3.locator(".set-aside").inner_text() == "12 rows set aside"
    assert s3.locator("a").count() == 0 and s3.locator("code.rejects-path").text_content() == S3_REJECTS
    scripted = bad_rows_cell(page, "scripted")
    assert scripted.locator("a").count() == 0 and scripted.locator("code").text_content() == SCRIPT_URL
    # None bad: muted words; no quarantine: nothing.
    clean = bad_rows_cell(page, "clean")
    assert clean.inner_text() == "no bad rows" and clean.locator(".muted").count() == 1
    assert bad_rows_cell(page, "no_quarantine").inner_text() == ""

    # The list names the last import's count; the rejects location is its title.
    page.goto(f"{served}/?" + urlencode({"conn_id": "datatables_default", "q": card_id}))
    note = page.locator(f'tr[data-card-id="{card_id}"] td.col-import .set-aside')
    note.wait_for()
    assert note.inner_text() == "12 rows set aside" and note.get_attribute("title") == f"Rejects: {S3_REJECTS}"
    assert {url.removeprefix(served) for url in failed} <= {"/favicon.ico"}
    assert [e for e in errors if not e.startswith("Failed to load resource")] == []
