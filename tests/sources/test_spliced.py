"""The good rows of a quarantine, read from the file's own kept ranges (sources/spliced.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_tables.sources import open_source
from airflow_tables.sources.spliced import SplicedReader, ranges_of, spliced_source, write_spliced

DATA = bytes(range(256)) * 40  # 10,240 bytes, each offset's byte known


@st.composite
def kept_ranges(draw):
    """Ordered, non-overlapping (offset, length) ranges of DATA, as a sorter keeps them."""
    cuts = sorted(set(draw(st.lists(st.integers(min_value=0, max_value=len(DATA)), max_size=12))))
    edges = [0, *cuts, len(DATA)]
    spans = [(a, b - a) for a, b in zip(edges, edges[1:], strict=False) if b > a]
    return [span for i, span in enumerate(spans) if draw(st.booleans()) or i == 0]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(kept_ranges(), st.integers(min_value=1, max_value=5000))
def test_the_kept_ranges_read_as_one_file_whatever_the_reader_asks_for(tmp_path_factory, kept, block):
    path = tmp_path_factory.mktemp("spliced") / "orders.csv"
    path.write_bytes(DATA)
    expected = b"".join(DATA[offset : offset + length] for offset, length in kept)
    got = bytearray()
    with SplicedReader(ranges_of(str(path), kept)) as reader:
        buffer = bytearray(block)
        while n := reader.readinto(buffer):
            got += buffer[:n]
    assert bytes(got) == expected
    copy = path.with_name("copy.csv")
    write_spliced(str(path), kept, str(copy))
    assert copy.read_bytes() == expected


def test_a_spliced_source_is_sent_as_its_kept_bytes_under_the_files_name(tmp_path):
    path = tmp_path / "orders.csv"
    path.write_bytes(b"id,name\n1,a\n2,b,extra\n3,c\n")
    source = spliced_source(open_source(str(path)), [(0, 12), (22, 4)])
    assert (source.name, source.label, source.utf8_size(), source.local_path) == ("orders.csv", str(path), 16, None)
    assert b"".join(bytes(b) for b in source.blocks(5)) == b"id,name\n1,a\n3,c\n"
    with source.open() as f:
        assert f.read() == b"id,name\n1,a\n3,c\n"


def test_a_file_that_shrank_reads_short_and_a_copy_of_it_fails(tmp_path):
    """The sender compares what it read with the size it announced; a copy names the file."""
    path = tmp_path / "orders.csv"
    path.write_bytes(DATA[:100])
    kept = [(0, 50), (80, 60)]  # sorted when the file was 140 bytes long
    with SplicedReader(ranges_of(str(path), kept)) as reader:
        assert reader.read() == DATA[:50] + DATA[80:100]
    with pytest.raises(OSError, match="orders.csv became shorter"):
        write_spliced(str(path), kept, str(tmp_path / "copy.csv"))
