"""The bad-row sorter's conformance: ``sorted_rows`` with ``on_bad_rows="quarantine"`` (and ``"fail"``).

What a quarantine promises (issue 40, CONTRACT "Fourth release", "Bad rows"): every data row of
the file is either sent (in the good rows' file, which is the source byte for byte with the bad
records cut out) or listed in the rejects file (its line, its byte offset, why, its bytes), each
exactly once; what ends the reading of a file is never a bad row; a threshold refuses the file
but still writes the rejects. The expected answer is always built here, by the generator that
made the file (it knows which rows it made bad and where it put them), never by the code under
test.

Every test runs with both fast-path kernels: ``conftest.scan_kernel`` (autouse) sets or clears
``AIRFLOW_TABLES_PURE_PYTHON`` for each.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import re
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_tables.sources import open_source
from airflow_tables.validation import bad_rows, kernels, ranges, rejects, rules, validate_csv
from airflow_tables.validation.quarantine import RowCheck, SetAside, sorted_rows
from airflow_tables.validation.row_policy import BadRowPolicy

SHARED = Path(os.environ.get("AIRFLOW_TABLES_SHARED", Path(__file__).resolve().parents[3] / "shared"))
CORPUS = SHARED / "corpus" / "csv"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text(encoding="utf-8")) if CORPUS.exists() else []

QUARANTINE = BadRowPolicy("quarantine")
REJECTS_HEADER = "line,byte_offset,code,message,column,record"

# -- Building files whose answer is known -----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Row:
    """One data record as the generator wrote it: where, its bytes, and why it is bad (None: good)."""

    offset: int
    line: int
    raw: bytes  # without its line break
    written: bytes  # with it (the last record of a file may have none)
    code: str | None = None
    column: str | None = None  # the declared column a ``not-a-long`` value breaks

    @property
    def bad(self) -> bool:
        return self.code is not None


@dataclasses.dataclass
class Built:
    """A file made by :class:`CsvBuilder`: its bytes, its records, and the good rows' file it must give."""

    data: bytes
    rows: list[Row]
    expected_good: bytes
    declared: dict[str, str] | None

    @property
    def bad(self) -> list[Row]:
        return [r for r in self.rows if r.bad]

    @property
    def good_count(self) -> int:
        return sum(not r.bad for r in self.rows)

    def write(self, folder: Path, name: str = "data.csv") -> Path:
        path = folder / name
        path.write_bytes(self.data)
        return path


class CsvBuilder:
    """Writes a CSV file piece by piece, noting each record's offset, line and verdict as it goes.

    Lines are counted here by the line feeds written (the generator never writes a lone CR), so
    the expected line of a record does not come from the code under test.
    """

    def __init__(
        self, sep: str, eol: bytes, names: list[str], declared: dict[str, str] | None = None, leading_blanks: int = 0
    ) -> None:
        self.sep, self.eol, self.names, self.declared = sep.encode(), eol, names, declared
        self.pieces: list[tuple[bytes, Row | None]] = []
        self.rows: list[Row] = []
        self.size = 0
        self.line = 1
        for _ in range(leading_blanks):
            self._put(eol, None)
        self._put(self.sep.join(n.encode() for n in names) + eol, None)

    def _put(self, data: bytes, row: Row | None) -> None:
        self.pieces.append((data, row))
        self.size += len(data)
        self.line += data.count(b"\n")

    def blank(self) -> None:
        self._put(self.eol, None)

    def record(self, fields: list[bytes], code: str | None = None, column: str | None = None) -> Row:
        raw = self.sep.join(fields)
        row = Row(self.size, self.line, raw, raw + self.eol, code, column)
        self.rows.append(row)
        self._put(row.written, row)
        return row

    def build(self, final_break: bool = True) -> Built:
        if not final_break and self.pieces and self.pieces[-1][1] is not None:
            last = self.pieces[-1][1]
            unbroken = dataclasses.replace(last, written=last.raw)
            self.pieces[-1] = (last.raw, unbroken)
            self.rows[-1] = unbroken
        data = b"".join(piece for piece, _ in self.pieces)
        good = b"".join(piece for piece, row in self.pieces if row is None or not row.bad)
        return Built(data, list(self.rows), good, self.declared)


def quoted(content: bytes) -> bytes:
    return b'"' + content.replace(b'"', b'""') + b'"'


def unescaped(shown: str) -> bytes:
    """A rejects file's ``record`` back to the bytes it shows (the generator writes no backslash of its own)."""
    return re.sub(rb"\\x([0-9a-fA-F]{2})", lambda m: bytes([int(m[1], 16)]), shown.encode("utf-8"))


def lines_of(data: bytes, offsets: list[int]) -> list[int]:
    """The 1-based line of ``data[offset]`` for each of ``offsets`` (ascending): LF, CRLF and a lone CR end a line."""
    lines, line, counted = [], 1, 0
    for offset in offsets:
        line += data.count(b"\n", counted, offset) + data.count(b"\r", counted, offset)
        line -= data.count(b"\r\n", counted, offset) + (data[counted - 1 : counted + 1] == b"\r\n")
        lines.append(line)
        counted = offset
    return lines


# -- Running a quarantine and reading what it left ------------------------------------------------


@dataclasses.dataclass
class Outcome:
    """What ``sorted_rows`` decided, with what had to be read inside its block (the good rows' file goes after)."""

    aside: SetAside
    sent: bytes
    sent_path: str
    sent_report: object
    rejects: list[dict[str, str]] | None
    rejects_text: str | None

    @property
    def codes(self) -> list[str]:
        return [p.code for p in self.aside.report.errors]


def quarantine(
    path: Path,
    declared: dict[str, str] | None = None,
    *,
    policy: BadRowPolicy = QUARANTINE,
    column_types: bool = False,
    rejects_path: str | None = None,
) -> Outcome:
    """``sorted_rows`` over the local file ``path``; the good rows' file is read and validated while it exists."""
    check = RowCheck(policy, declared, rejects_path)
    with sorted_rows(open_source(str(path)), check, default_rejects=str(path), column_types=column_types) as aside:
        with aside.source.open() as f:
            sent = f.read()
        sent_path = aside.source.local_path  # None when good rows are read from the file's kept ranges
        copy = path.with_name(path.name + ".sent.csv")
        copy.write_bytes(sent)
        sent_report = validate_csv(copy)
        copy.unlink()
    rows = text = None
    if aside.rejects is not None and os.path.exists(aside.rejects):
        with open(aside.rejects, encoding="utf-8", newline="") as f:
            text = f.read()
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
    return Outcome(aside, sent, sent_path, sent_report, rows, text)


def assert_sorted_as_built(built: Built, path: Path) -> Outcome:
    """The whole promise of a quarantine, against the generator's own answer (see the module doc)."""
    declared = built.declared
    got = quarantine(path, declared)
    aside, report = got.aside, got.aside.report
    bad = built.bad

    # What is sent: the source with exactly the bad records' bytes cut out, header first as it is.
    assert got.sent == built.expected_good
    assert report.rows == built.good_count
    assert got.sent_report.ok, [str(p) for p in got.sent_report.errors]
    assert got.sent_report.rows == report.rows
    if built.good_count:
        assert report.errors == [], [str(p) for p in report.errors]
    else:
        assert got.codes == ["no-good-rows"]

    # What is set aside: each bad record once, in the file's order, pointing at the record in the source.
    assert aside.bad_rows == len(bad)
    assert aside.by_code == dict(Counter(r.code for r in bad))
    listing = sorted(os.listdir(path.parent))
    if not bad:
        assert aside.rejects is None and got.sent_path == str(path)
        assert listing == [path.name]
        return got
    assert aside.rejects == str(path.parent / (path.stem + ".rejects.csv"))
    assert listing == sorted([path.name, path.stem + ".rejects.csv"])  # no temp file left beside them
    assert got.sent_path is None  # the good rows are read from the file's own kept ranges: no copy is written
    assert got.rejects_text.split("\n", 1)[0] == REJECTS_HEADER
    listed = [
        (int(r["line"]), int(r["byte_offset"]), r["code"], r["column"] or None, unescaped(r["record"]))
        for r in got.rejects
    ]
    assert listed == [(r.line, r.offset, r.code, r.column, r.raw) for r in bad]
    for _, offset, _, _, record in listed:  # and by the source itself, not only by the generator
        assert built.data[offset : offset + len(record)] == record
    assert lines_of(built.data, [offset for _, offset, *_ in listed]) == [line for line, *_ in listed]
    # The two sides together are the source's data rows, each once: by offset, and by content.
    sent_offsets = {r.offset for r in built.rows} - {offset for _, offset, *_ in listed}
    assert sorted(sent_offsets) == [r.offset for r in built.rows if not r.bad]
    assert len({offset for _, offset, *_ in listed}) == len(listed)
    return got


# -- 1. Random files with random bad rows -------------------------------------------------------------

SEPARATORS = (",", ";", "\t", "|")
#: Text of unquoted fields: no separator, quote, line break or backslash (a quote that is data is added apart).
TEXT = "abcxyz0189 é€😀"
LONGS = ("", "0", "42", "-7", "+5", "007", " 12 ", "9223372036854775807", "-9223372036854775808")
NOT_LONGS = ("x", "1.5", "1e3", "12a", "9223372036854775808", "٣", "- 5")
BAD_KINDS = ("few", "many", "nul", "utf8", "not-long")
CODES = {"few": "field-count", "many": "field-count", "nul": "nul-byte", "utf8": "encoding", "not-long": "not-a-long"}


@st.composite
def plain_values(draw, min_size: int = 0) -> bytes:
    """An unquoted field, sometimes with a quote that is data (never its first byte: that would open a quote)."""
    text = draw(st.text(TEXT, min_size=min_size, max_size=6))
    if text and draw(st.booleans()):
        at = draw(st.integers(1, len(text)))
        text = text[:at] + '"' + text[at:]
    return text.encode()


@st.composite
def quoted_values(draw, sep: str) -> bytes:
    """A quoted field holding separators, quotes (doubled when written) and line breaks of both kinds."""
    pieces = draw(st.lists(st.sampled_from([*TEXT, sep, '"', "\n", "\r\n"]), max_size=8))
    return quoted("".join(pieces).encode())


def text_values(sep: str) -> st.SearchStrategy[bytes]:
    return st.one_of(plain_values(), quoted_values(sep))


def long_values() -> st.SearchStrategy[bytes]:
    return st.sampled_from(LONGS).flatmap(lambda v: st.sampled_from([v.encode(), quoted(v.encode())]))


@st.composite
def good_fields(draw, sep: str, count: int, longs: set[int]) -> list[bytes]:
    return [draw(long_values() if c in longs else text_values(sep)) for c in range(count)]


def one_record(fields: list[bytes]) -> list[bytes]:
    """A record of one empty field would be a blank line, which is no record at all: quote it."""
    return [b'""'] if fields == [b""] else fields


@st.composite
def csv_files(draw) -> Built:
    """A file of 1-6 columns, any separator, LF or CRLF, with blank lines, and rows made bad on purpose."""
    columns = draw(st.integers(1, 6))
    sep = "," if columns == 1 else draw(st.sampled_from(SEPARATORS))  # one column: read as comma-separated
    eol = draw(st.sampled_from([b"\n", b"\r\n"]))
    names = [f"column_{c}" for c in range(columns)]
    longs = draw(st.sets(st.integers(0, columns - 1)))
    declared = {names[c]: "long" for c in longs}
    for c in draw(st.sets(st.integers(0, columns - 1))) - longs:
        declared[names[c]] = "string"
    builder = CsvBuilder(sep, eol, names, declared or None, leading_blanks=draw(st.sampled_from([0, 0, 0, 1])))
    kinds = ["good"] * 4 + [k for k in BAD_KINDS if (k != "few" or columns > 1) and (k != "not-long" or longs)]
    for _ in range(draw(st.integers(1, 25))):
        for _ in range(draw(st.sampled_from([0, 0, 0, 0, 1, 2]))):
            builder.blank()
        kind = draw(st.sampled_from(kinds))
        fields = draw(good_fields(sep, columns, longs))
        column = None
        if kind == "few":
            fields = fields[:-1]
        elif kind == "many":
            fields += draw(st.lists(text_values(sep), min_size=1, max_size=2))
        elif kind == "nul":
            at = draw(st.integers(0, columns - 1))
            inner = draw(plain_values(min_size=1)) + b"\x00" + draw(plain_values())
            fields[at] = draw(st.sampled_from([inner, quoted(inner)]))
        elif kind == "utf8":
            at = draw(st.integers(0, columns - 1))
            byte = draw(st.sampled_from([b"\xe9", b"\xff"]))  # 0xE9 with an ASCII byte after it is no UTF-8
            inner = draw(plain_values()) + byte + draw(st.sampled_from([b"", b"x"]))
            fields[at] = draw(st.sampled_from([inner, quoted(inner)]))
        elif kind == "not-long":
            at = draw(st.sampled_from(sorted(longs)))
            value = draw(st.sampled_from(NOT_LONGS)).encode()
            fields[at] = draw(st.sampled_from([value, quoted(value)]))
            column = names[at]
        builder.record(one_record(fields), None if kind == "good" else CODES[kind], column)
    return builder.build(final_break=draw(st.booleans()))


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(built=csv_files())
def test_random_files_split_into_good_rows_and_rejects_each_row_once(built, tmp_path):
    """The property of issue 40: sent + set aside = the data rows, each once, the sent file the source minus the bad."""
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    assert_sorted_as_built(built, built.write(folder))


# -- 2. Dense bad rows, first and last records, chunk and window boundaries -----------------------------


def make_bad(kind: str, sep: str = ",") -> list[bytes]:
    """A bad row of the 4 columns ``id,name,note,amount`` (``id`` and ``amount`` declared long)."""
    s = sep.encode()
    return {
        "few": [b"1", b"short", b"row"],
        "many": [b"1", b"a", b"b", b"2", b"extra"],
        "nul": [b"1", b"a\x00b", b"n", b"2"],
        "utf8": [b"1", b"caf\xe9", b"n", b"2"],
        "not-long": [b"1", b"n", quoted(b"has" + s + b"sep"), b"12x4"],
    }[kind]


NAMES = ["id", "name", "note", "amount"]
DECLARED = {"id": "long", "amount": "long", "note": "string"}


def good_row(i: int, eol: bytes) -> list[bytes]:
    """A good row; every fifth has a quoted note holding a separator and a line break."""
    note = quoted(b"a,b" + eol + b"c" + b'""d') if i % 5 == 0 else b"note " + str(i % 97).encode()
    return [str(i).encode(), b"name-" + str(i * 7919 % 100003).encode(), note, str(i * 31 % 1000).encode()]


def bad_code_and_column(kind: str) -> tuple[str, str | None]:
    return CODES[kind], "amount" if kind == "not-long" else None


@pytest.mark.parametrize("eol", [b"\n", b"\r\n"], ids=["lf", "crlf"])
def test_every_other_row_bad(eol, tmp_path):
    """Bad rows as dense as they come (every other one, every kind, over a chunk boundary) are each found, once."""
    builder = CsvBuilder(",", eol, NAMES, DECLARED)
    for i in range(60_000):
        if i % 2:
            kind = BAD_KINDS[(i // 2) % len(BAD_KINDS)]
            builder.record(make_bad(kind), *bad_code_and_column(kind))
        else:
            builder.record(good_row(i, eol))
    built = builder.build()
    assert len(built.data) > ranges.CHUNK_BYTES
    got = assert_sorted_as_built(built, built.write(tmp_path))
    assert got.aside.bad_rows == 30_000


@pytest.mark.parametrize("final_break", [True, False], ids=["final-break", "no-final-break"])
@pytest.mark.parametrize("where", ["first", "last"])
@pytest.mark.parametrize("kind", BAD_KINDS)
def test_bad_first_or_last_record(kind, where, final_break, tmp_path):
    """The first record (right after the header) and the last (with or without its line break) are judged too."""
    builder = CsvBuilder(",", b"\n", NAMES, DECLARED)
    for i in range(6):
        if (where == "first" and i == 0) or (where == "last" and i == 5):
            builder.record(make_bad(kind), *bad_code_and_column(kind))
        else:
            builder.record(good_row(i + 1, b"\n"))
    built = builder.build(final_break=final_break)
    got = assert_sorted_as_built(built, built.write(tmp_path))
    if not (kind == "few" and where == "last"):  # that one is test_last_record_with_too_few_fields_is_cut_short's
        assert got.aside.cut_short is None


@pytest.mark.parametrize("final_break", [True, False], ids=["final-break", "no-final-break"])
@pytest.mark.parametrize("policy", [QUARANTINE, BadRowPolicy("fail")], ids=["quarantine", "fail"])
def test_last_record_with_too_few_fields_is_cut_short(policy, final_break, tmp_path):
    """A last record with fewer fields than the header is ``cut_short`` (what a file still being written ends with).

    ``Sorted.cut_short`` and the operators' ``_still_being_written`` say so of "the file's last record"
    with fewer fields, line break or not, and so does the validator (``CsvReport.cut_short``), which
    decides the same retry when no row is sorted: the two paths must agree on the same file.
    """
    path = tmp_path / "data.csv"
    path.write_bytes(b"a,b,c\n1,2,3\n4,5" + (b"\n" if final_break else b""))
    assert validate_csv(path).cut_short() is not None
    got = quarantine(path, {"a": "long"}, policy=policy)
    assert got.aside.bad_rows == 1
    assert got.aside.cut_short is not None
    assert (got.aside.cut_short.line, got.aside.cut_short.byte_offset, got.aside.cut_short.record) == (3, 12, b"4,5")


def special_rows(kind: str, eol: bytes) -> tuple[list[tuple[list[bytes], str | None, str | None]], int]:
    """Rows to place so that one telling byte lands on a target offset: the rows, and that byte's offset in them.

    * ``utf8-at``/``nul-at``/``not-long-at``: the offending byte itself;
    * ``starts-at``/``ends-at``: a bad record starts, or ends (its line break included), there;
    * ``break-at``: the last byte of a bad record's line break (a CRLF then straddles the target);
    * ``quoted-break-at``: a line break inside a good row's quoted field, a bad row right after;
    * ``run-at``: a run of 40 rows, every other one with a bad byte (the window shrinks and grows again).
    """
    s = b","
    if kind == "utf8-at":
        fields = [b"1", b"ab\xe9cd", b"n", b"5"]
        return [(fields, "encoding", None)], s.join(fields).index(b"\xe9")
    if kind == "nul-at":
        fields = [b"1", b"ab\x00cd", b"n", b"5"]
        return [(fields, "nul-byte", None)], s.join(fields).index(b"\x00")
    if kind == "not-long-at":
        fields = [b"1", b"n", b"m", b"12x4"]
        return [(fields, "not-a-long", "amount")], s.join(fields).index(b"x")
    if kind == "starts-at":
        return [(make_bad("many"), "field-count", None)], 0
    if kind == "ends-at":
        fields = make_bad("few")
        return [(fields, "field-count", None)], len(s.join(fields) + eol)
    if kind == "break-at":
        fields = make_bad("many")
        return [(fields, "field-count", None)], len(s.join(fields) + eol) - 1
    if kind == "quoted-break-at":
        fields = [b"2", b"n", quoted(b"up" + eol + b"down"), b"3"]
        at = s.join(fields).index(eol) + len(eol) - 1
        return [(fields, None, None), (make_bad("utf8"), "encoding", None)], at
    assert kind == "run-at"
    run = []
    for i in range(40):
        run.append((make_bad("utf8"), "encoding", None) if i % 2 else (good_row(i + 1, eol), None, None))
    return run, 0


SPECIALS = (
    "utf8-at",
    "nul-at",
    "not-long-at",
    "starts-at",
    "ends-at",
    "break-at",
    "quoted-break-at",
    "run-at",
)


def boundary_file(eol: bytes, windows: int) -> Built:
    """A file of a few MiB with a special (see :func:`special_rows`) at every 64 KiB window edge, give or take a byte.

    Every 16th window edge is a 1 MiB chunk edge of the sorter's reads (they start at the first record).
    Good rows fill the gaps; the one before each special is padded to put the special's byte exactly there.
    """
    builder = CsvBuilder(",", eol, NAMES, DECLARED)
    start = builder.size
    i = 0
    for j in range(1, windows + 1):
        target = start + j * bad_rows.SMALL_WINDOW + (j % 3 - 1)
        rows, at = special_rows(SPECIALS[(j + j // 16) % len(SPECIALS)], eol)  # chunk edges get kinds of their own
        begin = target - at
        while builder.size + 200 < begin:
            i += 1
            builder.record(good_row(i, eol))
        i += 1
        filler = [str(i).encode(), b"", b"pad", b"0"]
        filler[1] = b"f" * (begin - builder.size - len(b",".join(filler) + eol))
        builder.record(filler)
        assert builder.size == begin
        for fields, code, column in rows:
            builder.record(fields, code, column)
    for _ in range(50):
        i += 1
        builder.record(good_row(i, eol))
    return builder.build()


@pytest.mark.parametrize("eol", [b"\n", b"\r\n"], ids=["lf", "crlf"])
def test_bad_rows_across_chunk_and_window_boundaries(eol, tmp_path):
    """Bad bytes, bad values and bad records' edges on and around every 64 KiB and 1 MiB edge: all found, once."""
    built = boundary_file(eol, windows=3 * 16 + 4)
    assert len(built.data) > 3 * ranges.CHUNK_BYTES
    start = len(b",".join(n.encode() for n in NAMES) + eol)
    for k in (1, 2, 3):  # the file is what it means to be: bad records at each chunk edge
        edge = start + k * ranges.CHUNK_BYTES
        assert any(r.offset <= edge + 1 and edge - 1 < r.offset + len(r.written) for r in built.bad), k
    assert_sorted_as_built(built, built.write(tmp_path))


class CountingKernel:
    """A kernel that counts the scans it is asked for (and passes them on)."""

    calls = 0

    def __init__(self, kernel) -> None:
        self.kernel, self.name, self.parallel_min_bytes = kernel, kernel.name, kernel.parallel_min_bytes

    def scan(self, block, final, states=None):
        CountingKernel.calls += 1
        return self.kernel.scan(block, final, states)

    def sort(self, block, final, states=None):
        CountingKernel.calls += 1
        return self.kernel.sort(block, final, states)

    def line_breaks(self, data, start, end):
        return self.kernel.line_breaks(data, start, end)


def test_the_kernel_goes_on_after_each_bad_row(tmp_path, monkeypatch):
    """A bad row costs the kernel a scan or two, not one scan per record after it, whichever kernel reads.

    The promise of ``bad_rows``' module doc: the one record the kernel stops on is judged alone "and
    the kernel goes on after it, so a file with a bad row every hundred rows is read nearly as fast
    as a clean one". Counted, not timed: a scan per bad row and per 64 KiB window is the allowance.
    """
    builder = CsvBuilder(",", b"\n", NAMES)
    kinds = ("many", "few", "nul", "utf8")
    for i in range(10_000):
        if i % 50 == 49:
            kind = kinds[(i // 50) % len(kinds)]
            builder.record(make_bad(kind), *bad_code_and_column(kind))
        else:
            builder.record(good_row(i, b"\n"))
    built = builder.build()
    path = built.write(tmp_path)
    real = kernels.kernel
    monkeypatch.setattr(kernels, "kernel", lambda delimiter, columns: CountingKernel(real(delimiter, columns)))
    monkeypatch.setattr(CountingKernel, "calls", 0)
    got = quarantine(path)
    assert got.aside.bad_rows == len(built.bad) == 200
    windows = len(built.data) // bad_rows.SMALL_WINDOW + 1
    assert CountingKernel.calls <= 2 * len(built.bad) + 2 * windows + 8, f"{CountingKernel.calls:,} scans"


# -- 3. The corpus: a file the validator accepts has no bad row ------------------------------------------


def corpus_rows(rec: dict) -> int:
    """The manifest's rows, by the reading the validator follows (the RFC 4180 one where it differs)."""
    return rec.get("rfc4180", {}).get("rows", rec["rows"])


@pytest.mark.skipif(not MANIFEST, reason=f"shared corpus not found at {CORPUS}")
def test_corpus_files_the_validator_accepts_have_no_bad_rows(tmp_path):
    """Real files written by others: where validation says yes, a quarantine sets nothing aside and sends the file."""
    accepted = 0
    for rec in MANIFEST:
        path = CORPUS / "files" / rec["file"]
        validated = validate_csv(path, column_types=True)
        if not validated.ok:
            continue
        accepted += 1
        rejects_path = str(tmp_path / (rec["file"] + ".rejects.csv"))  # never written into the shared corpus
        got = quarantine(path, policy=QUARANTINE, column_types=True, rejects_path=rejects_path)
        aside = got.aside
        assert aside.bad_rows == 0 and aside.rejects is None and aside.by_code == {}, rec["file"]
        assert aside.source.local_path == str(path), rec["file"]
        assert aside.report.ok, (rec["file"], [str(p) for p in aside.report.errors])
        assert aside.report.rows == corpus_rows(rec) == validated.rows, rec["file"]
        assert aside.report.column_types == validated.column_types, rec["file"]
        assert not os.path.exists(rejects_path), rec["file"]
    assert accepted >= 50  # the corpus is what it was: most of it is accepted
    assert os.listdir(tmp_path) == []


# -- 4. What ends the reading is never a bad row ---------------------------------------------------------


UNTERMINATED = {
    "after-a-bad-row": b'a,b\n1,2\n3,4,5\n6,"never closed\n7,8\n9,10\n',
    "no-bad-row-before": b'a,b\n1,2\n6,"never closed\n7,8\n9,10\n',
    "bad-bytes-before": b'a,b\n1,2\n3,caf\xe9\n4,a\x00\n6,"never closed\n7,8\n',
}


@pytest.mark.parametrize("content", UNTERMINATED.values(), ids=UNTERMINATED.keys())
def test_unterminated_quote_refuses_the_file_and_leaves_no_rejects(content, tmp_path, private_tmp):
    """A quote that swallows the rest of the file ends the reading: the file is refused, no row is set aside."""
    folder = tmp_path / "in"
    folder.mkdir()
    path = folder / "data.csv"
    path.write_bytes(content)
    got = quarantine(path)
    assert "unterminated-quote" in got.codes
    (problem,) = [p for p in got.aside.report.errors if p.code == "unterminated-quote"]
    assert problem.line == content[: content.index(b'6,"')].count(b"\n") + 1
    assert got.aside.bad_rows == 0 and got.aside.rejects is None
    assert got.sent_path == str(path)
    assert os.listdir(folder) == ["data.csv"]  # neither a rejects file nor its temp file
    assert os.listdir(private_tmp) == []


def test_too_many_columns_refuses_the_file_and_leaves_no_rejects(tmp_path, private_tmp):
    """A header over the service's column limit is the file's problem, whatever its rows: nothing is set aside."""
    folder = tmp_path / "in"
    folder.mkdir()
    width = rules.MAX_COLUMNS + 1
    header = b",".join(b"c%d" % i for i in range(width))
    row = b",".join([b"7"] * width)
    bad = [b"1,2,3", b"caf\xe9," + row]  # too few fields; a byte that is not UTF-8 (and one field too many)
    path = folder / "wide.csv"
    path.write_bytes(b"\n".join([header, row, bad[0], row, bad[1], row]) + b"\n")
    got = quarantine(path, {"c0": "long"})
    assert "too-many-columns" in got.codes
    assert got.aside.bad_rows == 0 and got.aside.rejects is None
    assert os.listdir(folder) == ["wide.csv"]
    assert os.listdir(private_tmp) == []


# -- 5. Thresholds: refused, but the rejects are written whole -------------------------------------------


def ten_rows_three_bad(folder: Path) -> Built:
    builder = CsvBuilder(",", b"\n", ["a", "b"])
    for i in range(10):
        if i in (2, 5, 8):
            builder.record([str(i).encode(), b"x", b"extra"], "field-count")
        else:
            builder.record([str(i).encode(), b"y"])
    built = builder.build()
    built.write(folder)
    return built


@pytest.mark.parametrize(
    ("policy", "refused", "names"),
    [
        (BadRowPolicy("quarantine", max_bad_rows=2), True, ["max_bad_rows=2"]),
        (BadRowPolicy("quarantine", max_bad_rows=3), False, []),
        (BadRowPolicy("quarantine", max_bad_fraction=0.25), True, ["max_bad_fraction=0.25", "30.00%"]),
        (BadRowPolicy("quarantine", max_bad_fraction=0.3), False, []),
        (BadRowPolicy("quarantine", max_bad_rows=1, max_bad_fraction=0.1), True, ["max_bad_rows=1", "0.1"]),
    ],
    ids=["rows-exceeded", "rows-at-limit", "fraction-exceeded", "fraction-at-limit", "both-exceeded"],
)
def test_thresholds(policy, refused, names, tmp_path):
    """Over ``max_bad_rows`` or ``max_bad_fraction`` the file is refused, saying how many, over what, and where."""
    built = ten_rows_three_bad(tmp_path)
    got = quarantine(tmp_path / "data.csv", policy=policy)
    rejects_path = str(tmp_path / "data.rejects.csv")
    assert got.aside.rejects == rejects_path and got.aside.bad_rows == 3
    assert [int(r["line"]) for r in got.rejects] == [r.line for r in built.bad]  # written, and complete
    if not refused:
        assert got.aside.report.errors == []
        assert got.sent == built.expected_good
        return
    (problem,) = got.aside.report.errors
    assert problem.code == "too-many-bad-rows"
    assert "3 of the 10 data rows" in problem.message
    assert rejects_path in problem.message
    for name in names:
        assert name in problem.message


def test_all_rows_bad_refuses_the_file_and_writes_the_rejects(tmp_path):
    """A quarantine that would send a table of nothing refuses instead; the rejects still say what was wrong."""
    builder = CsvBuilder(",", b"\n", ["a", "b"])
    for i in range(3):
        builder.record([str(i).encode()] * 3, "field-count")
    built = builder.build()
    got = quarantine(built.write(tmp_path))
    (problem,) = got.aside.report.errors
    assert problem.code == "no-good-rows"
    assert "all 3 data rows" in problem.message and str(tmp_path / "data.rejects.csv") in problem.message
    assert [int(r["byte_offset"]) for r in got.rejects] == [r.offset for r in built.rows]


# -- 6, 7. "fail" with declared types; a declared column the header lacks --------------------------------


def test_fail_refuses_a_bad_value_naming_its_line_and_writes_no_rejects(tmp_path):
    """``on_bad_rows="fail"``: one value that breaks a declared ``long`` refuses the whole file, at its line."""
    path = tmp_path / "data.csv"
    path.write_bytes(b"a,b\n1,2\n\n3,x\n4,5\n")
    got = quarantine(path, {"b": "long"}, policy=BadRowPolicy("fail"))
    (problem,) = got.aside.report.errors
    assert problem.code == "bad-rows" and problem.line == 4
    assert "line 4 (not-a-long:" in problem.message and "1 of the 3 data rows is bad" in problem.message
    assert got.aside.rejects is None and got.aside.bad_rows == 1
    assert os.listdir(tmp_path) == ["data.csv"]


def test_fail_without_bad_rows_sends_the_file(tmp_path):
    """The contrast: the same check on a file whose declared column holds only whole numbers refuses nothing."""
    path = tmp_path / "data.csv"
    path.write_bytes(b"a,b\n1,2\n3, -4 \n4,\n")
    got = quarantine(path, {"b": "long"}, policy=BadRowPolicy("fail"))
    assert got.aside.report.errors == [] and got.aside.report.rows == 3
    assert got.sent_path == str(path)


@pytest.mark.parametrize("policy", [QUARANTINE, BadRowPolicy("fail")], ids=["quarantine", "fail"])
def test_declared_column_missing_from_the_header(policy, tmp_path):
    """A declared name the header does not have is the file's problem, named, not a bad row per row."""
    path = tmp_path / "data.csv"
    path.write_bytes(b"a,b\n1,2\n3,x,y\n")
    got = quarantine(path, {"a": "long", "nope": "long"}, policy=policy)
    assert got.codes == ["declared-column-missing"]
    assert "'nope'" in got.aside.report.errors[0].message
    assert got.aside.rejects is None
    assert os.listdir(tmp_path) == ["data.csv"]


# -- 8. The rejects file ----------------------------------------------------------------------------------


def test_rejects_file_shows_every_bad_row_readably(tmp_path):
    """The rejects file is a CSV Python reads; a huge row is cut at 8 KiB and says so; bad bytes show as \\xNN."""
    huge = b"1," + b"y" * (20 * 1024) + b",extra"
    builder = CsvBuilder(",", b"\r\n", ["a", "b"])
    builder.record([b"0", b"fine"])
    builder.record([huge], "field-count")
    builder.record([b"2", b"caf\xe9"], "encoding")
    builder.record([b"3", b"\xff\xfe"], "encoding")
    builder.record([b"4", b"a\x00b"], "nul-byte")
    builder.record([b"5", b'"x\r\ny, ""z"""', b"w"], "field-count")
    builder.record(["6,é,€".encode()], "field-count")
    built = builder.build()
    got = quarantine(built.write(tmp_path))
    text = got.rejects_text
    assert text.startswith(REJECTS_HEADER + "\n")
    assert list(got.rejects[0].keys()) == REJECTS_HEADER.split(",")
    records = [r["record"] for r in got.rejects]
    assert [r["code"] for r in got.rejects] == [r.code for r in built.bad]

    cut_mark = f"... [cut: {len(huge):,} bytes in all]"
    assert records[0] == huge[: rejects.MAX_RECORD_SHOWN].decode() + cut_mark
    assert rejects.MAX_RECORD_SHOWN == 8 * 1024
    assert re.fullmatch(r"2,caf\\xe9", records[1], re.IGNORECASE)
    assert re.fullmatch(r"3,\\xff\\xfe", records[2], re.IGNORECASE)
    assert re.fullmatch(r"4,a\\x00b", records[3], re.IGNORECASE)
    assert "\x00" not in text
    assert records[4] == '5,"x\r\ny, ""z""",w'  # line breaks and quotes as they were
    assert records[5] == "6,é,€"
    assert [int(r["line"]) for r in got.rejects] == [3, 4, 5, 6, 7, 9]


# -- 9. Column types of what is sent ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad_row",
    [b"3,x,z,extra\n", b"3,x\n", b"3,x\x00,z\n", b"3,x\xe9,z\n"],
    ids=["too-many", "too-few", "nul-byte", "encoding"],
)
def test_column_types_are_those_of_the_rows_sent(bad_row, tmp_path):
    """A column whose only text sits in bad rows is typed ``long``: the table is made of the good rows alone."""
    path = tmp_path / "data.csv"
    path.write_bytes(b"a,b,c\n1,2,z\n" + bad_row + b"5,6,w\n7,,v\n")
    got = quarantine(path, column_types=True)
    assert got.aside.bad_rows == 1
    assert got.aside.report.column_types == ["long", "long", "string"]


def test_column_types_see_text_in_good_rows(tmp_path):
    """The contrast: text in a good row makes its column ``string``, bad rows or not."""
    path = tmp_path / "data.csv"
    path.write_bytes(b"a,b,c\n1,2,z\n3,4,5,6\n5,six,w\n")
    got = quarantine(path, column_types=True)
    assert got.aside.bad_rows == 1
    assert got.aside.report.column_types == ["long", "string", "string"]


def test_declared_long_column_with_bad_values_set_aside_is_long(tmp_path):
    """A declared ``long`` column's bad values are set aside, and what is sent types it ``long``, as declared."""
    path = tmp_path / "data.csv"
    path.write_bytes(b"a,b\n1,2\n3,x\n5,1.5\n7,8\n")
    got = quarantine(path, {"b": "long"}, column_types=True)
    assert got.aside.by_code == {"not-a-long": 2}
    assert got.aside.report.column_types == ["long", "long"]
    assert got.sent == b"a,b\n1,2\n7,8\n"


@pytest.mark.parametrize(
    ("column", "record"),
    [(None, b"1,plain,row"), ("amount", b'2,"say ""hi""",x'), ("a\rb", b"3;lone\rcr"), ("c", b'4,"multi\nline"')],
)
def test_a_rejects_line_is_what_csv_reads_back(column, record):
    """Each field comes back exactly through csv.reader, on every Python (a lone CR is quoted too)."""
    row = bad_rows.BadRow(7, 123, "row.not_a_long", 'not a whole number: "x, y"', column, record)
    line = rejects.rejects_line(row)
    (fields,) = list(csv.reader(io.StringIO(line, newline="")))
    assert fields == ["7", "123", row.code, row.message, column or "", record.decode()]
    assert line.endswith("\n") and line.count("\n") == 1 + record.count(b"\n")
