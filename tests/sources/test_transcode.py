"""The native transcoder (``sources/_transcode.c``) against malformed and real tables."""

from __future__ import annotations

import subprocess
import sys

import pytest

_BAD_TABLE_PROBE = """
import sys
from airflow_tables.sources import _transcode
from airflow_tables.sources.transcode import declared

good = bytearray(declared("cp1252").table)
case = sys.argv[1]
table = bytearray(good)
if case == "long entry":  # a length byte far past an entry's three bytes of UTF-8
    table[4 * 0x80 + 3] = 0x7F
elif case == "long undefined entry":
    table[4 * 0x81 + 3] = 0x80 | 0x7F
elif case == "empty entry":
    table[4 * 0x80 + 3] = 0
elif case == "ascii not the same":  # ascii_same promised, but the table maps "a" elsewhere
    table[4 * ord("a") : 4 * ord("a") + 4] = b"b\\0\\0\\x01"
source = bytes(range(256)) + bytes([0x80, 0x81]) * (1 << 20)  # every entry, then the long ones often
try:
    _transcode.single_byte_to_utf8(source, bytes(table), True, bytearray(3 * len(source)))
    _transcode.single_byte_to_utf8(source, bytes(table), True, None)
except ValueError as err:
    print("ValueError:", err)
else:
    print("accepted")
"""


@pytest.mark.parametrize("case", ["long entry", "long undefined entry", "empty entry", "ascii not the same"])
def test_the_transcoder_refuses_a_malformed_table(case):
    """The private C transcoder checks its table's length bytes (a hand-made table wrote past its target).

    In a child process, so that a crash fails this test instead of ending pytest.
    """
    pytest.importorskip("airflow_tables.sources._transcode")
    probe = subprocess.run(
        [sys.executable, "-c", _BAD_TABLE_PROBE, case], capture_output=True, text=True, timeout=60, check=False
    )
    assert probe.returncode == 0, f"the transcoder crashed (exit {probe.returncode}): {probe.stderr[-500:]}"
    assert probe.stdout.startswith("ValueError:") and "table" in probe.stdout, probe.stdout


def test_the_transcoder_takes_the_tables_it_builds():
    _transcode = pytest.importorskip("airflow_tables.sources._transcode")
    from airflow_tables.sources.transcode import declared

    for name in ("cp1252", "latin-1", "cp437", "koi8-r", "ascii"):
        codec = declared(name)
        assert codec is not None and codec.table is not None
        source = bytes(range(256))
        written, _ = _transcode.single_byte_to_utf8(source, codec.table, codec.ascii_same, None)
        assert written == len(source.decode(codec.name, errors="replace").encode())


@pytest.mark.parametrize(
    "encoding", ["cp1252", "latin-1", "iso8859-15", "koi8-r", "cp437", "cp874", "cp1255", "mac-roman"]
)
def test_the_count_agrees_with_the_conversion_at_every_offset_and_density(encoding):
    """Counting alone (no target) sums high bytes in SIMD lanes and looks up only a code page's odd ones.

    Its answer must be the conversion's: the length written and the first undefined byte, for
    high bytes at every offset of the 64-byte steps and of the 4032-byte stretches that are
    looked up byte by byte, sparse and dense, in code pages whose odd bytes lie in different
    ranges (none at all in Latin-1; 3-byte and undefined ones mixed with 2-byte ones elsewhere).
    """
    _transcode = pytest.importorskip("airflow_tables.sources._transcode")
    import random

    from airflow_tables.sources.transcode import declared

    codec = declared(encoding)
    assert codec is not None and codec.table is not None and codec.ascii_same
    rng = random.Random(encoding)
    for density in (0.0, 0.002, 0.05, 0.5, 1.0):
        for length in (0, 1, 63, 64, 65, 4031, 4032, 4033, 3 * 4032 + 77, 70_000):
            data = bytes(
                rng.randrange(0x80, 256) if rng.random() < density else rng.choice(b"ab,\n") for _ in range(length)
            )
            converted = _transcode.single_byte_to_utf8(data, codec.table, True, bytearray(3 * length))
            assert _transcode.single_byte_to_utf8(data, codec.table, True, None) == converted, (density, length)
            written, _ = converted
            assert written == len(data.decode(codec.name, errors="replace").encode())
    late = bytearray(b"x" * 9000)  # a single high byte at each offset around a stretch's end
    for at in range(4000, 4100):
        late[at] = 0x80 + at % 128
        assert _transcode.single_byte_to_utf8(bytes(late), codec.table, True, None) == _transcode.single_byte_to_utf8(
            bytes(late), codec.table, True, bytearray(3 * len(late))
        )
        late[at] = ord("x")


def test_a_mapped_file_cut_short_while_it_is_counted_is_an_error_not_a_crash(tmp_path, monkeypatch):
    """Issue 36 point 15: a cp1252 file truncated while it was counted killed the worker with SIGBUS, no message.

    The kernel reads a mapping whose file was cut to one page: the pages past it raise SIGBUS,
    which the kernel turns into an OSError on its own thread; the process goes on (the same kernel
    then counts again). Through the source, the error names the file.
    """
    import mmap
    import os

    from airflow_tables.sources import SourceError, mapped, open_source
    from airflow_tables.sources.mapped import WINDOW
    from airflow_tables.sources.transcode import count_single_byte, counts_natively, declared

    codec = declared("cp1252")
    if not counts_natively(codec):
        pytest.skip("the C kernel is not built here")
    path = tmp_path / "legacy.csv"
    path.write_bytes(b"caf\xe9,1\n" * 2_000_000)  # 16 MB
    with open(path, "rb") as f:
        mapping = mmap.mmap(f.fileno(), os.path.getsize(path), access=mmap.ACCESS_READ)
        os.truncate(path, 4096)
        with pytest.raises(OSError, match=r"SIGBUS\): the mapped file was cut short"):
            count_single_byte(codec, memoryview(mapping))
        mapping.close()
    assert count_single_byte(codec, b"caf\xe9") == (5, False)

    path.write_bytes(b"caf\xe9,1\n" * (WINDOW // 4))  # two windows: the first one's work cuts the file short
    source = open_source(path, encoding="cp1252")
    each_window = mapped.each_window

    def cut_while_counting(where, purpose, work, workers):
        def first_cuts(view):
            os.truncate(where, 4096)
            return work(view)

        return each_window(where, purpose, first_cuts, 1)

    monkeypatch.setattr(mapped, "each_window", cut_while_counting)  # another process, cutting the file meanwhile
    with pytest.raises(SourceError) as err:
        source.utf8_size()
    assert str(path) in str(err.value) and "changed while it was counted" in str(err.value)
