"""Scanning a stream as it arrives (an object in storage) says what scanning the same bytes in a file says.

``scan_stream`` reads once, forward only, in whatever pieces the stream hands over. Where
only an exact read can describe a file (a ragged row, a bad byte), it answers None and
``validate_source`` scans a local copy instead; whenever it does answer, the answer is
``scan_file``'s, field for field.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.validation.test_corpus import CORPUS, RECORDS
from tests.validation.test_properties import tables, written

from airflow_tables.validation.scan import scan_file, scan_stream

FIXTURE = HealthCheck.function_scoped_fixture


class Trickle(io.RawIOBase):
    """A forward-only stream that hands over at most ``piece`` bytes a read, as a network stream may."""

    def __init__(self, data: bytes, piece: int) -> None:
        super().__init__()
        self.data = memoryview(data)
        self.piece = piece
        self.at = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = min(len(buffer), self.piece, len(self.data) - self.at)
        buffer[:n] = self.data[self.at : self.at + n]
        self.at += n
        return n


def scanned_both_ways(data: bytes, piece: int, directory: str | Path):
    """(scan_file of the bytes in a file, scan_stream of the same bytes trickling in), with the same name."""
    path = Path(directory) / "t.csv"
    path.write_bytes(data)
    return dataclasses.asdict(scan_file(path)), scan_stream(Trickle(data, piece), str(path), len(data))


def plain_sales(rows: int) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(["id", "city", "note", "amount"])
    for i in range(rows):
        writer.writerow([i, "São Paulo" if i % 3 else "Zürich", f"a, b\nline {i}" if i % 4 == 0 else "plain", i * 7])
    return out.getvalue().encode()


@pytest.mark.parametrize("piece", [1, 7, 4096, 1 << 20])
def test_a_plain_file_streams_to_the_same_scan_in_any_pieces(tmp_path, piece):
    data = plain_sales(200 if piece < 100 else 60_000)  # the large one spans several 1 MiB chunks
    expected, streamed = scanned_both_ways(data, piece, tmp_path)
    assert streamed is not None, "a plain file needs no second read"
    assert dataclasses.asdict(streamed) == expected
    assert streamed.rows == (200 if piece < 100 else 60_000) and streamed.size_bytes == len(data)


def test_a_header_longer_than_the_sniffing_sample_and_a_bom_are_read_again_from_what_was_kept(tmp_path):
    header = ",".join(f"column_{i:05d}" for i in range(9000))  # ~117 KiB: past the 64 KiB sample
    data = b"\xef\xbb\xbf" + (header + "\n" + ",".join("1" * 9000) + "\n").encode()
    expected, streamed = scanned_both_ways(data, 5000, tmp_path)
    assert streamed is not None and dataclasses.asdict(streamed) == expected
    assert streamed.column_count == 9000 and streamed.rows == 1
    assert streamed.columns == [f"column_{i:05d}" for i in range(301)]  # named up to max_columns + 1


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("ragged row", b"a,b\n1,2\n3\n4,5\n"),
        ("not UTF-8", b"a,b\n1,2\n3,\xff\n"),
        ("NUL byte", b"a,b\n1,\x002\n"),
        ("quote inside a field", b'a,b\n1,x"y\n'),
        ("quote left open", b'a,b\n1,"xy\n2,3\n'),
        ("blank line", b"a,b\n1,2\n\n3,4\n"),
    ],
)
def test_what_only_an_exact_read_can_describe_is_left_to_the_local_copy(tmp_path, name, data):
    _, streamed = scanned_both_ways(data, 3, tmp_path)
    assert streamed is None, name


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("empty", b""),
        ("binary", b"\x89PNG\r\n\x1a\n" + bytes(100)),
        ("UTF-16", "a,b\n1,2\n".encode("utf-16")),
        ("header only", b"a,b,c\n"),
        ("no line break at the end", b"a,b\n1,2"),
    ],
)
def test_files_decided_by_their_first_bytes_stream_to_the_same_scan(tmp_path, name, data):
    expected, streamed = scanned_both_ways(data, 3, tmp_path)
    assert streamed is not None and dataclasses.asdict(streamed) == expected, name


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow, FIXTURE])
@given(tables(), st.integers(min_value=1, max_value=64))
def test_written_tables_stream_to_the_same_scan_or_to_none(table, piece):
    with tempfile.TemporaryDirectory() as tmp:
        expected, streamed = scanned_both_ways(written(table).encode(), piece, tmp)
    assert streamed is None or dataclasses.asdict(streamed) == expected


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[FIXTURE])
@given(st.binary(max_size=300), st.integers(min_value=1, max_value=64))
def test_arbitrary_bytes_stream_to_the_same_scan_or_to_none(data, piece):
    with tempfile.TemporaryDirectory() as tmp:
        expected, streamed = scanned_both_ways(data, piece, tmp)
    assert streamed is None or dataclasses.asdict(streamed) == expected


@pytest.mark.skipif(not RECORDS, reason=f"shared corpus not found at {CORPUS}")
def test_the_corpus_streams_to_the_same_scans(tmp_path):
    answered = 0
    for rec in RECORDS:
        data = (CORPUS / "files" / rec["file"]).read_bytes()
        expected, streamed = scanned_both_ways(data, 65536, tmp_path)
        if streamed is not None:
            answered += 1
            assert dataclasses.asdict(streamed) == expected, rec["file"]
    assert answered >= len(RECORDS) // 2, f"only {answered} of {len(RECORDS)} real files streamed"


def test_the_replay_goes_back_only_while_it_keeps_what_it_read():
    from airflow_tables.validation.scan import _Replay

    replay = _Replay(Trickle(b"0123456789", 3))
    assert replay.read(5) == b"01234"
    replay.seek(1)
    replay.forget()
    assert replay.read(6) == b"123456"  # what was kept, then the stream
    assert replay.read() == b"789"
    with pytest.raises(io.UnsupportedOperation):
        replay.seek(0)  # what was kept was let go
