"""Table assets however they are spelled: Airflow normalises them through the provider (issue 43, point 3)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from tests._dag_files import dags_in, install
from tests.operators._runs import import_table, orders_csv

HAND_DAGS = Path(__file__).parent / "dags" / "datatables_hand_written_asset.py"


def test_airflow_gives_a_hand_written_table_asset_the_operators_uri():
    from airflow.sdk import Asset

    from airflow_tables.assets import table_asset

    for written, service in [
        ("datatables://LOCALHOST:8765/P-1/CRD-1", "http://127.0.0.1:8765"),
        ("datatables://Tables.Example.com:443/P-1/CRD-1", "https://tables.example.com"),
        ("DataTables://tables.example.com:80/P-1/CRD-1/", "http://tables.example.com"),
        ("datatables://tables.example.com/api/P%2D1/CRD-1", "https://tables.example.com/api"),
    ]:
        assert Asset(written).uri == table_asset("P-1", "CRD-1", service=service).uri, written


def test_a_dag_scheduled_on_a_hand_written_asset_runs_when_the_operator_replaces_the_table(
    dags_module, datatables_conn, tmp_path, monkeypatch
):
    import airflow.models.dagrun as dagrun_module
    from airflow.models.asset import AssetDagRunQueue, AssetModel
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session
    from sqlalchemy import select, update

    project = datatables_conn.project_id
    card_id = import_table(datatables_conn, orders_csv(tmp_path, name="hand_written.csv"))
    datatables_conn.wait_until_processed(project, card_id)
    port = datatables_conn.base_url.rsplit(":", 1)[1]
    hand_written = f"datatables://LOCALHOST:{port}/{project}/{card_id}"
    monkeypatch.setenv("DT_HAND_WRITTEN_URI", hand_written)
    monkeypatch.setenv("DT_HAND_WRITTEN_PROJECT_ID", project)
    monkeypatch.setenv("DT_HAND_WRITTEN_CARD_ID", card_id)
    dags = {dag.dag_id: dag for dag in dags_in(install(HAND_DAGS))}
    made = dagrun_module.get_or_create_dagrun

    def consumer_unpaused(**kwargs):  # dag.test() has just written the consumer to the database, paused
        dag_run = made(**kwargs)
        unpause = update(DagModel).where(DagModel.dag_id == "dt_hand_written_consumer").values(is_paused=False)
        kwargs["session"].execute(unpause)
        kwargs["session"].commit()
        return dag_run

    monkeypatch.setattr(dagrun_module, "get_or_create_dagrun", consumer_unpaused)
    when = datetime.now(UTC)
    path = str(orders_csv(tmp_path, name="hand_written_next.csv", rows=4))
    dag_run = dags["dt_hand_written_producer"].test(run_conf={"file_path": path}, logical_date=when, run_after=when)
    assert str(dag_run.get_task_instance("replace").state) == "success"

    with create_session() as session:
        queued = session.scalars(
            select(AssetModel.name)
            .join(AssetDagRunQueue, AssetDagRunQueue.asset_id == AssetModel.id)
            .where(AssetDagRunQueue.target_dag_id == "dt_hand_written_consumer")
        ).all()
    assert queued == [hand_written]  # the consumer's own asset (named as written) got the replace's event
