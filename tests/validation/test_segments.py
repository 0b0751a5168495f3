"""A stream scanned in segments on two threads says exactly what the serial scan of it says.

Segments are cut at guessed record boundaries (the last line break of what was read); a
guess inside a quoted field, a record that is not plain or one too long for a segment
sends the rest to the serial scan. Here segments are made tiny, so that every file is cut
in many places, cuts fall inside quoted fields, and the hand-over to the serial scan
happens at every kind of place; the answers are compared with ``scan_file``'s and with the
serial stream scan's, field for field.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.validation.test_corpus import CORPUS, RECORDS
from tests.validation.test_properties import tables, written
from tests.validation.test_scan import Trickle, plain_sales

from airflow_tables.validation import segments
from airflow_tables.validation.scan import scan_file, scan_stream

FIXTURE = HealthCheck.function_scoped_fixture


@pytest.fixture(autouse=True)
def native_only(scan_kernel):
    if scan_kernel != "native":
        pytest.skip("segments are scanned on threads only by the native kernel (it releases the GIL)")


class Spy:
    """Counts the segments scanned and the hand-overs to the serial scan."""

    def __init__(self, monkeypatch) -> None:
        self.scanned = 0
        self.handed_over = 0
        scan, chain = segments._scan, segments._Chain

        def counting_scan(*args):
            self.scanned += 1
            return scan(*args)

        def counting_chain(*args):
            self.handed_over += 1
            return chain(*args)

        monkeypatch.setattr(segments, "_scan", counting_scan)
        monkeypatch.setattr(segments, "_Chain", counting_chain)


@pytest.fixture
def spy(monkeypatch):
    return Spy(monkeypatch)


def three_ways(data: bytes, segment_bytes: int, monkeypatch, piece: int = 4096, column_types: bool = False):
    """scan_file's answer, the segmented stream's and the serial stream's (``None``: left to a local copy)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.csv"
        path.write_bytes(data)
        expected = dataclasses.asdict(scan_file(path, column_types=column_types))
        with monkeypatch.context() as m:
            m.setattr(segments, "SEGMENT_BYTES", segment_bytes)
            m.setattr(segments, "THREADS", 2)
            cut = scan_stream(Trickle(data, piece), str(path), len(data), column_types=column_types)
        with monkeypatch.context() as m:
            m.setattr(segments, "THREADS", 1)
            serial = scan_stream(Trickle(data, piece), str(path), len(data), column_types=column_types)
    as_dict = None if cut is None else dataclasses.asdict(cut)
    return expected, as_dict, None if serial is None else dataclasses.asdict(serial)


@pytest.mark.parametrize("segment_bytes", [64, 1000, 65536])
def test_a_plain_file_cut_in_segments_scans_as_one_piece(monkeypatch, spy, segment_bytes):
    data = plain_sales(3000)  # every fourth record holds a line break inside quotes
    expected, cut, serial = three_ways(data, segment_bytes, monkeypatch, column_types=True)
    assert cut == expected == serial
    assert cut["rows"] == 3000 and cut["column_types"] == expected["column_types"]
    assert spy.scanned >= len(data) // segment_bytes // 2, "the file was not scanned in segments"


def test_a_cut_inside_a_quoted_field_is_scanned_again_from_its_records_start(monkeypatch, spy):
    # Four of every five line breaks are inside quotes: many cuts are wrong guesses.
    data = b"id,text\n" + b"".join(b'%d,"w\nw\nw\nw"\n' % i for i in range(5000))
    expected, cut, serial = three_ways(data, 1000, monkeypatch)
    assert cut == expected == serial and cut["rows"] == 5000
    assert spy.handed_over == 0, "a wrong guess costs a second scan of two segments, not the serial scan"
    assert spy.scanned > len(data) / 1000 + 10, "the wrong guesses were not scanned again"


def test_a_quoted_field_longer_than_half_a_segment_hands_over_to_the_serial_scan(monkeypatch, spy):
    data = b"id,text\n" + b"".join(b'%d,"' % i + b"word\n" * 30 + b'"\n' for i in range(400))
    expected, cut, serial = three_ways(data, 256, monkeypatch)
    assert cut == expected == serial and cut["rows"] == 400
    assert spy.handed_over == 1


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("ragged row", b"1,2,3\n"),
        ("not UTF-8", b"1,\xff\n"),
        ("NUL byte", b"1,\x00\n"),
        ("quote inside a field", b'1,x"y\n'),
        ("blank line", b"\n"),
    ],
)
@pytest.mark.parametrize("where", [0.1, 0.5, 0.99])
def test_a_record_only_an_exact_read_describes_is_left_to_the_local_copy_wherever_it_is(
    monkeypatch, spy, name, bad, where
):
    good = b"a,b\n" + b"".join(b"%d,x\n" % i for i in range(5000))
    at = good.index(b"\n", int(len(good) * where)) + 1
    expected, cut, serial = three_ways(good[:at] + bad + good[at:], 512, monkeypatch)
    assert cut is None and serial is None, name
    assert spy.scanned > 1


def test_a_record_longer_than_half_a_segment_is_read_serially(monkeypatch, spy):
    data = b"a,b\n" + b"".join(b"%d,%s\n" % (i, b"y" * (300 if i == 700 else 3)) for i in range(2000))
    expected, cut, serial = three_ways(data, 256, monkeypatch)
    assert cut == expected == serial
    assert spy.handed_over == 1


def test_a_file_without_a_line_break_at_its_end_and_one_with_old_mac_breaks(monkeypatch, spy):
    lf = b"a,b\n" + b"".join(b"%d,x\n" % i for i in range(3000))
    for data in (lf.rstrip(b"\n"), lf.replace(b"\n", b"\r\n"), lf.replace(b"\n", b"\r")):
        expected, cut, serial = three_ways(data, 200, monkeypatch)
        assert cut == expected == serial


def test_a_small_stream_is_scanned_serially(monkeypatch, spy):
    data = plain_sales(50)
    expected, cut, serial = three_ways(data, len(data), monkeypatch)  # under two segments
    assert cut == expected == serial and spy.scanned == 0


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow, FIXTURE])
@given(tables(), st.integers(min_value=16, max_value=200), st.integers(min_value=1, max_value=64))
def test_written_tables_scan_in_segments_as_in_one_piece(monkeypatch, table, segment_bytes, piece):
    data = written(table).encode()
    expected, cut, serial = three_ways(data, segment_bytes, monkeypatch, piece, column_types=True)
    assert cut == serial
    assert cut is None or cut == expected


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[FIXTURE])
@given(st.binary(max_size=400), st.integers(min_value=8, max_value=100))
def test_arbitrary_bytes_scan_in_segments_as_in_one_piece(monkeypatch, data, segment_bytes):
    expected, cut, serial = three_ways(data, segment_bytes, monkeypatch, 7)
    assert cut == serial
    assert cut is None or cut == expected


@pytest.mark.skipif(not RECORDS, reason=f"shared corpus not found at {CORPUS}")
def test_the_corpus_scans_in_segments_as_in_one_piece(monkeypatch, spy):
    for rec in RECORDS:
        data = (CORPUS / "files" / rec["file"]).read_bytes()
        expected, cut, serial = three_ways(data, 4096, monkeypatch, 65536, column_types=True)
        assert cut == serial, rec["file"]
        assert cut is None or cut == expected, rec["file"]
    assert spy.scanned > len(RECORDS)
