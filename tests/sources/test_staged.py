"""A staged copy can be read as it is written: the operators validate an object in the pass that copies it.

``staged(source, reader=...)`` gives ``reader`` the object's bytes as a stream while they are
copied; ``copy_scanner`` is the validator's reader, and ``validate_source`` of the copy then
answers from that scan, field for field what a scan of the copy would say, or scans the copy
when only an exact read can describe it. Against a real S3 server (``tests/_s3.py``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from tests.sources.conftest import CONN_ID
from tests.sources.test_storage import ORDERS

from airflow_tables.sources import open_source, staged
from airflow_tables.validation import validate_csv, validate_source
from airflow_tables.validation.report import copy_scanner


@pytest.fixture
def put(s3_server, bucket):
    """``put(data)``: the ``s3://`` URI of a new object holding ``data``."""

    def make(data: bytes, key: str = "orders.csv") -> str:
        s3_server.put(bucket, key, data)
        return f"s3://{CONN_ID}@{bucket}/{key}"

    return make


def test_a_reader_sees_the_objects_bytes_as_they_are_copied(put):
    uri = put(ORDERS.encode())
    with staged(open_source(uri), reader=lambda stream: stream.read()) as local:
        assert local.read_while_copied == ORDERS.encode()
        assert Path(local.local_path).read_bytes() == ORDERS.encode() and local.complete


def test_what_a_reader_leaves_unread_is_copied_after_it(put):
    uri = put(ORDERS.encode())
    with staged(open_source(uri), reader=lambda stream: stream.read(10)) as local:
        assert local.read_while_copied == ORDERS.encode()[:10]
        assert Path(local.local_path).read_bytes() == ORDERS.encode() and local.complete


def test_a_copy_stopped_at_its_limit_keeps_nothing_its_reader_found(put):
    uri = put(ORDERS.encode())
    with staged(open_source(uri), max_bytes=100, reader=lambda stream: stream.read()) as local:
        assert not local.complete and local.read_while_copied is None


def test_a_declared_encoding_is_copied_converted_and_read_by_nobody_on_the_way(put):
    uri = put(ORDERS.replace("North", "Zürich").encode("cp1252"))
    called = []
    with staged(open_source(uri, encoding="cp1252"), reader=called.append) as local:
        assert called == [] and local.read_while_copied is None
        assert Path(local.local_path).read_text(encoding="utf-8") == ORDERS.replace("North", "Zürich")


def test_an_object_validated_as_it_is_copied_is_not_scanned_again(put, tmp_path, copy_scans):
    uri = put(ORDERS.encode())
    source = open_source(uri)
    with staged(source, reader=copy_scanner(source, column_types=True)) as local:
        report = validate_source(local, column_types=True)
    assert copy_scans == []
    local_file = tmp_path / "orders.csv"
    local_file.write_bytes(ORDERS.encode())
    expected = validate_csv(local_file, column_types=True).to_dict()
    assert report.ok and report.rows == 40 and report.column_types == expected["column_types"]
    assert {**report.to_dict(), "path": None} == {**expected, "path": None}


def test_a_scan_made_with_other_arguments_is_not_used(put, copy_scans):
    uri = put(ORDERS.encode())
    source = open_source(uri)
    with staged(source, reader=copy_scanner(source)) as local:
        report = validate_source(local, column_types=True)  # types were not asked of the scan made while copying
    assert len(copy_scans) == 1 and report.column_types is not None


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("ragged row", ORDERS + "41,South\n"),
        ("quote inside a field", ORDERS.replace("23,North", '23,No"rth')),
        ("blank lines", ORDERS.replace("\n30,", "\n\n\n30,")),
    ],
)
def test_an_object_only_an_exact_read_describes_gets_the_copys_exact_report(put, tmp_path, copy_scans, name, text):
    uri = put(text.encode())
    source = open_source(uri)
    with staged(source, reader=copy_scanner(source)) as local:
        report = validate_source(local)
    assert len(copy_scans) == 1, name  # the copy, read exactly, names the line
    local_file = tmp_path / "orders.csv"
    local_file.write_bytes(text.encode())
    expected = dataclasses.replace(validate_csv(local_file), path=report.path)
    assert report == expected, name
