"""Compressed files imported as their decompressed CSV: through DAG runs against the emulator, local and in S3.

The service receives the decompressed bytes, named after the file without its compression
suffix; a file cut short, or one that decompresses past 512 MB, fails before any request
(no import, no credit). ``sources/compressed.py``'s own tests cover the formats' edge cases.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import zipfile

import pytest
from tests.operators._runs import state, xcom
from tests.sources._formats import run_formats, table_of
from tests.sources.conftest import CONN_ID

from airflow_tables.sources import Reading, SourceError, open_source, read_plan
from airflow_tables.validation import validate_source
from airflow_tables.validation.rules import MAX_BYTES

HEADER = b"order_id,region,amount\n"
ROWS = 3000
CSV = HEADER + b"".join(b"%d,north,%d\n" % (i, i * 3) for i in range(ROWS))


def _two_members(data: bytes) -> bytes:
    """A gzip file of two members (``cat a.gz b.gz``): a reader of the first alone loses half the rows."""
    half = data.index(b"\n", len(data) // 2) + 1
    return gzip.compress(data[:half]) + gzip.compress(data[half:])


def _zipped(data: bytes) -> bytes:
    import io

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("export/orders.csv", data)
    return buffer.getvalue()


FORMATS = {
    "orders.csv.gz": _two_members,
    "orders.csv.bz2": bz2.compress,
    "orders.csv.xz": lzma.compress,
    "orders.csv.zip": _zipped,
}


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_a_compressed_file_is_imported_decompressed_validated_or_not(name, dags_module, datatables_conn, tmp_path):
    path = tmp_path / name
    path.write_bytes(FORMATS[name](CSV))

    dag_run = run_formats(validated=str(path), unchecked=str(path))

    for task in ("validated", "unchecked"):
        assert state(dag_run, task) == "success", task
        card_id = xcom(dag_run, task)
        assert datatables_conn.received_bytes(card_id) == CSV, task  # every member, every row
        made = table_of(card_id)
        assert (made.name, made.rows) == ("orders", ROWS), task


def test_a_gzip_file_named_csv_is_told_by_its_first_bytes(dags_module, datatables_conn, tmp_path):
    path = tmp_path / "orders.csv"
    path.write_bytes(gzip.compress(CSV))

    source = open_source(path)
    assert source.compression is not None and source.compression.name == "gzip"
    assert read_plan(source).reading is Reading.STAGED
    dag_run = run_formats(validated=str(path), unchecked=str(path))

    for task in ("validated", "unchecked"):
        assert state(dag_run, task) == "success", task
        assert datatables_conn.received_bytes(xcom(dag_run, task)) == CSV, task


def test_a_file_cut_short_fails_before_sending_naming_where(dags_module, datatables_conn, tmp_path):
    data = gzip.compress(CSV)
    path = tmp_path / "orders.csv.gz"
    path.write_bytes(data[: len(data) // 2])
    datatables_conn.reset_stats()
    credits = datatables_conn.credits()

    report = validate_source(open_source(path))
    dag_run = run_formats(validated=str(path), unchecked=str(path))

    assert not report.ok
    message = str(report.errors[0])
    assert str(path) in message and "cut short" in message and "compressed byte" in message, message
    assert state(dag_run, "validated") == "failed" and state(dag_run, "unchecked") == "failed"
    assert datatables_conn.stats()["imports_accepted"] == 0 and datatables_conn.credits() == credits


def test_a_suffix_that_lies_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "orders.csv.gz"
    path.write_bytes(CSV)

    with pytest.raises(SourceError, match=r"orders\.csv\.gz.*named like a gzip file"):
        open_source(path)


def test_a_bomb_is_refused_once_512_mb_came_out_and_nothing_is_sent(datatables_conn, tmp_path):
    from airflow_tables.hooks.tables import DataTablesHook

    # 576 MiB of one row repeated: a member of 64 MiB, compressed once, then written nine times over.
    block = b"1,north,3\n" * (64 * 2**20 // 10)
    member = gzip.compress(block, compresslevel=1)
    parts = [gzip.compress(HEADER, compresslevel=1), *([member] * 9)]
    path = tmp_path / "bomb.csv.gz"
    path.write_bytes(b"".join(parts))
    assert path.stat().st_size < 8 * 2**20
    datatables_conn.reset_stats()
    credits = datatables_conn.credits()

    with pytest.raises(SourceError) as info:
        DataTablesHook().import_csv(None, path)
    report = validate_source(open_source(path))

    assert f"more than the service's {MAX_BYTES:,} bytes once decompressed" in str(info.value)
    assert "nothing was sent" in str(info.value) and str(path) in str(info.value)
    assert not report.ok and "512" in str(report.errors[0])
    assert datatables_conn.stats()["requests"] == [] and datatables_conn.credits() == credits


def test_a_compressed_object_is_read_once_and_imported(dags_module, datatables_conn, s3_server, bucket):
    key = "exports/2026-11-29/orders.csv.gz"
    s3_server.put(bucket, key, _two_members(CSV))

    dag_run = run_formats(validated=f"s3://{CONN_ID}@{bucket}/{key}")

    assert state(dag_run, "validated") == "success"
    card_id = xcom(dag_run, "validated")
    assert datatables_conn.received_bytes(card_id) == CSV
    assert table_of(card_id).name == "orders"
    assert s3_server.reads(bucket, key) == 1  # decompressed into the copy that is validated and sent


def test_a_plain_named_object_stored_compressed_is_validated_and_sent_decompressed(
    dags_module, datatables_conn, s3_server, bucket
):
    key = "exports/orders.csv"
    s3_server.put(bucket, key, gzip.compress(CSV))
    uri = f"s3://{CONN_ID}@{bucket}/{key}"

    report = validate_source(open_source(uri))
    dag_run = run_formats(validated=uri)

    assert report.ok and report.rows == ROWS
    assert state(dag_run, "validated") == "success"
    assert datatables_conn.received_bytes(xcom(dag_run, "validated")) == CSV


def test_a_plain_named_object_stored_compressed_and_sent_unchecked_is_cut_off(datatables_conn, s3_server, bucket):
    from tests.sources.conftest import cut_off_import

    from airflow_tables.hooks.tables import DataTablesHook

    key = "exports/unchecked.csv"
    s3_server.put(bucket, key, gzip.compress(CSV))

    message = cut_off_import(DataTablesHook(), datatables_conn, f"s3://{CONN_ID}@{bucket}/{key}")

    assert "gzip" in message and ".gz" in message, message


def test_the_cli_validates_a_compressed_file(tmp_path, capsys):
    from airflow_tables.cli import main

    path = tmp_path / "orders.csv.xz"
    path.write_bytes(lzma.compress(CSV))

    status = main(["validate", str(path)])

    out = capsys.readouterr().out
    assert status == 0, out
    assert f"{ROWS:,}" in out or str(ROWS) in out, out
