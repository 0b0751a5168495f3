"""Leaving rows out of a clean file: exactly those records go, every other byte stays, and each is placed in its source.

Random clean files (quoted separators, quotes and line breaks inside fields, CRLF, lone CR,
blank lines, a last record with or without its line break) are built from known records, so
what the file minus some of them is, and where each of them stands, is known without reading it.
The clean file is taken to be the good rows of a source that had other rows cut out before
(a real :class:`.bad_rows.Sorted` with those cuts maps places back), and each row left out must
stand at its line and byte offset in that source. Both kernels (``conftest.py``), and chunks of a few bytes.
"""

from __future__ import annotations

import io
import random
from dataclasses import dataclass
from pathlib import Path

import pytest

from airflow_tables.validation import drop_rows as drop_rows_module
from airflow_tables.validation import validate_csv
from airflow_tables.validation.bad_rows import BadRow, Sorted
from airflow_tables.validation.drop_rows import Dropped, RowVerdict, drop_rows
from airflow_tables.validation.ranges import line_breaks

PLAIN = ["", "abc", "12", "x y", "é", "0"]
QUOTED = ['"a,b"', '"two\nlines"', '"two\r\nlines"', '"say ""hi"""', '""', '"a;b\tc"', '"\n"']


@dataclass
class CleanFile:
    header: bytes
    pieces: list[tuple[bytes, bool]]  # every piece after the header, in order: (bytes, is a record)
    delimiter: str
    columns: int

    @property
    def data(self) -> bytes:
        return self.header + b"".join(p for p, _ in self.pieces)

    def records(self) -> list[int]:
        """The index in ``pieces`` of each data row, in order."""
        return [i for i, (_, is_record) in enumerate(self.pieces) if is_record]


def clean_file(rng: random.Random) -> CleanFile:
    delimiter = rng.choice([",", ";", "\t"])
    columns = rng.choice([1, 3, 5])
    eol = rng.choice(["\n", "\r\n", "\r"])
    quoted = [q for q in QUOTED if eol != "\r" or "\n" not in q]  # a lone-CR file holds no LF
    header = delimiter.join(f"c{i}" for i in range(columns)) + eol
    pieces: list[tuple[bytes, bool]] = []
    for _ in range(rng.randint(0, 40)):
        if rng.random() < 0.1:
            pieces.append((eol.encode(), False))  # a blank line: not a row
        fields = [rng.choice(quoted) if rng.random() < 0.3 else rng.choice(PLAIN) for _ in range(columns)]
        if columns == 1 and not fields[0]:
            fields[0] = '""'  # an empty line would be a blank line, not a row
        if rng.random() < 0.05:
            fields[-1] = "z" * rng.randint(100, 400)  # longer than a chunk
        pieces.append(((delimiter.join(fields) + eol).encode(), True))
    if pieces and pieces[-1][1] and rng.random() < 0.3:
        last, _ = pieces[-1]
        pieces[-1] = (last[: -len(eol.encode())], True)  # the last record without its line break
    return CleanFile(header.encode(), pieces, delimiter, columns)


def with_earlier_cuts(clean: CleanFile, rng: random.Random) -> tuple[bytes, Sorted]:
    """A source the clean file could be the good rows of: junk records before some rows, cut out as the sorter cuts."""
    eol = b"\r\n" if b"\r\n" in clean.header else clean.header[-1:]
    source, cuts, offset = [clean.header], [], len(clean.header)
    for piece, is_record in clean.pieces:
        if is_record and rng.random() < 0.3:
            junk = rng.choice([b"ragged" + eol, b'"broken' + eol + b'row"' + eol, b"\x00nul" + eol])
            source.append(junk)
            cuts.append((offset, len(junk), line_breaks(junk)))
        source.append(piece)
        offset += len(piece)
    return b"".join(source), Sorted(cuts=cuts)


@pytest.fixture
def tiny_chunks(monkeypatch):
    """Chunks and windows of a few bytes: records cross every boundary the walk has."""
    monkeypatch.setattr(drop_rows_module, "CHUNK_BYTES", 37)
    monkeypatch.setattr(drop_rows_module, "SMALL_WINDOW", 11)


def run(
    path: Path, clean: CleanFile, rows: dict, in_source=lambda o, line: (o, line)
) -> tuple[bytes, list[BadRow], Dropped]:
    good, bad = io.BytesIO(), []
    done = drop_rows(
        str(path),
        len(clean.header),
        2,
        clean.delimiter,
        clean.columns,
        rows,
        good=good,
        bad=bad.append,
        in_source=in_source,
    )
    return good.getvalue(), bad, done


@pytest.mark.parametrize("chunks", ["tiny", "default"])
def test_dropping_random_rows_leaves_the_file_minus_those_records(tmp_path, chunks, request):
    if chunks == "tiny":
        request.getfixturevalue("tiny_chunks")
    for seed in range(60):
        rng = random.Random(seed)
        clean = clean_file(rng)
        path = tmp_path / f"clean{seed}.csv"
        path.write_bytes(clean.data)
        report = validate_csv(path)
        records = clean.records()
        assert report.ok and report.rows == len(records), (seed, [str(p) for p in report.errors])
        source, sorted_ = with_earlier_cuts(clean, rng)
        chosen = sorted(rng.sample(range(len(records)), rng.randint(0, len(records))))
        rows = {i: RowVerdict(f"code-{i}", f"row {i} is unexpected", rng.choice([None, "c0"])) for i in chosen}

        good, bad, done = run(path, clean, rows, sorted_.in_source)

        left_out = {records[i] for i in chosen}
        expected = clean.header + b"".join(p for n, (p, _) in enumerate(clean.pieces) if n not in left_out)
        assert good == expected, seed
        assert done == Dropped(len(chosen), len(expected))
        assert [(b.code, b.message, b.column) for b in bad] == [
            (rows[i].code, rows[i].message, rows[i].column) for i in chosen
        ]
        for i, row in zip(chosen, bad, strict=True):
            piece = clean.pieces[records[i]][0]
            assert row.record == piece.rstrip(b"\n").removesuffix(b"\r"), seed  # without its line break
            assert source[row.byte_offset :].startswith(piece), seed  # where it stands in the source
            assert row.line == 1 + line_breaks(source[: row.byte_offset]), seed


def test_nothing_to_drop_copies_the_file_as_it_is(tmp_path):
    clean = clean_file(random.Random(5))
    path = tmp_path / "clean.csv"
    path.write_bytes(clean.data)

    good, bad, done = run(path, clean, {})

    assert good == clean.data and bad == [] and done == Dropped(0, len(clean.data))


def test_a_header_larger_than_a_chunk_is_copied_first(tmp_path, tiny_chunks):
    header = ",".join(f"column_{i}" for i in range(40)).encode() + b"\n"
    body = [b",".join(str(r * 100 + c).encode() for c in range(40)) + b"\n" for r in range(5)]
    clean = CleanFile(header, [(b, True) for b in body], ",", 40)
    path = tmp_path / "wide.csv"
    path.write_bytes(clean.data)

    good, bad, _ = run(path, clean, {0: RowVerdict("x", "m", None), 4: RowVerdict("x", "m", None)})

    assert good == header + b"".join(body[1:4])
    assert [(b.line, b.byte_offset) for b in bad] == [(2, len(header)), (6, len(header) + sum(map(len, body[:4])))]


def test_the_rows_between_those_dropped_are_passed_by_the_kernel(tmp_path, monkeypatch):
    """Far from the next row to drop, the walk measures only what the kernel stops on, not every record."""
    body = [f"{n},{n * 7},x\n".encode() for n in range(20_000)]
    clean = CleanFile(b"a,b,c\n", [(b, True) for b in body], ",", 3)
    path = tmp_path / "long.csv"
    path.write_bytes(clean.data)
    measured = []
    real = drop_rows_module.dialect.record_shape
    monkeypatch.setattr(
        drop_rows_module.dialect,
        "record_shape",
        lambda data, start, *a: measured.append(start) or real(data, start, *a),
    )

    good, bad, _ = run(path, clean, {15_000: RowVerdict("x", "m", None)})

    assert good == clean.header + b"".join(body[:15_000] + body[15_001:])
    assert [b.record for b in bad] == [body[15_000].rstrip(b"\n")]
    assert len(measured) < 20  # the row dropped, and the few the kernel's window boundaries leave


def test_a_row_past_the_last_is_refused(tmp_path):
    clean = CleanFile(b"a,b\n", [(b"1,2\n", True), (b"\n", False), (b"3,4", True)], ",", 2)
    path = tmp_path / "short.csv"
    path.write_bytes(clean.data)

    with pytest.raises(ValueError, match=r"row 2 is past the file's last data row \(it has 2\)"):
        run(path, clean, {1: RowVerdict("x", "m", None), 2: RowVerdict("x", "m", None)})


def test_a_file_with_a_quote_never_closed_is_refused(tmp_path):
    clean = CleanFile(b"a,b\n", [(b"1,2\n", True), (b'3,"4\n5,6\n', True)], ",", 2)
    path = tmp_path / "open.csv"
    path.write_bytes(clean.data)

    with pytest.raises(ValueError, match="a quote opened on line 3 is never closed"):
        run(path, clean, {1: RowVerdict("x", "m", None)})
