"""Everything the service's rules say about one CSV file, read once, streaming.

:func:`scan_file` reads the encoding mark, detects the separator, reads the header and
names its columns (:mod:`rules`), then has :mod:`ranges` check every record's
shape and returns a :class:`FileScan`. :func:`data_records` streams a scanned file's
values. The validator reports a FileScan; the emulator's reader reads files through it,
so the two can never disagree.
"""

from __future__ import annotations

import dataclasses
import io
import os
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, BinaryIO, cast

from airflow_tables.validation import dialect, kernels, rules, types
from airflow_tables.validation.ranges import (
    MAX_RECORD_BYTES,
    NotPlain,
    RangeScan,
    byte_blocks,
    line_breaks,
    scan_data,
)
from airflow_tables.validation.ranges import scan_stream as scan_stream_records
from airflow_tables.validation.rules import Problem


@dataclass
class Findings:
    """How the service will read a file and what stops it: what a scan finds and a report shows, declared once."""

    path: str
    size_bytes: int
    delimiter: str = ","
    #: Named as the service will name them; past ``max_columns + 1`` a header is counted, not named.
    columns: list[str] = field(default_factory=list)
    rows: int = 0
    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    encoding: str = "utf-8"
    line_terminator: str = "\n"
    headings: list[str] = field(default_factory=list)
    #: The error that ended the reading before the end of the file: ``rows`` counts only what came before it.
    stopped: Problem | None = None
    #: How many columns the header has (``len(columns)`` unless it is too wide; -1 when made: ``len(columns)``).
    column_count: int = -1
    #: Each named column's ``DataType`` by the service's rule (:mod:`.types`: ``"long"`` or ``"string"``),
    #: from the same pass over the file; None when not asked for, or when an error stopped the reading.
    column_types: list[str] | None = None
    #: The named columns with no value in any row (blank throughout, so ``string`` by the rule); set with
    #: ``column_types``: a schema check says so rather than "long -> string" alone.
    empty_columns: list[str] | None = None

    def __post_init__(self) -> None:
        if self.column_count < 0:
            self.column_count = len(self.columns)

    def findings(self) -> dict[str, Any]:
        """These fields by name, to build another kind of findings from (a scan's report)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(Findings)}


@dataclass
class FileScan(Findings):
    """Everything the rules say about one file, and where its records start (for reading them again)."""

    data_offset: int = 0  # where the first record after the header starts
    data_line: int = 2  # the line it starts on

    def stop(self, problem: Problem) -> FileScan:
        """Record ``problem`` as the error that ends the reading here."""
        self.errors.append(problem)
        self.stopped = problem
        return self


def _line_terminator(head: bytes) -> str:
    crlf = head.count(b"\r\n")
    lf = head.count(b"\n") - crlf
    cr = head.count(b"\r") - crlf
    return max((crlf, "\r\n"), (lf, "\n"), (cr, "\r"))[1] if (crlf or lf or cr) else "\n"


def read_header(f, offset: int, size: int, delimiter: str, keep: int) -> tuple[bytes, int, int, dialect.RecordShape]:
    """Return the header record's bytes, the offset after it, its line number and its shape.

    Blank lines before it are skipped, as they are everywhere. The record ends where the
    rules of :class:`dialect.Records` end it (a quote that is data does not run it on);
    only as much is read as it takes (at most :data:`MAX_RECORD_BYTES`), and its fields
    are counted, not built (:func:`dialect.record_shape`; ``keep``: how many to name).
    """
    f.seek(offset)
    buf = bytearray()
    pos = 0
    line = 1
    want = dialect.SNIFF_BYTES
    while True:
        while True:
            at_end = len(buf) >= size - offset
            shape = dialect.record_shape(buf, pos, delimiter, keep, final=at_end)
            if shape.end != -1 or at_end or len(buf) > MAX_RECORD_BYTES:
                break
            more = f.read(want)
            if not more:
                at_end = True  # the file is shorter than its size said
                shape = dialect.record_shape(buf, pos, delimiter, keep, final=True)
                break
            buf += more
            want *= 2
        end = len(buf) if shape.end == -1 else shape.end
        record = bytes(buf[pos:end])
        if record.strip(b"\r\n") or shape.end == -1 or end == len(buf) and at_end:
            named_end = -1 if shape.named_end == -1 else shape.named_end - pos
            return record, offset + end, line, dataclasses.replace(shape, end=end - pos, named_end=named_end)
        line += line_breaks(record)
        pos = end


def scan_file(
    path: str | os.PathLike, limits: rules.Limits = rules.SERVICE_LIMITS, *, column_types: bool = False
) -> FileScan:
    """Read ``path`` once, streaming, and report everything the service's rules say about it.

    ``column_types``: also type each column by the service's rule (:mod:`.types`), in the
    same pass (``FileScan.column_types``).
    """

    def records(f: BinaryIO, scan: FileScan) -> RangeScan:
        return scan_data(scan.path, scan.data_offset, scan.size_bytes, scan.delimiter, scan.column_count, column_types)

    return scan_file_with(path, limits, records, column_types=column_types)


def scan_file_with(
    path: str | os.PathLike,
    limits: rules.Limits,
    records: Callable[[BinaryIO, FileScan], RangeScan],
    *,
    column_types: bool = False,
) -> FileScan:
    """:func:`scan_file` with another reader of the records after the header (``records``, given the file
    and the scan so far: its ``data_offset``, ``data_line``, ``delimiter``, ``columns``).

    What ``records`` finds is reported as the validator's scan would report it; :mod:`.bad_rows`
    reads them this way, sorting good rows from bad.
    """
    path = os.fspath(path)
    size = os.stat(path).st_size
    with open(path, "rb") as f:
        return _scan(f, path, size, limits, records, column_types)


def scan_stream(
    stream: BinaryIO,
    label: str,
    size: int,
    limits: rules.Limits = rules.SERVICE_LIMITS,
    *,
    column_types: bool = False,
) -> FileScan | None:
    """:func:`scan_file` for a UTF-8 stream of ``size`` bytes (an object in storage), read once as it arrives.

    The records are checked as the bytes come, on this one process, and nothing is
    written anywhere. A stream cannot be read again, so it can only describe a file whose
    records are plain: for anything else (a ragged row, a bad byte, a quote that is data)
    this returns None, and the caller scans a local copy, which names records and lines
    exactly. ``size_bytes`` is what was read, when the records were read to the end.
    """
    replay = _Replay(stream)
    read_to_end = False

    def records(f: BinaryIO, scan: FileScan) -> RangeScan:
        nonlocal read_to_end
        replay.seek(scan.data_offset)
        replay.forget()
        found = scan_stream_records(replay, scan.data_offset, scan.delimiter, scan.column_count, column_types, size)
        read_to_end = True
        return found

    try:
        scan = _scan(cast(BinaryIO, replay), label, size, limits, records, column_types)
    except NotPlain:
        return None
    if not read_to_end and replay.position > size:
        return None  # more bytes than listed: the object changed, and the copy's read says so exactly
    if read_to_end:
        scan.size_bytes = replay.position
    return scan


def _scan(
    f: BinaryIO,
    path: str,
    size: int,
    limits: rules.Limits,
    scan_records: Callable[[BinaryIO, FileScan], RangeScan],
    column_types: bool = False,
) -> FileScan:
    """Read the header of ``f`` and have ``scan_records`` scan what follows it; put the report together."""
    scan = FileScan(path=path, size_bytes=size)
    if (problem := rules.check_file_name(path)) is not None:
        scan.errors.append(problem)
    if size > limits.max_bytes:
        scan.errors.append(rules.too_large_problem(size, limits))
    head = f.read(dialect.SNIFF_BYTES)
    if len(head) > size:  # the size read before is not the file's: every later step would read the wrong bytes
        return scan.stop(rules.SIZE_UNKNOWN.problem(path=path, size=size))
    if (binary := rules.binary_signature(head)) is not None:
        return scan.stop(rules.NOT_CSV.problem(line=1, kind=binary[0], advice=binary[1]))
    enc = rules.sniff_encoding(head)
    scan.encoding = enc.name
    if enc.problems:  # say what the file holds all the same, so the fix is obvious
        scan.stop(enc.problems[0])
        scan.errors.extend(enc.problems[1:])
        text = head[enc.bom_length :].decode(enc.name, errors="replace")
        scan.delimiter = dialect.detect_delimiter(text)
        first = next(iter(dialect.parse_records(text, scan.delimiter)), None)
        scan.headings = first[1][: limits.max_columns + 1] if first else []
        scan.columns = dialect.name_columns(scan.headings)
        scan.column_count = len(scan.columns)
        return scan
    head = head[enc.bom_length :]
    if not head.strip(b"\r\n"):
        scan.errors.append(rules.EMPTY_FILE.problem(line=1))
        scan.column_types = [] if column_types else None  # read to the end: no column to type
        return scan
    sample = head.decode("utf-8", errors="replace")
    scan.delimiter = dialect.detect_delimiter(sample)
    scan.line_terminator = _line_terminator(head)
    keep = limits.max_columns + 1  # enough to say the header is too wide; the rest is counted, not named
    header, data_offset, header_line, shape = read_header(f, enc.bom_length, size, scan.delimiter, keep)
    named = header if shape.named_end == -1 else header[: shape.named_end]
    records = dialect.parse_records(named.decode("utf-8", errors="replace"), scan.delimiter, header_line)
    first = next(iter(records), None)
    scan.headings = first[1] if first else [""] if shape.named_end != -1 else []
    scan.columns = dialect.name_columns(scan.headings)
    scan.column_count = len(scan.columns) if shape.named_end == -1 else shape.fields
    scan.data_offset = data_offset
    scan.warnings.extend(rules.heading_warnings(scan.headings, scan.columns))
    scan.errors.extend(rules.heading_length_problems(scan.headings, header_line))
    scan.errors.extend(_heading_byte_problems(header, header_line))
    if records.unterminated_line is not None or shape.unterminated:
        return scan.stop(rules.HEADER_UNTERMINATED.problem(line=header_line, record=1))
    if scan.column_count > limits.max_columns:  # refused, but the rows are still counted for the report
        problem = rules.TOO_MANY_COLUMNS.problem(
            line=header_line, record=1, columns=scan.column_count, limit=limits.max_columns
        )
        scan.errors.append(problem)
    line_base = header_line + line_breaks(header)
    scan.data_line = line_base
    data = scan_records(f, scan)
    scan.rows = data.records
    found = {p.code for p in scan.errors}  # only the first bad byte of a kind is reported, so the heading's wins
    # In the order of the file: the kernels find a bad byte and a stop byte in either order.
    for p in sorted(data.problems, key=lambda p: p.line or 0):
        if p.code not in found:
            scan.errors.append(p.moved(lines=line_base - 1, records=1))
            if data.stopped and p.code == rules.RECORD_TOO_LONG.code:  # the one problem that ends a scan
                scan.stopped = scan.errors[-1]
    if data.ragged_total:
        listed = [(record + 1, line + line_base - 1, fields) for record, line, fields in data.ragged]
        scan.errors.append(rules.ragged_rows_problem(data.ragged_total, listed, scan.column_count))
    if not data.stopped and data.records == 0:
        scan.warnings.append(rules.NO_ROWS.problem())
    if data.types is not None and scan.stopped is None:
        scan.column_types = [types.type_of(state) for state in data.types[: len(scan.columns)]]
        scan.empty_columns = [n for n, state in zip(scan.columns, data.types, strict=False) if state == types.UNSEEN]
    return scan


class _Replay(io.RawIOBase):
    """A forward-only stream that can go back to any byte read so far, until told to :meth:`forget`.

    The header is read twice (sniffed, then read as a record), and where the records start
    is only known after it; what was read until then is kept (at most the header and the
    sniffing sample) and served again, then the stream is read on directly.
    """

    def __init__(self, raw: BinaryIO) -> None:
        super().__init__()
        self.raw = raw
        self.kept = bytearray()  # the stream's first bytes, while they may be needed again
        self.keeping = True
        self.dropped = False  # what was kept has been served again and let go
        self.position = 0  # the offset in the stream of the next byte read

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        target = memoryview(buffer).cast("B")
        if self.position < len(self.kept):
            n = min(len(target), len(self.kept) - self.position)
            target[:n] = self.kept[self.position : self.position + n]
        else:
            if not self.keeping and not self.dropped:
                self.kept = bytearray()  # everything kept was served again: the rest comes from the stream
                self.dropped = True
            n = self.raw.readinto(target)  # type: ignore[attr-defined]  # every opener gives a raw or buffered reader
            if self.keeping:
                self.kept += target[:n]
        self.position += n
        return n

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes, as many as the stream has (a raw stream may give fewer at a time)."""
        parts, want = [], size
        while want != 0:
            part = super().read(want if want > 0 else io.DEFAULT_BUFFER_SIZE)
            if not part:
                break
            parts.append(part)
            want = want - len(part) if want > 0 else want
        return b"".join(parts)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """Only back to a byte still kept, or to where the stream is."""
        kept = not self.dropped and offset <= len(self.kept)
        if whence != io.SEEK_SET or not (kept or offset == self.position):
            raise io.UnsupportedOperation("a stream goes back only as far as what was kept")
        self.position = offset
        return offset

    def tell(self) -> int:
        return self.position

    def forget(self) -> None:
        """Keep nothing more: what is still kept past the position is served, then the stream is read on."""
        self.keeping = False


def _heading_byte_problems(header: bytes, line: int) -> list[Problem]:
    """The checks every data record's bytes get (UTF-8, the byte rules), for the heading row."""

    def line_of(at: int) -> int:
        return line + line_breaks(header[:at])

    problems = []
    if (at := kernels.first_non_utf8(header)) >= 0:
        problems.append(rules.NOT_UTF8.problem(line=line_of(at), byte=header[at]))
    return problems + rules.byte_problems(header, line_of)


def data_records(scan: FileScan) -> Generator[tuple[int, list[str]], None, None]:
    """Stream ``(line, fields)`` for the records after the header of a scanned file.

    Fields are decoded as UTF-8 (bad bytes replaced); this is how the emulator reads
    the values of a file it accepted, by the very rules the validator checked.
    """
    with open(scan.path, "rb") as f:
        lines = (
            line
            for block in byte_blocks(f, scan.data_offset)
            for line in io.StringIO(block.decode("utf-8", errors="replace"), newline="")
        )
        yield from dialect.Records(lines, scan.delimiter, scan.data_line)
