"""utils/events.py: the asset event an upload records, and reading it back as the same record."""

from __future__ import annotations

from types import SimpleNamespace

from tests.operators._runs import orders_csv, run, xcom

from airflow_tables.assets import table_ref
from airflow_tables.model import TableSummary
from airflow_tables.utils.events import UploadRecord


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


def test_an_upload_record_reads_back_from_its_event_as_written():
    ref = table_ref("sales", "CRD-1", service="https://tables.example.com")
    table = TableSummary.from_json({"CardID": "CRD-1", "CardName": "orders", "Rows": 20, "UploadCompletionTime": "t1"})
    record = UploadRecord.of(ref, table, replaced=True, fingerprint="abc")
    extra = record.to_extra()
    assert extra == {
        "service": "tables.example.com",
        "project_id": "sales",
        "card_id": "CRD-1",
        "card_name": "orders",
        "rows": 20,
        "completion_time": "t1",
        "replaced": True,
        "credits": 1,
        "fingerprint": "abc",
    }
    event = SimpleNamespace(extra={**extra, "other": 1}, source_dag_id="d", source_task_id="t", source_run_id="r")
    assert UploadRecord.from_event(event) == UploadRecord(**extra, dag_id="d", task_id="t", run_id="r")


def test_an_event_that_is_not_an_upload_record_reads_as_none():
    for extra in (None, {}, {"fingerprint": ""}, {"fingerprint": "abc"}):  # the last lacks the table's identity
        event = SimpleNamespace(extra=extra, source_dag_id=None, source_task_id=None, source_run_id=None)
        assert UploadRecord.from_event(event) is None
