"""Example DAGs run with dag.test() against the emulator, where what they make is worth checking."""

from __future__ import annotations

from datetime import UTC
from pathlib import Path

from tests._dag_files import dags_in, install

DAGS = Path(__file__).resolve().parents[2] / "dags"


def test_the_dataframe_example_names_its_table_readably(dags_module, datatables_conn):
    (dag,) = dags_in(install(DAGS / "example_datatables_dataframe.py", DAGS / "data"))
    dag_run = dag.test()
    card_id = dag_run.get_task_instance("import_orders_by_region").xcom_pull(task_ids="import_orders_by_region")
    assert str(dag_run.get_task_instance("import_orders_by_region").state) == "success"
    table = next(c for c in datatables_conn.list_cards(datatables_conn.project_id) if c["CardID"] == card_id)
    assert (table["CardName"], table["Rows"], table["SuccessfulUpload"]) == ("orders_by_region", 4, True)


def test_the_deadline_example_says_why_the_orders_table_is_late(dags_module, datatables_conn, tmp_path, monkeypatch):
    """The run's read fails, so it misses its 07:00 deadline; the deadline's callback words the service's reason."""
    import asyncio
    import importlib
    from datetime import datetime, timedelta

    from airflow.models.deadline import Deadline
    from airflow.utils.session import create_session
    from sqlalchemy import select
    from tests.operators._runs import import_table, orders_csv

    from airflow_tables.hooks.tables import DataTablesHook

    project = datatables_conn.project_id
    card_id = import_table(datatables_conn, orders_csv(tmp_path))
    datatables_conn.wait_until_processed(project, card_id)
    datatables_conn.set_settings(fail_readings=1, failure_reason="row 3 has 5 fields, the header 4")
    DataTablesHook().import_csv(project, orders_csv(tmp_path), card_id=card_id)  # tonight's refresh, read badly
    failed = datatables_conn.wait_until_processed(project, card_id)
    monkeypatch.setenv("DATATABLES_PROJECT_ID", project)
    monkeypatch.setenv("DATATABLES_DAILY_CARD_ID", card_id)
    monkeypatch.setenv("DATATABLES_POLL_INTERVAL", "0.2")
    (dag,) = dags_in(install(DAGS / "example_datatables_deadline.py"))

    midnight = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=8)  # 07:00 is an hour ago
    dag_run = dag.test(logical_date=midnight, run_after=midnight)
    assert str(dag_run.get_task_instance("wait_for_orders").state) == "failed"

    # What the scheduler does with a deadline that passed, then what the triggerer runs for it.
    with create_session() as session:
        (deadline,) = session.scalars(select(Deadline).where(Deadline.dagrun_id == dag_run.id)).all()
        assert deadline.deadline_time == midnight + timedelta(hours=7)
        deadline.handle_miss(session)
        session.flush()
        row = getattr(deadline, "trigger", None) or deadline.callback.trigger  # 3.1: on the deadline
        module, _, name = row.classpath.rpartition(".")
        trigger = getattr(importlib.import_module(module), name)(**row.kwargs)
        session.rollback()

    async def events():
        return [event.payload async for event in trigger.run()]

    *_, last = asyncio.run(events())
    assert last["state"] == "success", last
    assert last["body"] == (
        f"DAG example_datatables_deadline run {dag_run.run_id} missed its deadline of "
        f"{(midnight + timedelta(hours=7)).isoformat()}: table {card_id} (orders): the service could not read "
        f"its file at {failed['UploadCompletionTime']} UTC: "
        '"Reading orders.csv failed: row 3 has 5 fields, the header 4.".'
    )


def test_the_bad_rows_example_sends_the_good_rows_and_sets_the_bad_ones_aside(
    dags_module, datatables_conn, tmp_path, monkeypatch
):
    """The export's three bad rows (written into it at known lines) go to the day's rejects file; the rest is sent."""
    import csv
    from datetime import datetime

    from tests.operators._runs import xcom

    from airflow_tables.hooks.tables import DataTablesHook

    monkeypatch.setenv("DATATABLES_REJECTS_DIR", str(tmp_path))
    (dag,) = dags_in(install(DAGS / "example_datatables_bad_rows.py", DAGS / "data"))
    day = datetime(2026, 11, 30, tzinfo=UTC)
    dag_run = dag.test(logical_date=day, run_after=day)

    assert str(dag_run.get_task_instance("import_orders").state) == "success"
    rejects = tmp_path / "orders_export_2026-11-30.rejects.csv"
    assert xcom(dag_run, "import_orders", key="bad_rows") == {"count": 3, "rejects": str(rejects)}
    with open(rejects, newline="", encoding="utf-8") as f:
        set_aside = list(csv.DictReader(f))
    assert [(row["line"], row["code"], row["column"]) for row in set_aside] == [
        ("64", "not-a-long", "order_id"),
        ("182", "field-count", ""),
        ("309", "encoding", ""),
    ]
    assert set_aside[0]["record"] == "N/A,2026-11-23,North,S011,75.81,entered by hand"
    assert set_aside[2]["record"].endswith(",Z\\xfcrich office")  # the byte that is not UTF-8, escaped
    assert list(tmp_path.iterdir()) == [rejects]  # no temporary file left beside it

    # What the service got: the export without those three lines, byte for byte; read as 397 rows.
    export = (DAGS / "data" / "orders_export.csv").read_bytes().splitlines(keepends=True)
    good = b"".join(line for number, line in enumerate(export, 1) if number not in (64, 182, 309))
    card_id = xcom(dag_run, "import_orders")
    assert datatables_conn.received_bytes(card_id) == good
    table = datatables_conn.wait_until_processed(datatables_conn.project_id, card_id)
    assert (table["CardName"], table["Rows"], table["SuccessfulUpload"]) == ("orders_20261130", 397, True)
    columns = DataTablesHook().get_card(None, card_id)["Columns"]
    assert {c["ColumnName"]: c["DataType"] for c in columns}["order_id"] == "long"  # N/A did not make it text

    assert str(dag_run.get_task_instance("review_bad_rows").state) == "success"
    assert xcom(dag_run, "review_bad_rows") == {
        "count": 3,
        "rejects": str(rejects),
        "by_code": {"not-a-long": 1, "field-count": 1, "encoding": 1},
    }
