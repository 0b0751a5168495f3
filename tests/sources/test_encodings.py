"""Declared encodings: legacy files are checked in their encoding, arrive as UTF-8, and bad bytes are named by line."""

from __future__ import annotations

import codecs
import random

import pytest

from airflow_tables.sources import open_source, transcode
from airflow_tables.sources.transcode import Converter, declared
from airflow_tables.validation import validate_csv

TEXT = 'name;city;note\nJürgen;Zürich;"a; b"\r\nAna;São Paulo;"5 € ,\nsplit"\nÅsa;Malmö;ok\n'
COLUMNS = ["name", "city", "note"]

# (encoding declared, how the file is written): the legacy encodings the issue names.
LEGACY = [
    ("cp1252", lambda t: t.encode("cp1252")),
    ("latin-1", lambda t: t.replace("€", "EUR").encode("latin-1")),
    ("utf-16", lambda t: t.encode("utf-16")),  # with a byte-order mark
    ("utf-16-le", lambda t: t.encode("utf-16-le")),  # without one
    ("utf-16-be", lambda t: t.encode("utf-16-be")),
]


@pytest.mark.parametrize(("encoding", "write"), LEGACY, ids=[e for e, _ in LEGACY])
def test_a_legacy_file_validates_in_its_encoding_and_reads_as_utf8(tmp_path, encoding, write):
    text = TEXT.replace("€", "EUR") if encoding == "latin-1" else TEXT
    path = tmp_path / "legacy.csv"
    path.write_bytes(write(text))

    report = validate_csv(path, encoding=encoding)
    assert report.ok, report.errors
    assert (report.columns, report.rows, report.delimiter) == (COLUMNS, 3, ";")
    assert report.encoding == codecs.lookup(encoding).name
    assert (report.size_bytes, report.converted_bytes) == (path.stat().st_size, len(text.encode()))

    source = open_source(path, encoding=encoding)
    with source.open() as f:
        assert f.read() == text.encode()  # what the upload sends: UTF-8, the mark gone
    assert source.utf8_size() == len(text.encode())


@pytest.mark.parametrize(("encoding", "write"), LEGACY, ids=[e for e, _ in LEGACY])
def test_without_encoding_a_legacy_file_is_refused_naming_the_fix(tmp_path, encoding, write):
    path = tmp_path / "legacy.csv"
    path.write_bytes(write(TEXT.replace("€", "EUR")))
    report = validate_csv(path)
    (problem,) = report.errors
    assert problem.code == "encoding"
    assert "encoding=" in problem.message and "iconv" in problem.message


def test_a_byte_not_valid_in_the_declared_encoding_is_an_error_with_its_line(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_bytes(b'a,b\n1,2\r\n3,"x\ny"\n4,\x81\n')  # 0x81 is undefined in Windows-1252
    report = validate_csv(path, encoding="cp1252")
    assert [(p.code, p.line) for p in report.errors] == [("encoding", 5)]
    assert "0x81" in report.errors[0].message and "cp1252" in report.errors[0].message
    assert report.rows == 3  # the rest of the file is still read


def test_a_wrong_declared_encoding_is_reported_with_its_line(tmp_path):
    path = tmp_path / "utf8.csv"
    path.write_bytes("a,b\n1,2\n3,Zürich\n".encode())
    (problem,) = validate_csv(path, encoding="ascii").errors
    assert (problem.code, problem.line) == ("encoding", 3)
    no_mark = tmp_path / "nomark.csv"
    no_mark.write_bytes("a,b\n1,2\n".encode("utf-16-le"))
    (problem,) = validate_csv(no_mark, encoding="utf-16").errors  # "utf-16" needs a byte-order mark
    assert (problem.code, problem.line) == ("encoding", 1)


def test_the_hook_refuses_a_bad_byte_before_sending(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_bytes(b"a,b\n1,\x81\n")
    with pytest.raises(OSError, match=r"line 2: byte 0x81 .* not valid cp1252"):
        open_source(path, encoding="cp1252").utf8_size()


def test_a_file_counted_window_by_window_on_two_threads_has_its_exact_length_and_first_bad_byte(tmp_path, monkeypatch):
    import mmap

    from airflow_tables.sources import mapped, streams

    monkeypatch.setattr(mapped, "WINDOW", mmap.ALLOCATIONGRANULARITY)  # many windows in a small file
    monkeypatch.setattr(streams, "COUNT_THREADS", 2)
    text = "".join(f"{i},Zürich,€{i},naïve\n" for i in range(3000))
    path = tmp_path / "legacy.csv"
    path.write_bytes(text.encode("cp1252"))
    assert path.stat().st_size > 10 * mmap.ALLOCATIONGRANULARITY
    assert open_source(path, encoding="cp1252").utf8_size() == len(text.encode())
    data = bytearray(path.read_bytes())
    at = data.index(b"2900,")
    data[at] = 0x81  # undefined in Windows-1252, in a late window
    path.write_bytes(bytes(data))
    line = text[: text.index("2900,")].count("\n") + 1
    with pytest.raises(OSError, match=rf"line {line}: byte 0x81 \(offset {at:,}\) is not valid cp1252"):
        open_source(path, encoding="cp1252").utf8_size()


@pytest.mark.parametrize("name", ["no-such-codec", "base64", "rot13"])
def test_an_unknown_or_non_text_codec_is_a_clear_error(tmp_path, name):
    path = tmp_path / "f.csv"
    path.write_bytes(b"a\n1\n")
    with pytest.raises(ValueError, match=repr(name)):
        validate_csv(path, encoding=name)


@pytest.mark.parametrize("name", ["utf-8", "UTF8", "utf_8_sig"])
def test_declaring_utf8_changes_nothing(name):
    assert declared(name) is None


@pytest.mark.parametrize("encoding", ["cp1252", "latin-1", "cp037", "koi8-r", "mac-roman", "iso8859-15"])
def test_single_byte_code_pages_convert_like_pythons_codecs_in_any_blocks(encoding, monkeypatch):
    codec = declared(encoding)
    assert codec.table is not None
    rng = random.Random(encoding)
    data = bytes(rng.choice([rng.randrange(256), *b"a,\n"]) for _ in range(5000))
    expected = data.decode(encoding, errors="replace").encode()
    for native in [True, False] if transcode._transcode is not None else [False]:
        if not native:
            monkeypatch.setattr(transcode, "_transcode", None)
        converter = Converter(codec)
        out = b""
        for start in range(0, len(data), 777):
            out += bytes(converter.convert(data[start : start + 777]))
        out += bytes(converter.convert(b"", final=True))
        assert out == expected
        try:
            data.decode(encoding)
            assert converter.first_error is None
        except UnicodeDecodeError as err:
            assert converter.first_error.source_offset == err.start
            assert converter.first_error.output_offset == len(data[: err.start].decode(encoding).encode())


@pytest.mark.parametrize("encoding", ["utf-16", "shift_jis", "gb18030"])
def test_characters_split_between_blocks_are_carried_over(encoding):
    text = "列1,列2\n値,価格\n" * 50
    data = text.encode(encoding)
    converter = Converter(declared(encoding))
    out = b"".join(bytes(converter.convert(data[i : i + 3])) for i in range(0, len(data), 3))
    out += bytes(converter.convert(b"", final=True))
    assert out.decode() == text
    assert converter.first_error is None


@pytest.mark.skipif(transcode._transcode is None, reason="the native kernel is not built here")
@pytest.mark.parametrize("encoding", ["cp1252", "latin-1", "koi8-r"])
def test_the_native_kernel_finds_every_byte_after_ascii_runs_of_any_length(encoding):
    # The kernel skips ASCII sixteen bytes at a time: a high byte at every offset of a run, and a
    # block that ends on one (its four-byte store must not pass the target's end), come out right.
    codec = declared(encoding)
    data = b"".join(b"a,b;" * (run // 4) + b"xyz"[: run % 4] + bytes([0x80 + run]) for run in range(70))
    for block_size in (1, 15, 16, 17, 33, len(data)):
        converter = Converter(codec)
        out = b"".join(bytes(converter.convert(data[i : i + block_size])) for i in range(0, len(data), block_size))
        assert out == data.decode(encoding, errors="replace").encode()
        counter = Converter(codec)
        counted = sum(counter.count(data[i : i + block_size]) for i in range(0, len(data), block_size))
        assert counted == len(out)
        assert (converter.first_error is None) == (counter.first_error is None)
