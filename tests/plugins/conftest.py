"""Fixtures of the page's tests: connections that fail in each way, and a table a real DAG run imported."""

from __future__ import annotations

import json

import pytest
from tests.conftest import APP_URL
from tests.operators._runs import orders_csv, run, xcom

DOWN_KEY = "down-service-key-5f3a9c"
BAD_KEY = "refused-key-0b7e2d41"


@pytest.fixture
def connections(datatables_conn, monkeypatch):
    """The emulator's connection, one to a closed port and one with a key the service refuses."""
    for conn_id, host, key in (
        ("datatables_down", "http://127.0.0.1:9", DOWN_KEY),
        ("datatables_refused", datatables_conn.base_url, BAD_KEY),
    ):
        conn = {
            "conn_type": "datatables",
            "host": host,
            "password": key,
            "extra": {"project_id": "PRJ-test", "max_retries": 0},
        }
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))
    return datatables_conn


def default_connection(emulator) -> str:
    """``AIRFLOW_CONN_DATATABLES_DEFAULT`` for the DAG runs of these tests: the emulator, with an app_url."""
    conn = {
        "conn_type": "datatables",
        "host": emulator.base_url,
        "password": emulator.api_key,
        "extra": {"project_id": emulator.project_id, "app_url": APP_URL},
    }
    return json.dumps(conn)


@pytest.fixture(scope="session")
def imported(dags_module, emulator, tmp_path_factory):
    """One table imported by a real DAG run; returns (dag_run, card_id)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AIRFLOW_CONN_DATATABLES_DEFAULT", default_connection(emulator))
        dag_run = run(dags_module, "dt_import_poke", file_path=str(orders_csv(tmp_path_factory.mktemp("ui"))))
    card_id = xcom(dag_run, "import")
    assert isinstance(card_id, str) and card_id.startswith("CRD-"), card_id
    return dag_run, card_id
