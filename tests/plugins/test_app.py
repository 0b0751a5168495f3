"""The page's FastAPI app: its OpenAPI document names every JSON route and its model, and each answer fits it.

The routes are served through a test client with Airflow's authorisation dependencies
allowing everything (what they refuse is the end-to-end tests' part), except where a test
checks that the OpenAPI document stays behind them.
"""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from fastapi.testclient import TestClient
from tests.operators._runs import import_table, orders_csv

from airflow_tables.model import TableStatus
from airflow_tables.plugins import app as ui
from airflow_tables.plugins.models import (
    LISTED,
    ConnectionsResponse,
    ListedState,
    TableDetailPage,
    TablesPage,
    TaskTable,
)
from airflow_tables.plugins.monitor import Monitor

ROUTES = {
    "/api/connections": ConnectionsResponse,
    "/api/tables": TablesPage,
    "/api/table": TableDetailPage,
    "/api/task": TaskTable,
}


def allowed(monitor: Monitor) -> TestClient:
    app = ui.create_app(monitor)
    for dependency in (*ui.READERS, ui.XCOM_READER):
        app.dependency_overrides[dependency.dependency] = lambda: None
    app.dependency_overrides[ui.connection_reader] = lambda: lambda conn_id: True
    return TestClient(app)


@pytest.fixture
def http(connections) -> TestClient:
    return allowed(Monitor(30, base_path="/airflow", ui_timeout=30))


def test_the_openapi_document_lists_each_json_route_with_its_model(http):
    resp = http.get("/openapi.json")
    assert resp.status_code == 200 and resp.headers["cache-control"] == "no-store"
    document = resp.json()
    assert set(document["paths"]) == set(ROUTES), "pages and the document itself are not API routes"
    for path, model in ROUTES.items():
        answer = document["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        assert answer == {"$ref": f"#/components/schemas/{model.__name__}"}, path
    schemas = document["components"]["schemas"]
    assert {"TableRow", "ImportedBy", "ConnectionInfo", "StateCounts", "Credits", "State"} <= set(schemas)
    assert set(schemas["TableRow"]["properties"]) >= {"card_id", "state", "state_label", "last", "app_link"}
    state = schemas["TableStatus"]["enum"]
    assert state == [status.value for status in TableStatus]


def test_the_openapi_document_is_behind_the_same_login_as_the_page(connections):
    """No override: without a login the document answers 401, as JSON like the API routes."""
    client = TestClient(ui.create_app(Monitor(30)))
    resp = client.get("/openapi.json")
    assert resp.status_code == 401 and "detail" in resp.json()
    assert client.get("/api/connections").status_code == 401


def test_every_route_answers_what_its_model_says(http, imported, connections, tmp_path):
    """Each answer validates against its model (which forbids undeclared fields): one that lists a table being read."""
    dag_run, card_id = imported
    emulator = connections
    emulator.set_processing_delay(3600)
    reading = import_table(emulator, orders_csv(tmp_path, "reading_app.csv"))
    task = urlencode({"dag_id": dag_run.dag_id, "run_id": dag_run.run_id, "task_id": "import", "map_index": -1})
    answers = {
        "/api/connections": http.get("/api/connections"),
        "/api/tables": http.get(f"/api/tables?conn_id=datatables_default&project_id={emulator.project_id}&limit=500"),
        "/api/table": http.get(f"/api/table?conn_id=datatables_default&card_id={card_id}"),
        "/api/task": http.get(f"/api/task?{task}"),
    }
    for path, resp in answers.items():
        assert resp.status_code == 200 and resp.headers["cache-control"] == "no-store", (path, resp.text)
        ROUTES[path].model_validate_json(resp.content)

    listed = answers["/api/connections"].json()
    assert listed["states"] == [{"state": s.value, "label": s.label} for s in LISTED]
    assert "datatables_default" in [c["conn_id"] for c in listed["connections"]]
    page = answers["/api/tables"].json()
    rows = {row["card_id"]: row for row in page["rows"]}
    assert (rows[reading]["state"], rows[reading]["state_label"]) == ("being_read", "Being read")
    assert page["being_read"] is True and page["counts"]["being_read"] >= 1
    assert rows[card_id]["last"]["dag_id"] == dag_run.dag_id and rows[card_id]["last"]["at"]
    table = answers["/api/task"].json()
    assert table["card_id"] == card_id and table["table"]["state_label"] == "Ready" and table["refresh_seconds"] == 30


def test_the_state_filter_takes_exactly_the_listed_states():
    from typing import get_args

    assert set(get_args(ListedState)) == {status.value for status in LISTED}
    assert [status.rank for status in LISTED] == sorted(status.rank for status in LISTED)
