"""Parquet and JSON Lines imported as the CSV they convert to: DAG runs against the emulator, local and in S3.

The service receives the CSV of ``sources/tabular.py``'s rules, named after the file
(``orders.parquet`` -> table ``orders``); a file with a column that has no CSV form fails
before any request. The round trip goes through the emulator: Parquet -> our CSV -> the table
the emulator made -> values equal to what pyarrow reads from the Parquet file.
"""

from __future__ import annotations

import csv
import datetime as dt
import gzip
import io
from datetime import UTC
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from tests.operators._runs import state, xcom
from tests.sources._formats import run_formats, table_of
from tests.sources.conftest import CONN_ID
from tests.sources.test_tabular import _expected, _read_back, tables

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

EVERY_KIND = pa.table(
    {
        "id": pa.array([1, 2, None], pa.int64()),
        "amount": pa.array([0.1, 100.0, None], pa.float64()),
        "paid": pa.array([True, False, None]),
        "price": pa.array([Decimal("1.20"), None, Decimal("-3.00")], pa.decimal128(6, 2)),
        "day": pa.array([dt.date(2026, 11, 29), None, dt.date(1999, 1, 1)], pa.date32()),
        "at": pa.array(
            [dt.datetime(2026, 11, 29, 12, 30, tzinfo=UTC), None, dt.datetime(2000, 1, 1, tzinfo=UTC)],
            pa.timestamp("ms", tz="Europe/Paris"),
        ),
        "note": pa.array(["plain", 'with "quotes", and a comma', None]),
    }
)
EVERY_KIND_CSV = (
    b"id,amount,paid,price,day,at,note\n"
    b"1,0.1,true,1.20,2026-11-29,2026-11-29T13:30:00+01:00,plain\n"
    b'2,100,false,,,,"with ""quotes"", and a comma"\n'
    b",,,-3.00,1999-01-01,2000-01-01T01:00:00+01:00,\n"
)


def _parquet(table) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


def test_a_parquet_file_is_imported_as_its_csv_validated_or_not(dags_module, datatables_conn, tmp_path):
    path = tmp_path / "orders.parquet"
    path.write_bytes(_parquet(EVERY_KIND))

    dag_run = run_formats(validated=str(path), unchecked=str(path))

    for task in ("validated", "unchecked"):
        assert state(dag_run, task) == "success", task
        card_id = xcom(dag_run, task)
        assert datatables_conn.received_bytes(card_id) == EVERY_KIND_CSV, task
        made = table_of(card_id)
        assert (made.name, made.rows) == ("orders", 3), task


def test_a_parquet_object_is_read_once_and_imported(dags_module, datatables_conn, s3_server, bucket):
    key = "lake/2026-11-29/orders.parquet"
    s3_server.put(bucket, key, _parquet(EVERY_KIND))

    dag_run = run_formats(validated=f"s3://{CONN_ID}@{bucket}/{key}")

    assert state(dag_run, "validated") == "success"
    assert datatables_conn.received_bytes(xcom(dag_run, "validated")) == EVERY_KIND_CSV
    assert s3_server.reads(bucket, key) == 1


def test_json_lines_with_missing_and_extra_keys_compressed_or_declared(dags_module, datatables_conn, tmp_path):
    lines = b'{"id": 1, "name": "a"}\n{"id": 2}\n{"id": 3, "name": "c", "vip": true}\n'
    expected = b"id,name,vip\n1,a,\n2,,\n3,c,true\n"
    gz = tmp_path / "events.jsonl.gz"
    gz.write_bytes(gzip.compress(lines))
    declared = tmp_path / "events.log"
    declared.write_bytes(lines)

    dag_run = run_formats(validated=str(gz), jsonl=str(declared))

    assert state(dag_run, "validated") == "success" and state(dag_run, "jsonl") == "success"
    assert datatables_conn.received_bytes(xcom(dag_run, "validated")) == expected
    assert datatables_conn.received_bytes(xcom(dag_run, "jsonl")) == expected
    assert table_of(xcom(dag_run, "validated")).name == "events"
    assert table_of(xcom(dag_run, "jsonl")).name == "events.log"


def test_a_column_without_a_csv_form_fails_before_any_request(dags_module, datatables_conn, tmp_path):
    path = tmp_path / "nested.parquet"
    path.write_bytes(_parquet(pa.table({"id": [1], "tags": pa.array([["a", "b"]])})))
    datatables_conn.reset_stats()
    credits = datatables_conn.credits()

    dag_run = run_formats(validated=str(path), unchecked=str(path))

    assert state(dag_run, "validated") == "failed" and state(dag_run, "unchecked") == "failed"
    assert datatables_conn.stats()["imports_accepted"] == 0 and datatables_conn.credits() == credits


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(columns=tables())
def test_parquet_round_trips_through_the_emulator(columns, datatables_conn, tmp_path_factory):
    """Parquet -> our CSV -> the emulator's table: its rows, columns and values are what pyarrow reads."""
    from airflow_tables.hooks.tables import DataTablesHook

    table = pa.table({name: array for name, (_, array) in columns.items()})
    path = tmp_path_factory.mktemp("round") / "random.parquet"
    path.write_bytes(_parquet(table))

    card_id = DataTablesHook().import_csv(None, path)
    datatables_conn.wait_until_processed(datatables_conn.project_id, card_id)

    made = table_of(card_id)
    rows = list(csv.reader(io.StringIO(datatables_conn.received_bytes(card_id).decode(), newline="")))
    read = pq.read_table(path)
    assert made.rows == table.num_rows and rows[0] == list(columns)
    for index, (name, (kind, _)) in enumerate(columns.items()):
        got = [_read_back(kind, row[index]) for row in rows[1:]]
        assert got == [_expected(kind, value) for value in read.column(name).to_pylist()], name
