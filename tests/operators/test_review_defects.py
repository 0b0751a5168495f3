"""The defects a review of the first release found (issue 11), each against the emulator.

Every test here failed on the first release's code.
"""

from __future__ import annotations

import pytest
from tests.operators._runs import run, state, xcom
from tests.operators.test_operators import import_table, orders_csv


@pytest.fixture
def counted(datatables_conn):
    datatables_conn.reset_stats()
    return datatables_conn


def requests(emulator, method: str | None = None, path: str = "") -> list[dict]:
    return [
        r
        for r in emulator.stats()["requests"]
        if (method is None or r["method"] == method) and path in r.get("path", "")
    ]


# -- 2. a table being read is "being read", whatever LockedFromDelete says -------------------------


def test_delete_waits_for_a_table_being_read_that_also_reports_locked(dags_module, counted, tmp_path):
    emulator = counted
    emulator.set_processing_delay(1.0)
    emulator.set_settings(lock_while_reading=True)
    card_id = import_table(emulator, orders_csv(tmp_path))
    assert next(c for c in emulator.list_cards() if c["CardID"] == card_id)["LockedFromDelete"] is True

    dag_run = run(dags_module, "dt_delete_fail", card_id=card_id)

    assert state(dag_run, "delete") == "success"  # waited (if_processing="wait"), then deleted
    assert card_id not in {c["CardID"] for c in emulator.list_cards()}


def test_the_hook_calls_a_refused_delete_of_a_table_being_read_busy_not_locked(counted, tmp_path):
    from airflow_tables.exceptions import DataTablesBusyError, DataTablesLockedError
    from airflow_tables.hooks.tables import DataTablesHook

    emulator = counted
    emulator.set_processing_delay(5.0)
    emulator.set_settings(lock_while_reading=True)
    card_id = import_table(emulator, orders_csv(tmp_path))
    with pytest.raises(DataTablesBusyError) as refused:
        DataTablesHook().delete_card(None, card_id)
    assert not isinstance(refused.value, DataTablesLockedError)
    assert "being read" in refused.value.msg


# -- 3. a table that can never be replaced is not sent the file again ------------------------------


def test_replacing_a_connector_table_fails_at_once_without_sending_again(dags_module, counted, tmp_path):
    emulator = counted
    emulator.set_connector_status(emulator.connector_card_id, "paused")  # not locked: the service has the say
    credits = emulator.credits()
    try:
        dag_run = run(
            dags_module, "dt_replace_once", card_id=emulator.connector_card_id, file_path=str(orders_csv(tmp_path))
        )
    finally:  # the shared emulator's other tests expect the connection live
        emulator.set_connector_status(emulator.connector_card_id, "active")

    ti = dag_run.get_task_instance("replace")
    assert str(ti.state) == "failed" and ti.try_number == 1  # AirflowFailException: retries=1 not used
    assert len(requests(emulator, "POST", "/data/import")) == 1
    assert emulator.credits() == credits


# -- 4. a replacement's answer without a CardID is the CardID that was sent ------------------------


def test_a_replacement_answer_without_card_id_returns_the_card_id_sent(dags_module, counted, tmp_path):
    emulator = counted
    card_id = import_table(emulator, orders_csv(tmp_path))
    emulator.wait_until_processed(emulator.project_id, card_id)
    emulator.set_settings(replacement_card_id=False)

    dag_run = run(dags_module, "dt_replace_poke", card_id=card_id, file_path=str(orders_csv(tmp_path, rows=3)))

    assert state(dag_run, "replace") == "success"
    assert xcom(dag_run, "replace") == card_id
    assert next(c for c in emulator.list_cards() if c["CardID"] == card_id)["Rows"] == 3


# -- 7. a table's asset names its service ----------------------------------------------------------


def test_the_same_ids_on_two_services_are_two_assets():
    from airflow_tables.assets import parse_table_uri, table_asset

    one = table_asset("sales", "CRD-1", service="https://eu.tables.example.com")
    two = table_asset("sales", "CRD-1", service="https://us.tables.example.com")
    assert one != two and one.uri != two.uri
    assert one.uri == "datatables://eu.tables.example.com/sales/CRD-1"
    assert parse_table_uri(one.uri).service == "eu.tables.example.com"
    # A bare host means https, and case or a trailing slash do not make another service.
    assert table_asset("sales", "CRD-1", service="EU.tables.example.com/").uri == one.uri


def test_table_asset_reads_the_service_from_the_connection(datatables_conn):
    from airflow_tables.assets import table_asset

    host = datatables_conn.base_url.split("://", 1)[1]
    asset = table_asset("sales", "CRD-1")
    assert asset.uri == f"datatables://{host}/sales/CRD-1"


def test_an_import_records_an_event_on_its_service_qualified_asset(dags_module, datatables_conn, tmp_path):
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from airflow_tables.assets import table_asset

    dag_run = run(dags_module, "dt_import_poke", file_path=str(orders_csv(tmp_path, name="asset_probe.csv")))
    card_id = xcom(dag_run, "import")
    uri = table_asset(datatables_conn.project_id, card_id).uri
    with create_session() as session:
        events = session.scalars(
            select(AssetEvent).join(AssetModel, AssetEvent.asset_id == AssetModel.id).where(AssetModel.uri == uri)
        ).all()
        assert [(e.source_dag_id, e.source_run_id, e.extra["card_id"]) for e in events] == [
            ("dt_import_poke", dag_run.run_id, card_id)
        ]
        assert events[0].extra["rows"] == 20 and events[0].extra["replaced"] is False
