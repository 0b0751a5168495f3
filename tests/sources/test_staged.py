"""A staged copy can be read as it is written: the operators validate an object in the pass that copies it.

``staging(source)`` gives the object's bytes as a stream while they are copied; ``scanned_copy``
is the validator's way of reading it, and ``validate_source`` of the copy then answers from that
scan (``CopyScan``, kept with the question it answered), field for field what a scan of the
copy would say, or scans the copy when only an exact read can describe it, or when it is asked
another question, which it says. Against a real S3 server (``tests/_s3.py``), whose request
log counts the object's reads.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from pathlib import Path

import pytest
from tests.sources.conftest import CONN_ID
from tests.sources.test_storage import ORDERS

from airflow_tables.sources import CopyScan, NotCopyScanned, open_source, staged, staging
from airflow_tables.validation import validate_csv, validate_source
from airflow_tables.validation.report import scanned_copy


@pytest.fixture
def put(s3_server, bucket):
    """``put(data)``: the ``s3://`` URI of a new object holding ``data``."""

    def make(data: bytes, key: str = "orders.csv") -> str:
        s3_server.put(bucket, key, data)
        return f"s3://{CONN_ID}@{bucket}/{key}"

    return make


def test_a_reader_sees_the_objects_bytes_as_they_are_copied(put):
    uri = put(ORDERS.encode())
    with staging(open_source(uri)) as copy:
        assert copy.stream is not None and copy.stream.read() == ORDERS.encode()
        local = copy.done(CopyScan("found", made_with="question"))
        assert local.copy_scan_for("question") == CopyScan("found", made_with="question")
        assert Path(local.local_path).read_bytes() == ORDERS.encode() and local.complete


def test_what_a_reader_leaves_unread_is_copied_after_it(put):
    uri = put(ORDERS.encode())
    with staging(open_source(uri)) as copy:
        assert copy.stream is not None and copy.stream.read(10) == ORDERS.encode()[:10]
        local = copy.done()
        assert Path(local.local_path).read_bytes() == ORDERS.encode() and local.complete


def test_a_copy_stopped_at_its_limit_keeps_nothing_its_reader_found(put):
    uri = put(ORDERS.encode())
    with staging(open_source(uri), max_bytes=100) as copy:
        assert copy.stream is not None
        copy.stream.read()
        local = copy.done(CopyScan("found", made_with="question"))
        assert not local.complete and local.copy_scan is None


def test_a_declared_encoding_is_copied_converted_and_read_by_nobody_on_the_way(put):
    uri = put(ORDERS.replace("North", "Zürich").encode("cp1252"))
    with staging(open_source(uri, encoding="cp1252")) as copy:
        assert copy.stream is None  # converted bytes do not fit a reader's buffer one for one
        local = copy.done()
        assert Path(local.local_path).read_text(encoding="utf-8") == ORDERS.replace("North", "Zürich")


def test_a_local_utf8_file_is_read_in_place_not_copied(tmp_path):
    path = tmp_path / "orders.csv"
    path.write_bytes(ORDERS.encode())
    source = open_source(path)
    with staging(source) as copy:
        assert copy.stream is None and copy.done() is source
    with scanned_copy(source) as local:
        assert local is source


def test_a_copy_says_why_its_scan_cannot_answer_another_question(put):
    with staging(open_source(put(ORDERS.encode()))) as copy:
        local = copy.done(CopyScan("found", made_with="one question"))
        assert local.copy_scan_for("one question").found == "found"
        other = local.copy_scan_for("another question")
        assert other == NotCopyScanned(
            "the scan made while it was copied was made with one question, not another question", other_arguments=True
        )
    with staged(open_source(put(ORDERS.encode(), "plain.csv"))) as plain:
        assert plain.copy_scan_for("one question") == NotCopyScanned("nothing was scanned while it was copied")


def test_a_scan_made_while_copying_is_the_only_read_of_the_object(put, s3_server, bucket, copy_scans):
    """Counted at the storage (its GETs) and on disk (scans of the copy): the object's bytes are read once."""
    uri = put(ORDERS.encode(), "once/orders.csv")
    source = open_source(uri)
    with scanned_copy(source, column_types=True) as local:
        report = validate_source(local, column_types=True)
    assert report.ok and report.rows == 40
    assert s3_server.reads(bucket, "once/orders.csv") == 1 and copy_scans == []


def test_an_object_validated_as_it_is_copied_is_not_scanned_again(put, tmp_path, copy_scans):
    uri = put(ORDERS.encode())
    source = open_source(uri)
    with scanned_copy(source, column_types=True) as local:
        report = validate_source(local, column_types=True)
    assert copy_scans == []
    local_file = tmp_path / "orders.csv"
    local_file.write_bytes(ORDERS.encode())
    expected = validate_csv(local_file, column_types=True).to_dict()
    assert report.ok and report.rows == 40 and report.column_types == expected["column_types"]
    assert {**report.to_dict(), "path": None} == {**expected, "path": None}


def test_a_scan_made_with_other_arguments_is_not_used_and_the_log_says_why(put, copy_scans, caplog):
    uri = put(ORDERS.encode())
    source = open_source(uri)
    with scanned_copy(source) as local, caplog.at_level(logging.INFO, logger="airflow_tables.validation.report"):
        report = validate_source(local, column_types=True)  # types were not asked of the scan made while copying
    assert len(copy_scans) == 1 and report.column_types is not None
    assert [r.getMessage() for r in caplog.records] == [
        f"{uri}: the scan made while it was copied was made with max_columns=300, max_bytes=536,870,912, "
        "without column types, not max_columns=300, max_bytes=536,870,912, with column types; "
        "the copy is scanned again"
    ]


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
    with scanned_copy(source) as local:
        report = validate_source(local)
    assert len(copy_scans) == 1, name  # the copy, read exactly, names the line
    local_file = tmp_path / "orders.csv"
    local_file.write_bytes(text.encode())
    expected = dataclasses.replace(validate_csv(local_file), path=report.path)
    assert report == expected, name


def test_the_read_plan_is_decided_once_from_where_the_bytes_are_and_their_encoding(put, tmp_path):
    from airflow_tables.sources import Reading, TooLarge, read_plan

    path = tmp_path / "orders.csv"
    path.write_bytes(ORDERS.encode())
    uri = put(ORDERS.encode())
    size = len(ORDERS.encode())
    assert read_plan(open_source(path)).reading is Reading.IN_PLACE
    assert read_plan(open_source(path, encoding="cp1252")).reading is Reading.STAGED
    assert read_plan(open_source(uri)).reading is Reading.STREAMED
    assert read_plan(open_source(uri), max_bytes=100).too_large == TooLarge(size, at_least=False)
    assert read_plan(open_source(path), max_bytes=100).too_large is None  # a local file's scan says where
    with staged(open_source(uri), max_bytes=100) as cut:
        assert read_plan(cut, max_bytes=100).too_large == TooLarge(100, at_least=True)


@pytest.mark.parametrize("encoding", [None, "cp1252"])
def test_a_copy_of_an_object_that_changed_size_is_refused_where_its_end_is_read(put, encoding):
    """The read itself holds the object to its listed size (``Source.open_listed``): no reader compares sizes."""
    from airflow_tables.sources import SourceError

    listed, grown = ORDERS.encode(), (ORDERS + "41,South,1,x\n").encode()
    source = open_source(put(listed), encoding=encoding)  # its size as listed
    put(grown)
    expected = f"changed size while it was read ({len(listed):,} bytes listed, {len(grown):,} read)"
    with pytest.raises(SourceError, match=re.escape(expected)), staged(source):
        pass
    report = validate_source(source)
    assert [p.code for p in report.errors] == ["unreadable"] and expected in report.errors[0].message
