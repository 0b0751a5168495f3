"""Everything the service's rules say about one CSV file, read once, streaming.

:func:`scan_file` reads the encoding mark, detects the separator, reads the header and
names its columns (:mod:`csv_rules`), then has :mod:`csv_ranges` check every record's
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

from airflow_tables import csv_fastpath, csv_rules
from airflow_tables.csv_ranges import (
    MAX_RECORD_BYTES,
    NotPlain,
    RangeScan,
    byte_blocks,
    line_breaks,
    scan_data,
)
from airflow_tables.csv_ranges import scan_stream as scan_stream_records
from airflow_tables.csv_rules import Problem


@dataclass
class FileScan:
    """Everything the rules say about one file: how the service will read it, and what is wrong."""

    path: str
    size_bytes: int
    encoding: str = "utf-8"
    delimiter: str = ","
    line_terminator: str = "\n"
    headings: list[str] = field(default_factory=list)
    #: Named as the service will name them; past ``max_columns + 1`` a header is counted, not named.
    columns: list[str] = field(default_factory=list)
    column_count: int = 0  # how many columns the header has (``len(columns)`` unless it is too wide)
    rows: int = 0
    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    data_offset: int = 0  # where the first record after the header starts
    data_line: int = 2  # the line it starts on
    #: The error that ended the reading before the end of the file (``rows`` then counts what came before).
    stopped: Problem | None = None

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


def read_header(f, offset: int, size: int, delimiter: str, keep: int) -> tuple[bytes, int, int, csv_rules.RecordShape]:
    """Return the header record's bytes, the offset after it, its line number and its shape.

    Blank lines before it are skipped, as they are everywhere. The record ends where the
    rules of :class:`csv_rules.Records` end it (a quote that is data does not run it on);
    only as much is read as it takes (at most :data:`MAX_RECORD_BYTES`), and its fields
    are counted, not built (:func:`csv_rules.record_shape`; ``keep``: how many to name).
    """
    f.seek(offset)
    buf = bytearray()
    pos = 0
    line = 1
    want = csv_rules.SNIFF_BYTES
    while True:
        while True:
            at_end = len(buf) >= size - offset
            shape = csv_rules.record_shape(buf, pos, delimiter, keep, final=at_end)
            if shape.end != -1 or at_end or len(buf) > MAX_RECORD_BYTES:
                break
            more = f.read(want)
            if not more:
                at_end = True  # the file is shorter than its size said
                shape = csv_rules.record_shape(buf, pos, delimiter, keep, final=True)
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


def scan_file(path: str | os.PathLike, limits: csv_rules.Limits = csv_rules.SERVICE_LIMITS) -> FileScan:
    """Read ``path`` once, streaming, and report everything the service's rules say about it."""
    path = os.fspath(path)
    size = os.stat(path).st_size

    def records(f: BinaryIO, offset: int, delimiter: str, columns: int) -> RangeScan:
        return scan_data(path, offset, size, delimiter, columns)

    with open(path, "rb") as f:
        return _scan(f, path, size, limits, records)


def scan_stream(
    stream: BinaryIO, label: str, size: int, limits: csv_rules.Limits = csv_rules.SERVICE_LIMITS
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

    def records(f: BinaryIO, offset: int, delimiter: str, columns: int) -> RangeScan:
        nonlocal read_to_end
        replay.seek(offset)
        replay.forget()
        found = scan_stream_records(replay, offset, delimiter, columns)
        read_to_end = True
        return found

    try:
        scan = _scan(cast(BinaryIO, replay), label, size, limits, records)
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
    limits: csv_rules.Limits,
    scan_records: Callable[[BinaryIO, int, str, int], RangeScan],
) -> FileScan:
    """Read the header of ``f`` and have ``scan_records`` scan what follows it; put the report together."""
    scan = FileScan(path=path, size_bytes=size)
    if (problem := csv_rules.check_file_name(path)) is not None:
        scan.errors.append(problem)
    if size > limits.max_bytes:
        scan.errors.append(csv_rules.too_large_problem(size, limits))
    head = f.read(csv_rules.SNIFF_BYTES)
    if len(head) > size:  # the size read before is not the file's: every later step would read the wrong bytes
        return scan.stop(csv_rules.size_unknown_problem(path, size))
    if (binary := csv_rules.binary_signature(head)) is not None:
        return scan.stop(csv_rules.not_a_csv_problem(*binary))
    enc = csv_rules.sniff_encoding(head)
    scan.encoding = enc.name
    if enc.problems:  # say what the file holds all the same, so the fix is obvious
        scan.stop(enc.problems[0])
        scan.errors.extend(enc.problems[1:])
        text = head[enc.bom_length :].decode(enc.name, errors="replace")
        scan.delimiter = csv_rules.detect_delimiter(text)
        first = next(iter(csv_rules.parse_records(text, scan.delimiter)), None)
        scan.headings = first[1][: limits.max_columns + 1] if first else []
        scan.columns = csv_rules.name_columns(scan.headings)
        scan.column_count = len(scan.columns)
        return scan
    head = head[enc.bom_length :]
    if not head.strip(b"\r\n"):
        scan.errors.append(csv_rules.empty_file_problem())
        return scan
    sample = head.decode("utf-8", errors="replace")
    scan.delimiter = csv_rules.detect_delimiter(sample)
    scan.line_terminator = _line_terminator(head)
    keep = limits.max_columns + 1  # enough to say the header is too wide; the rest is counted, not named
    header, data_offset, header_line, shape = read_header(f, enc.bom_length, size, scan.delimiter, keep)
    named = header if shape.named_end == -1 else header[: shape.named_end]
    records = csv_rules.parse_records(named.decode("utf-8", errors="replace"), scan.delimiter, header_line)
    first = next(iter(records), None)
    scan.headings = first[1] if first else [""] if shape.named_end != -1 else []
    scan.columns = csv_rules.name_columns(scan.headings)
    scan.column_count = len(scan.columns) if shape.named_end == -1 else shape.fields
    scan.data_offset = data_offset
    scan.warnings.extend(csv_rules.heading_warnings(scan.headings, scan.columns))
    scan.errors.extend(_heading_byte_problems(header, header_line))
    if records.unterminated_line is not None or shape.unterminated:
        return scan.stop(csv_rules.header_unterminated_problem(header_line))
    if scan.column_count > limits.max_columns:  # refused, but the rows are still counted for the report
        scan.errors.append(csv_rules.too_many_columns_problem(scan.column_count, limits, header_line))
    data = scan_records(f, data_offset, scan.delimiter, scan.column_count)
    scan.rows = data.records
    line_base = header_line + line_breaks(header)
    scan.data_line = line_base
    found = {p.code for p in scan.errors}  # only the first bad byte of a kind is reported, so the heading's wins
    # In the order of the file: the kernels find a bad byte and a NUL in either order.
    for p in sorted(data.problems, key=lambda p: p.line or 0):
        if p.code not in found:
            scan.errors.append(p.moved(lines=line_base - 1, records=1))
            if data.stopped and p.code == csv_rules.RECORD_TOO_LONG:  # the one problem that ends a scan
                scan.stopped = scan.errors[-1]
    if data.ragged_total:
        listed = [(record + 1, line + line_base - 1, fields) for record, line, fields in data.ragged]
        scan.errors.append(csv_rules.ragged_rows_problem(data.ragged_total, listed, scan.column_count))
    if not data.stopped and data.records == 0:
        scan.warnings.append(csv_rules.no_rows_warning())
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
    """The checks every data record's bytes get (UTF-8, no NUL), for the heading row."""
    problems = []
    if (at := csv_fastpath.first_non_utf8(header)) >= 0:
        problems.append(csv_rules.non_utf8_problem(line + line_breaks(header[:at]), header[at]))
    if (at := header.find(b"\x00")) >= 0:
        problems.append(csv_rules.nul_byte_problem(line + line_breaks(header[:at])))
    return problems


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
        yield from csv_rules.Records(lines, scan.delimiter, scan.data_line)
