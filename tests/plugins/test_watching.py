"""A page people keep open (issue 27): live listings at bounded cost, a table's page, every import attributed.

Through the plugin's FastAPI app (Airflow's authorisation dependencies allowing everything,
as in ``test_app.py``) against the shared emulator, with real DAG runs (``dag.test()``)
for what Airflow records. Faults the emulator injects (503 with ``Retry-After``, latency)
stand in for a service in trouble.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from urllib.parse import quote, urlencode

import pytest
from tests.conftest import APP_URL
from tests.operators._runs import import_table, orders_csv, run, state, xcom
from tests.plugins.conftest import default_connection
from tests.plugins.test_app import allowed

from airflow_tables.hooks.tables import DataTablesHook
from airflow_tables.model import TableSummary
from airflow_tables.plugins.events import Import, Schedule, interval_of, size_of
from airflow_tables.plugins.models import TableDetailPage, TablesPage, TaskTable
from airflow_tables.plugins.monitor import NEGATIVE_SECONDS, Monitor
from airflow_tables.plugins.overview import freshness_of, page_of

REASON = "Column 3 of row 7 holds text where the column is numeric."
LIST_PATH = "/cards"


def list_requests(emulator) -> list[dict]:
    """The list requests the emulator received (fetches of one table end in its CardID)."""
    return [r for r in emulator.stats()["requests"] if r["method"] == "GET" and r["path"].endswith(LIST_PATH)]


def tables_url(emulator, **query) -> str:
    return "/api/tables?" + urlencode({"conn_id": "datatables_default", "project_id": emulator.project_id, **query})


def until(check, timeout: float, every: float = 0.1):
    """Poll ``check()`` until it returns something true, or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout} s: {check}")
        time.sleep(every)


@pytest.fixture(scope="session")
def failed_run(dags_module, emulator, tmp_path_factory):
    """An Airflow import whose read failed (the emulator explains why); returns (dag_run, card_id, credits spent)."""
    before = emulator.stats()["imports_accepted"]
    emulator.set_fail_readings(1, REASON)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("AIRFLOW_CONN_DATATABLES_DEFAULT", default_connection(emulator))
            path = orders_csv(tmp_path_factory.mktemp("failed_read"), "failed_read.csv")
            dag_run = run(dags_module, "dt_import_poke", file_path=str(path))
    finally:
        emulator.reset_settings()
    card_id = xcom(dag_run, "import", key="card_id")
    assert state(dag_run, "import") == "failed" and isinstance(card_id, str), state(dag_run, "import")
    return dag_run, card_id, emulator.stats()["imports_accepted"] - before


# -- attribution ------------------------------------------------------------------------------------


def test_a_failed_read_is_attributed_to_its_task_and_its_credit_counted(failed_run, imported, connections):
    """Only successful imports recorded an event: a failed one showed 'not by Airflow', its credit uncounted."""
    dag_run, card_id, spent = failed_run
    assert spent == 1
    monitor = Monitor(30, base_path="/airflow", ui_timeout=30)
    view = monitor.department(monitor.connection("datatables_default"), connections.project_id)
    row = view.find(card_id)
    assert row is not None and row.state == "failed"
    assert row.last is not None, "the failed read names the DAG run that imported it"
    assert (row.last.dag_id, row.last.run_id, row.last.outcome) == ("dt_import_poke", dag_run.run_id, "failed")
    assert row.last.task_state == "failed" and row.last.credits == 1
    assert row.last.run_link == f"/airflow/dags/dt_import_poke/runs/{quote(dag_run.run_id, safe='')}"

    # Every Airflow import of the department today, recorded or not, is in today's credits.
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session

    from airflow_tables.assets import signed_record
    from airflow_tables.plugins.events import department_prefix

    midnight = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    with create_session() as session:
        from airflow.models.asset import AssetModel
        from sqlalchemy import select

        events = session.execute(
            select(AssetEvent.extra, AssetEvent.source_dag_id, AssetEvent.source_task_id, AssetEvent.source_run_id)
            .join(AssetModel, AssetModel.id == AssetEvent.asset_id)
            .where(
                AssetModel.uri.startswith(department_prefix(view.service, view.project_id)),
                AssetEvent.source_dag_id.is_not(None),
                AssetEvent.timestamp >= midnight,
            )
        ).all()
    # The imports the provider recorded: the events signed with the connection's key (another DAG's
    # event with the same extras is no import; tests/plugins/test_monitor.py records some).
    key = connections.api_key
    recorded = sum(extra.get("credits", 1) for extra, *source in events if signed_record(key, extra, *source))
    # At least this failed read's credit beside the recorded imports: in a whole test session other
    # tests' failed imports into the same department count too (tests/e2e/test_ui_e2e.py checks the
    # exact figure against the emulator's count in a stack of its own).
    assert view.credits.today >= recorded + 1, "the failed read's credit counts beside the recorded imports"
    today = view.credits.by_day[0]
    assert today.day == midnight.date().isoformat() and today.credits == view.credits.today
    assert len(view.credits.by_day) == 7 and sum(d.credits for d in view.credits.by_day) == view.credits.last_7_days


def test_an_unchanged_import_that_sent_nothing_costs_nothing():
    from airflow_tables.plugins.events import outcome_of

    assert outcome_of("success") == ("unchanged", 0)
    assert outcome_of("failed") == ("failed", 1)
    assert outcome_of("deferred") == ("running", 1) and outcome_of("up_for_retry") == ("running", 1)


# -- a table's page ---------------------------------------------------------------------------------


def test_the_table_page_shows_columns_description_imports_and_the_reason_of_a_failed_read(
    failed_run, imported, connections
):
    http = allowed(Monitor(30, base_path="/airflow", ui_timeout=30))
    dag_run, card_id = imported
    resp = http.get("/api/table?" + urlencode({"conn_id": "datatables_default", "card_id": card_id}))
    assert resp.status_code == 200, resp.text
    page = TableDetailPage.model_validate_json(resp.content)
    assert page.project_id == connections.project_id and page.table is not None
    assert [(c.name, c.data_type) for c in page.columns][:2] == [("order_id", "long"), ("region", "string")]
    assert all(c.description for c in page.columns) and page.description
    assert page.table.app_link == f"{APP_URL}/projects/{connections.project_id}/cards/{card_id}"
    assert page.table.domain is not None and page.table.page_link.endswith(f"card_id={card_id}")
    (made,) = [i for i in page.imports if i.run_id == dag_run.run_id]
    assert (made.dag_id, made.task_id, made.outcome, made.credits) == ("dt_import_poke", "import", "recorded", 1)
    assert made.run_link.startswith("/airflow/dags/dt_import_poke/runs/") and made.at

    failed_dag_run, failed_id, _ = failed_run
    failed = TableDetailPage.model_validate_json(
        http.get("/api/table?" + urlencode({"conn_id": "datatables_default", "card_id": failed_id})).content
    )
    assert failed.table.state == "failed" and REASON in failed.description
    assert failed.table.reason == failed.description, "the row carries the service's reason once the details are read"
    assert [(i.dag_id, i.run_id, i.outcome) for i in failed.imports] == [
        ("dt_import_poke", failed_dag_run.run_id, "failed")
    ]


def test_a_fingerprint_gives_the_file_size():
    assert size_of("xxh3-128:0123abcd:4096") == 4096
    assert size_of("") is None and size_of("xxh3-128:abc") is None


# -- live, at bounded cost --------------------------------------------------------------------------


def test_a_new_table_a_state_change_and_a_removal_reach_a_poll_within_one_interval(imported, connections, tmp_path):
    """The page polls with the ETag it was given: unchanged costs a 304; a new listing comes within one interval."""
    emulator = connections
    ttl = 1.0
    http = allowed(Monitor(ttl, ui_timeout=30, detail_budget=0))  # no background fetches to change the ETag
    first = http.get(tables_url(emulator, limit=500))
    etag = first.headers["etag"]
    assert http.get(tables_url(emulator, limit=500), headers={"If-None-Match": etag}).status_code == 304

    emulator.set_processing_delay(1.5)
    try:
        card_id = import_table(emulator, orders_csv(tmp_path, "live.csv"))
        added = time.monotonic()

        def listed(expected_state: str | None):
            resp = http.get(tables_url(emulator, limit=500), headers={"If-None-Match": etag})
            if resp.status_code == 304:
                return None
            rows = TablesPage.model_validate_json(resp.content).rows
            return {row.card_id: row.state.value for row in rows}.get(card_id) == expected_state

        until(lambda: listed("being_read"), timeout=ttl + 1)
        assert time.monotonic() - added <= ttl + 1
        until(lambda: listed("ready"), timeout=ttl + 5)
        DataTablesHook().delete_card(emulator.project_id, card_id)
        until(lambda: listed(None), timeout=ttl + 1)  # a removal, too
    finally:
        emulator.reset_settings()


def test_viewers_share_one_list_request_per_interval(imported, connections):
    emulator = connections
    http = allowed(Monitor(30, ui_timeout=30))
    emulator.reset_stats()
    for _ in range(20):
        assert http.get(tables_url(emulator, q="orders", sort="name")).status_code == 200
    assert len(list_requests(emulator)) == 1


def test_a_503_with_retry_after_answers_at_once_with_the_last_listing_and_is_not_asked_again(imported, connections):
    """The hook's retries would sleep out Retry-After (up to 300 s): the page sends one request and keeps it."""
    emulator = connections
    monitor = Monitor(0.5, ui_timeout=2)
    http = allowed(monitor)
    listed = TablesPage.model_validate_json(http.get(tables_url(emulator, limit=500)).content)
    assert listed.total > 0 and listed.error is None
    emulator.set_faults([{"path": r"/cards$", "methods": ["GET"], "status": 503, "retry_after": 300}])
    try:
        time.sleep(0.6)  # the listing's interval passes, so the next view asks the service again
        emulator.reset_stats()
        started = time.monotonic()
        page = TablesPage.model_validate_json(http.get(tables_url(emulator, limit=500)).content)
        assert time.monotonic() - started < 4, "answered within the UI timeout, no Retry-After slept out"
        assert "503" in (page.error or "") and page.error_at is not None
        assert page.total == listed.total and page.as_of == listed.as_of, "the last listing, with its age"
        for _ in range(5):
            http.get(tables_url(emulator, limit=500))
            time.sleep(0.2)
        assert len(list_requests(emulator)) == 1, "one request, no retry, none again before Retry-After"
    finally:
        emulator.clear_faults()


def test_a_service_that_hangs_does_not_hold_the_request(imported, connections):
    emulator = connections
    http = allowed(Monitor(30, ui_timeout=0.5))
    emulator.set_faults([{"path": r"/cards$", "methods": ["GET"], "latency": 5}])
    try:
        started = time.monotonic()
        resp = http.get(tables_url(emulator, project_id="PRJ-test"))
        assert time.monotonic() - started < 3
        page = TablesPage.model_validate_json(resp.content)
        assert page.pending and page.rows == []
    finally:
        emulator.clear_faults()


def test_an_unknown_department_is_answered_from_a_negative_cache(connections):
    emulator = connections
    monitor = Monitor(0.2, ui_timeout=30)
    http = allowed(monitor)
    emulator.reset_stats()
    for _ in range(3):
        page = TablesPage.model_validate_json(http.get(tables_url(emulator, project_id="PRJ-nobody")).content)
        assert "HTTP 403" in page.error
        time.sleep(0.3)  # past the interval, within the negative cache
    assert NEGATIVE_SECONDS > 1 and len(list_requests(emulator)) == 1


# -- sorting, search, freshness ---------------------------------------------------------------------


def test_columns_sort_both_ways_and_search_matches_column_names(imported, connections):
    emulator = connections
    monitor = Monitor(30, ui_timeout=30)
    http = allowed(monitor)
    by_name = TablesPage.model_validate_json(http.get(tables_url(emulator, sort="name", limit=500)).content)
    names = [row.name for row in by_name.rows if row.name]
    assert names == sorted(names, key=str.casefold) and by_name.sort == "name"
    resp = http.get(tables_url(emulator, sort="rows", desc=True, limit=500))
    rows_desc = TablesPage.model_validate_json(resp.content)
    counts = [row.rows for row in rows_desc.rows if row.rows is not None]
    assert counts == sorted(counts, reverse=True)
    assert http.get(tables_url(emulator, sort="password")).status_code == 422

    _, card_id = imported
    http.get("/api/table?" + urlencode({"conn_id": "datatables_default", "card_id": card_id}))  # its columns read
    found = TablesPage.model_validate_json(http.get(tables_url(emulator, q="REGION", limit=500)).content)
    assert card_id in [row.card_id for row in found.rows] and found.columns_known >= 1


def test_a_table_older_than_two_intervals_of_its_scheduled_dag_is_stale_and_says_why():
    now = datetime(2026, 5, 20, 12, 0, tzinfo=UTC)
    last = Import("CRD-1", "daily_orders", "import", "r", -1, now, "recorded", "success", 1, "")
    old = TableSummary("CRD-1", processed=True, completion_time=(now - timedelta(days=3)).isoformat())
    fresh = TableSummary("CRD-1", processed=True, completion_time=(now - timedelta(hours=30)).isoformat())
    daily = Schedule(interval_of("0 6 * * *"), "0 6 * * *")
    stale = freshness_of(old, last, daily, now)
    assert stale.stale and "daily_orders" in stale.reason and "0 6 * * *" in stale.reason and "3 d" in stale.reason
    assert not freshness_of(fresh, last, daily, now).stale
    assert not freshness_of(old, last, Schedule(None, "None"), now).stale, "an unscheduled DAG sets no expectation"
    assert not freshness_of(old, None, daily, now).stale, "not imported by Airflow: nothing to expect"
    assert interval_of("@hourly") == 3600 and interval_of("1 day, 0:00:00") == 86400 and interval_of("@once") is None


def test_page_of_keeps_the_attention_order_by_default(imported, connections):
    monitor = Monitor(30, ui_timeout=30)
    view = monitor.department(monitor.connection("datatables_default"), connections.project_id)
    ranks = [row.state.rank for row in page_of(view, limit=500).rows]
    assert ranks == sorted(ranks)


# -- the task's Table tab ---------------------------------------------------------------------------


def test_the_table_tab_names_the_connection_the_task_used(imported, connections, monkeypatch):
    """A second connection to the same service, listed first, whose key can list the department too."""
    emulator = connections
    other = {
        "conn_type": "datatables",
        "host": emulator.base_url,
        "password": emulator.api_key,
        "extra": {"project_id": emulator.project_id, "app_url": "http://other-app.tables.test"},
    }
    monkeypatch.setenv("AIRFLOW_CONN_DATATABLES_AAA_OTHER", json.dumps(other))
    dag_run, card_id = imported
    monitor = Monitor(30, ui_timeout=30)
    answer = monitor.task_table(dag_run.dag_id, dag_run.run_id, "import", -1, readable=lambda conn_id: True)
    assert answer.conn_id == "datatables_default" and answer.table is not None
    assert answer.table.app_link.startswith(APP_URL)
    TaskTable.model_validate_json(answer.model_dump_json())
