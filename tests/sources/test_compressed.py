"""Compressed files read as their decompressed bytes: every member, a cut file named where it ends, bombs stopped."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import random
import sys
import zipfile
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_tables.sources.compressed import (
    BZIP2,
    GZIP,
    XZ,
    ZIP,
    ZSTD,
    Compression,
    Decompressed,
    detect,
    open_zip_member,
)
from airflow_tables.sources.errors import SourceError

CSV = b"order_id,region,amount\n" + b"".join(b"%d,North,%d\n" % (i, i * 3) for i in range(5000))

try:
    try:
        from compression import zstd as _zstd  # type: ignore[import-not-found]
    except ImportError:
        from backports import zstd as _zstd  # type: ignore[import-not-found,no-redef]
except ImportError:
    _zstd = None

COMPRESS = {
    "gzip": (GZIP, gzip.compress),
    "bzip2": (BZIP2, bz2.compress),
    "xz": (XZ, lzma.compress),
}
if _zstd is not None:
    COMPRESS["zstandard"] = (ZSTD, _zstd.compress)


def read_all(data: bytes, compression: Compression, limit: int | None = None, size: int = 65536) -> bytes:
    out = bytearray()
    with Decompressed(io.BytesIO(data), compression, "orders.csv.x", limit) as stream:
        while chunk := stream.read(size):
            out += chunk
    return bytes(out)


@pytest.mark.parametrize("name", sorted(COMPRESS))
def test_each_format_is_told_by_its_first_bytes_and_read_whole(name):
    compression, compress = COMPRESS[name]
    data = compress(CSV)
    assert detect("f", "orders.csv", data[:16]) is compression  # whatever the file is called
    assert read_all(data, compression) == CSV


@pytest.mark.parametrize("name", sorted(COMPRESS))
def test_every_member_is_read_not_only_the_first(name):
    compression, compress = COMPRESS[name]
    half = len(CSV) // 2
    data = compress(CSV[:half]) + compress(CSV[half:])  # cat a.gz b.gz; pigz, pbzip2 and xz -T write several
    with Decompressed(io.BytesIO(data), compression, "parts") as stream:
        assert stream.read() == CSV
        assert stream.members == 2


def test_zeros_after_a_gzip_member_are_padding_not_a_member():
    assert read_all(gzip.compress(CSV) + b"\0" * 1000, GZIP) == CSV


@pytest.mark.parametrize("name", sorted(COMPRESS))
@pytest.mark.parametrize("keep", [0.3, 0.99])
def test_a_file_cut_short_is_refused_naming_the_file_and_where(name, keep):
    compression, compress = COMPRESS[name]
    data = compress(CSV)
    cut = data[: int(len(data) * keep)]
    with pytest.raises(SourceError) as raised:
        read_all(cut, compression)
    message = str(raised.value)
    assert "orders.csv.x" in message and "compressed byte" in message
    assert "cut short" in message or "not valid" in message


def test_a_second_member_cut_short_names_the_member():
    data = gzip.compress(CSV) + gzip.compress(CSV)[:100]
    with pytest.raises(SourceError, match=r"member 2"):
        read_all(data, GZIP)


@pytest.mark.parametrize("name", sorted(COMPRESS))
def test_bytes_that_are_not_the_format_are_refused(name):
    compression, compress = COMPRESS[name]
    data = bytearray(compress(CSV))
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(64)  # a run of zeros in the middle of the compressed data
    with pytest.raises(SourceError, match="orders.csv.x"):
        read_all(bytes(data), compression)


def test_garbage_after_a_gzip_member_is_refused():
    with pytest.raises(SourceError, match="not valid"):
        read_all(gzip.compress(CSV) + b"this is not gzip", GZIP)


def test_a_bomb_stops_one_byte_past_the_limit_having_read_little():
    """A gigabyte of zeros (a megabyte compressed) against a 10 MB limit: stopped early and cheaply."""
    block = gzip.compress(b"\0" * (64 * 1024 * 1024), compresslevel=9)
    data = block * 16  # 1 GiB decompressed, 16 members
    raw = io.BytesIO(data)
    stream = Decompressed(raw, GZIP, "bomb.csv.gz", limit=10_000_000)
    total = 0
    while chunk := stream.read(1024 * 1024):
        total += len(chunk)
    assert total == 10_000_001 and stream.over_limit
    assert raw.tell() <= len(block) + 256 * 1024  # only the first member's bytes (one read block more at most)


def test_reads_of_any_size_give_the_same_bytes():
    data = gzip.compress(CSV[:7000]) + gzip.compress(CSV[7000:])
    for size in (1, 7, 4096, 1 << 20):
        assert read_all(data, GZIP, size=size) == CSV


@settings(max_examples=60, deadline=None)
@given(
    payload=st.binary(max_size=20_000),
    cuts=st.lists(st.integers(min_value=0, max_value=20_000), max_size=4),
    name=st.sampled_from(sorted(COMPRESS)),
    size=st.integers(min_value=1, max_value=70_000),
    limit=st.none() | st.integers(min_value=0, max_value=25_000),
)
def test_any_split_into_members_reads_back_the_payload(payload, cuts, name, size, limit):
    compression, compress = COMPRESS[name]
    bounds = sorted({0, len(payload), *(c for c in cuts if c <= len(payload))})
    data = b"".join(compress(payload[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)) or compress(b"")
    got = read_all(data, compression, limit=limit, size=size)
    if limit is None or len(payload) <= limit:
        assert got == payload
    else:
        assert got == payload[: limit + 1]


def test_zstandard_without_its_decoder_is_refused_naming_the_file_and_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "compression.zstd", None)  # None in sys.modules: the import fails
    monkeypatch.setitem(sys.modules, "backports.zstd", None)
    with pytest.raises(SourceError, match=r"cannot read events\.csv\.zst: .*backports\.zstd; nothing was sent"):
        Decompressed(io.BytesIO(b"\x28\xb5\x2f\xfd"), ZSTD, "events.csv.zst")


def test_a_suffix_that_the_bytes_deny_is_refused():
    with pytest.raises(SourceError, match=r"named like a gzip file but its first bytes are not gzip"):
        detect("s3://b/orders.csv.gz", "orders.csv.gz", b"order_id,region\n")
    assert detect("orders.csv", "orders.csv", b"order_id,region\n") is None


@pytest.mark.parametrize(
    ("compression", "name", "table"),
    [(GZIP, "orders.csv.gz", "orders.csv"), (ZSTD, "Orders.CSV.ZST", "Orders.CSV"), (ZIP, "orders.zip", "orders")],
)
def test_the_table_is_named_without_the_compression_suffix(compression, name, table):
    assert compression.strip_suffix(name) == table


def zipped(members: dict[str, bytes]) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in members.items():
            archive.writestr(member, data)
    buffer.seek(0)
    return buffer


def test_a_zip_of_one_csv_is_read_by_its_member_s_name():
    name, stream = open_zip_member(zipped({"export/orders.csv": CSV}), "orders.zip")
    assert detect("orders.zip", "orders.zip", zipped({"a.csv": b"x"}).read(8)) is ZIP
    assert name == "orders.csv" and stream.read() == CSV


@pytest.mark.parametrize("members", [{}, {"a.csv": CSV, "b.csv": CSV}, {"orders.tsv": CSV}])
def test_a_zip_of_no_file_of_several_or_of_another_kind_is_refused_naming_them(members):
    with pytest.raises(SourceError, match=rf"exactly one \.csv file.*holds {len(members)} file"):
        open_zip_member(zipped(members), "orders.zip")


def test_what_macos_adds_to_a_zip_is_not_a_file_of_it():
    members = {"orders.csv": CSV, "__MACOSX/._orders.csv": b"\0\5\x16\7", ".DS_Store": b"\0"}
    name, stream = open_zip_member(zipped(members), "orders.zip")
    assert name == "orders.csv" and stream.read() == CSV


def test_a_zip_cut_short_is_refused():
    data = zipped({"orders.csv": CSV}).getvalue()
    with pytest.raises(SourceError, match="not a valid zip"):
        open_zip_member(io.BytesIO(data[: len(data) - random.Random(1).randint(30, 200)]), "orders.zip")


@pytest.mark.parametrize("inflate", ["zlib", "zlib_ng"])
def test_gzip_reads_the_same_with_zlib_or_zlib_ng(monkeypatch, inflate):
    """zlib-ng inflates when it is installed (the s3 extra brings it); zlib's own is the fallback."""
    import airflow_tables.sources.compressed as compressed

    module = zlib if inflate == "zlib" else pytest.importorskip("zlib_ng.zlib_ng")
    monkeypatch.setattr(compressed, "_INFLATE", module)
    members = gzip.compress(CSV[:5000]) + gzip.compress(CSV[5000:])
    assert read_all(members, GZIP) == CSV
    with pytest.raises(SourceError, match="cut short"):
        read_all(members[:-20], GZIP)
