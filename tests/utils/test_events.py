"""utils/events.py: the asset event an upload records, and reading it back as the same record."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from tests._dag_files import dags_in, install
from tests.operators._runs import import_table, orders_csv, run, xcom

from airflow_tables.assets import table_ref
from airflow_tables.model import TableSummary
from airflow_tables.utils.events import UploadRecord
from airflow_tables.version_compat import AIRFLOW_V_3_2_PLUS, AIRFLOW_V_3_3_PLUS


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


def test_a_signed_record_verifies_only_for_the_task_that_recorded_it_and_as_written():
    """Issue 36 point 9: any DAG can put any extras on a table's asset; only a signed record is read back."""
    ref = table_ref("sales", "CRD-1", service="https://tables.example.com")
    record = UploadRecord.of(ref, None, replaced=True, fingerprint="xxh3-128:ab:5")
    signed = UploadRecord(**{**record.__dict__, "dag_id": "d", "task_id": "t", "run_id": "r"}).to_extra("dtk_key")

    def event(extra, dag_id="d"):
        return SimpleNamespace(extra=extra, source_dag_id=dag_id, source_task_id="t", source_run_id="r")

    assert UploadRecord.from_event(event(signed), "dtk_key") is not None
    assert UploadRecord.from_event(event(signed, dag_id="other"), "dtk_key") is None  # copied to another DAG's event
    assert UploadRecord.from_event(event({**signed, "fingerprint": "xxh3-128:cd:5"}), "dtk_key") is None  # edited
    assert UploadRecord.from_event(event(signed), "another_key") is None  # another connection's key
    unsigned = {k: v for k, v in signed.items() if k != "signature"}
    assert UploadRecord.from_event(event(unsigned), "dtk_key") is None


# -- partitions (issue 28, point 2) --------------------------------------------------------------

PARTITION_DAGS = Path(__file__).parent / "dags" / "datatables_partition_dags.py"
CONSUMER = "dt_partition_consumer"
ORDINARY = "dt_ordinary_consumer"  # scheduled on the table's asset, not partition-aware


@pytest.fixture
def partitioned_table(dags_module, datatables_conn, tmp_path, monkeypatch):
    """A table, and the partition DAGs installed for it (the consumer is scheduled on its asset)."""
    card_id = import_table(datatables_conn, orders_csv(tmp_path, name="partitioned.csv"))
    datatables_conn.wait_until_processed(datatables_conn.project_id, card_id)
    monkeypatch.setenv("DT_PARTITION_PROJECT_ID", datatables_conn.project_id)
    monkeypatch.setenv("DT_PARTITION_CARD_ID", card_id)
    monkeypatch.setenv("DT_PARTITION_SERVICE", datatables_conn.base_url)
    dags = {dag.dag_id: dag for dag in dags_in(install(PARTITION_DAGS))}
    return card_id, dags


def _replace(dags, tmp_path, monkeypatch, *, run_key=None, region=""):
    """Replace the table in a dag.test() run; ``run_key``: the partition key the scheduler would give the run."""
    import airflow.models.dagrun as dagrun_module

    made = dagrun_module.get_or_create_dagrun

    def partitioned(**kwargs):  # dag.test() cannot make a partitioned run: give its run the key
        from airflow.models.dag import DagModel
        from sqlalchemy import update

        dag_run = made(**kwargs)
        dag_run.partition_key = run_key
        # dag.test() has just written the consumer to the database, paused as every new DAG is.
        unpause = update(DagModel).where(DagModel.dag_id.in_([CONSUMER, ORDINARY])).values(is_paused=False)
        kwargs["session"].execute(unpause)
        kwargs["session"].commit()
        return dag_run

    monkeypatch.setattr(dagrun_module, "get_or_create_dagrun", partitioned)
    when = datetime.now(UTC)
    path = str(orders_csv(tmp_path, name=f"part_{region or run_key}.csv", rows=3))
    dag_run = dags["dt_partition_replace"].test(
        run_conf={"file_path": path, "region": region}, logical_date=when, run_after=when
    )
    assert str(dag_run.get_task_instance("replace").state) == "success"
    return dag_run


def _events(card_id, project_id):
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from airflow_tables.assets import table_asset

    with create_session() as session:
        uri = table_asset(project_id, card_id).uri
        query = select(AssetEvent).join(AssetModel, AssetEvent.asset_id == AssetModel.id).where(AssetModel.uri == uri)
        events = session.scalars(query)  # Airflow 3.1's events have no partition_key
        return [(e.source_run_id, getattr(e, "partition_key", None), e.extra.get("partition_key")) for e in events]


def _twins(card_id, project_id):
    """The extras ``partition_twin`` and ``credits`` of the table's events, oldest first."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from airflow_tables.assets import table_asset

    with create_session() as session:
        uri = table_asset(project_id, card_id).uri
        query = select(AssetEvent).join(AssetModel, AssetEvent.asset_id == AssetModel.id).where(AssetModel.uri == uri)
        return [(e.extra.get("partition_twin"), e.extra.get("credits")) for e in session.scalars(query)]


def _queued(dag_id, card_id, project_id) -> bool:
    """Whether a change of the table's asset waits to start a run of the (unpartitioned) DAG ``dag_id``."""
    from airflow.models.asset import AssetDagRunQueue, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from airflow_tables.assets import table_asset

    with create_session() as session:
        uri = table_asset(project_id, card_id).uri
        query = (
            select(AssetDagRunQueue)
            .join(AssetModel, AssetDagRunQueue.asset_id == AssetModel.id)
            .where(AssetDagRunQueue.target_dag_id == dag_id, AssetModel.uri == uri)
        )
        return session.scalars(query).first() is not None


def _queued_partitions(dag_id):
    from airflow.models.asset import AssetPartitionDagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        query = select(AssetPartitionDagRun.partition_key).where(AssetPartitionDagRun.target_dag_id == dag_id)
        return sorted(session.scalars(query))


@pytest.mark.skipif(not AIRFLOW_V_3_2_PLUS, reason="partitions are Airflow 3.2+")
def test_a_partitioned_run_s_replace_records_its_event_for_that_partition(
    partitioned_table, datatables_conn, tmp_path, monkeypatch
):
    card_id, dags = partitioned_table
    before = _queued_partitions(CONSUMER)
    dag_run = _replace(dags, tmp_path, monkeypatch, run_key="2026-11-25")
    assert _events(card_id, datatables_conn.project_id) == [(dag_run.run_id, "2026-11-25", "2026-11-25")]
    # The partitioned consumer is queued once for that partition: the scheduler makes one run of it.
    assert _queued_partitions(CONSUMER) == sorted([*before, "2026-11-25"])


def test_a_given_partition_key_goes_on_the_event_and_each_partition_queues_its_consumer_once(
    partitioned_table, datatables_conn, tmp_path, monkeypatch, capfd
):
    card_id, dags = partitioned_table
    before = _queued_partitions(CONSUMER) if AIRFLOW_V_3_2_PLUS else []
    north = _replace(dags, tmp_path, monkeypatch, region="north")
    south = _replace(dags, tmp_path, monkeypatch, region="south")
    events = _events(card_id, datatables_conn.project_id)
    if AIRFLOW_V_3_3_PLUS:  # each keyed event has an unkeyed twin, for the ordinary consumers
        assert sorted(events, key=str) == sorted(
            [(north.run_id, "north", "north"), (north.run_id, None, None)]
            + [(south.run_id, "south", "south"), (south.run_id, None, None)],
            key=str,
        )
        assert _queued_partitions(CONSUMER) == sorted([*before, "north", "south"])
    else:  # 3.2 gives an event only its run's key, 3.1 none: kept in the extras, with a warning
        assert events == [(north.run_id, None, "north"), (south.run_id, None, "south")]
        why = (
            "Airflow 3.2 gives an event only its run's partition key" if AIRFLOW_V_3_2_PLUS else "3.1 has no partitions"
        )
        assert "partition_key 'north' is kept in the event's extras only" in (out := "".join(capfd.readouterr()))
        assert why in out
        if AIRFLOW_V_3_2_PLUS:
            assert _queued_partitions(CONSUMER) == before  # no key, no partitioned run


@pytest.mark.skipif(not AIRFLOW_V_3_3_PLUS, reason="a given key goes on an event from Airflow 3.3")
def test_a_given_partition_key_still_queues_the_ordinary_consumers_through_an_unkeyed_twin(
    partitioned_table, datatables_conn, tmp_path, monkeypatch
):
    """Issue 37, point 2: a keyed event queues only partition-aware DAGs; the ordinary ones hear of the twin.

    The twin is the same upload (its extras say which partition it is the twin of) and costs
    nothing: the Data Tables page counts the import's credit once, on the keyed event.
    """
    card_id, dags = partitioned_table
    project_id = datatables_conn.project_id
    assert not _queued(ORDINARY, card_id, project_id)
    _replace(dags, tmp_path, monkeypatch, region="north")
    assert _queued(ORDINARY, card_id, project_id)
    assert sorted(_twins(card_id, datatables_conn.project_id), key=str) == sorted([(None, 1), ("north", 0)], key=str)


@pytest.mark.skipif(not AIRFLOW_V_3_2_PLUS, reason="partitions are Airflow 3.2+")
def test_a_partitioned_runs_events_all_carry_its_key_and_leave_the_ordinary_consumers_alone(
    partitioned_table, datatables_conn, tmp_path, monkeypatch
):
    """No unkeyed twin can come from a partitioned run (Airflow keys all its events): as docs/operators.md says."""
    card_id, dags = partitioned_table
    _replace(dags, tmp_path, monkeypatch, run_key="2026-11-26")
    assert not _queued(ORDINARY, card_id, datatables_conn.project_id)
    assert _twins(card_id, datatables_conn.project_id) == [(None, 1)]


def test_the_record_type_lives_in_assets_and_utils_events_re_exports_it():
    """Issue 39 point 4: the plugin may not import utils/, so the record is assets.UploadRecord; the old name stays."""
    from airflow_tables import assets
    from airflow_tables.utils import events

    assert events.UploadRecord is assets.UploadRecord


def test_extras_are_read_field_by_field_each_wrong_type_as_its_default():
    from airflow_tables.assets import UploadRecord

    ref = table_ref("sales", "CRD-1", service="https://tables.example.com")
    extra = {"credits": True, "rows": "20", "fingerprint": 5, "replaced": 1, "card_name": "orders", "other": 1}
    assert UploadRecord.from_extra(extra, ref=ref, dag_id="d") == UploadRecord(
        "tables.example.com", "sales", "CRD-1", card_name="orders", dag_id="d"
    )
    assert UploadRecord.from_extra({"credits": 0}) is None  # no table named, and no asset to name it
    written = UploadRecord.of(ref, None, replaced=True, fingerprint="abc")
    assert UploadRecord.from_extra(written.to_extra()) == written
    assert UploadRecord.from_extra(None, ref=ref) == UploadRecord(ref.service, ref.project_id, ref.card_id)


def test_a_mapped_import_declares_the_tables_alias_where_the_dag_processor_reads_it():
    """Outlets as the DAG is serialized: a mapped task's are in its partial arguments, so Airflow creates the alias
    with the DAG (not with the first events, which raced: two tasks ending at once both created it, one failing)."""
    from datetime import datetime

    from airflow.sdk import DAG

    from airflow_tables.operators.tables import DataTablesImportOperator, DataTablesReplaceOperator
    from airflow_tables.utils.events import TABLES_ALIAS

    with DAG("mapped_alias", schedule=None, start_date=datetime(2026, 1, 1)):
        imports = DataTablesImportOperator.partial(task_id="imports").expand(file_path=["a.csv", "b.csv"])
        replaces = DataTablesReplaceOperator.partial(task_id="replaces", outlets=[TABLES_ALIAS]).expand_kwargs(
            [{"card_id": "CRD-1", "file_path": "a.csv"}]
        )
    for mapped in (imports, replaces):
        assert mapped.partial_kwargs["outlets"] == [TABLES_ALIAS]  # declared once, even when given
        assert mapped.unmap({"file_path": "a.csv", "card_id": "CRD-1"}).outlets == [TABLES_ALIAS]
