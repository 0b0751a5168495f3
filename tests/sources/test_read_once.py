"""The operators read an object from storage once, whatever they check (GETs counted at a real S3 server)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from tests._dag_files import install
from tests.operators._runs import state
from tests.sources.conftest import CONN_ID, received_bytes

DAG_FILE = Path(__file__).with_name("dag_read_once.py")
CSV = "order_id,region,amount\n" + "".join(f"{i},north,{i * 3}\n" for i in range(1, 200))


def _dags():
    return install(DAG_FILE)


@pytest.fixture
def table(datatables_conn, tmp_path) -> str:
    """A table with the columns of ``CSV``, for the replacements' schema check."""
    from airflow_tables.hooks.tables import DataTablesHook

    base = tmp_path / "orders.csv"
    base.write_text(CSV)
    card_id = DataTablesHook().import_csv(None, base)
    datatables_conn.wait_until_processed(datatables_conn.project_id, card_id)
    return card_id


def _run_and_count(dag, s3_server, bucket, card_id: str, tasks: tuple[str, ...]) -> dict[str, int]:
    """Run ``dag`` with one object per task; return the GET requests each object had."""
    keys = {task: f"read-once/{task}/orders.csv" for task in tasks}
    for key in keys.values():
        s3_server.put(bucket, key, CSV.encode())
    conf = {task: f"s3://{CONN_ID}@{bucket}/{key}" for task, key in keys.items()}
    when = datetime.now(UTC)
    dag_run = dag.test(run_conf={**conf, "card_id": card_id}, logical_date=when, run_after=when)
    assert {task: state(dag_run, task) for task in tasks} == dict.fromkeys(tasks, "success")
    return {task: s3_server.reads(bucket, key) for task, key in keys.items()}


def test_validation_fingerprint_types_and_upload_read_the_object_once(
    dags_module, datatables_conn, s3_server, bucket, table
):
    reads = _run_and_count(_dags().checked, s3_server, bucket, table, ("validated", "everything"))
    assert reads == {"validated": 1, "everything": 1}
    assert received_bytes(datatables_conn, table) == CSV.encode()


def test_a_replacement_that_only_checks_types_reads_the_object_once(
    dags_module, datatables_conn, s3_server, bucket, table
):
    assert _run_and_count(_dags().types_only, s3_server, bucket, table, ("typed",)) == {"typed": 1}


def test_the_operators_validate_an_object_in_the_pass_that_copies_it(
    dags_module, datatables_conn, s3_server, bucket, table, copy_scans
):
    reads = _run_and_count(_dags().checked, s3_server, bucket, table, ("validated", "everything"))
    assert reads == {"validated": 1, "everything": 1}
    assert copy_scans == [], "a copy was scanned again after it was written"


def test_an_object_only_an_exact_read_describes_is_scanned_from_its_copy(
    dags_module, datatables_conn, s3_server, bucket, copy_scans
):
    key = "read-once/ragged/orders.csv"
    s3_server.put(bucket, key, (CSV + "200,north\n").encode())
    when = datetime.now(UTC)
    conf = {"validated": f"s3://{CONN_ID}@{bucket}/{key}", "everything": "", "card_id": ""}
    dag_run = _dags().checked.test(run_conf=conf, logical_date=when, run_after=when)
    assert state(dag_run, "validated") == "failed"
    assert len(copy_scans) == 1 and s3_server.reads(bucket, key) == 1, "the copy names the ragged row's line"
