"""Everything the service's rules say about one CSV file, read once, streaming.

:func:`scan_file` reads the encoding mark, detects the separator, reads the header and
names its columns (:mod:`csv_rules`), then has :mod:`csv_ranges` check every record's
shape and returns a :class:`FileScan`. :func:`data_records` streams a scanned file's
values. The validator reports a FileScan; the emulator's reader reads files through it,
so the two can never disagree.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from airflow_tables import csv_rules
from airflow_tables.csv_ranges import (
    MAX_RECORD_BYTES,
    RangeScan,
    byte_blocks,
    first_boundary,
    line_breaks,
    scan_data,
    shift,
)
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
    columns: list[str] = field(default_factory=list)
    rows: int = 0
    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    data_offset: int = 0  # where the first record after the header starts
    data_line: int = 2  # the line it starts on


def _line_terminator(head: bytes) -> str:
    crlf = head.count(b"\r\n")
    lf = head.count(b"\n") - crlf
    cr = head.count(b"\r") - crlf
    return max((crlf, "\r\n"), (lf, "\n"), (cr, "\r"))[1] if (crlf or lf or cr) else "\n"


def read_header(f, offset: int, size: int) -> tuple[bytes, int, int]:
    """Return the header record's bytes, the offset after it and its line number.

    Blank lines before it are skipped, as they are everywhere. Reads only as far as the
    header goes (at most :data:`MAX_RECORD_BYTES`).
    """
    f.seek(offset)
    buf = b""
    pos = 0
    line = 1
    want = csv_rules.SNIFF_BYTES
    while True:
        while True:
            end = first_boundary(buf, pos)
            if end != -1 or len(buf) >= size - offset or len(buf) > MAX_RECORD_BYTES:
                break
            more = f.read(want)
            if not more:
                break
            buf += more
            want *= 2
        record = buf[pos:] if end == -1 else buf[pos:end]
        if record.strip(b"\r\n") or end == -1:
            return record, offset + (len(buf) if end == -1 else end), line
        line += record.count(b"\n") + record.count(b"\r") - record.count(b"\r\n")
        pos = end


def scan_file(
    path: str | os.PathLike,
    *,
    max_columns: int = csv_rules.MAX_COLUMNS,
    max_bytes: int = csv_rules.MAX_BYTES,
) -> FileScan:
    """Read ``path`` once, streaming, and report everything the service's rules say about it."""
    path = os.fspath(path)
    size = os.stat(path).st_size
    scan = FileScan(path=path, size_bytes=size)
    if (problem := csv_rules.check_file_name(path)) is not None:
        scan.errors.append(problem)
    if size > max_bytes:
        scan.errors.append(csv_rules.too_large_problem(size, max_bytes))
    with open(path, "rb") as f:
        head = f.read(csv_rules.SNIFF_BYTES)
        enc = csv_rules.sniff_encoding(head)
        scan.encoding = enc.name
        if enc.problems:  # say what the file holds all the same, so the fix is obvious
            scan.errors.extend(enc.problems)
            text = head[enc.bom_length :].decode(enc.name, errors="replace")
            scan.delimiter = csv_rules.detect_delimiter(text)
            first = next(iter(csv_rules.parse_records(text, scan.delimiter)), None)
            scan.headings = first[1] if first else []
            scan.columns = csv_rules.name_columns(scan.headings)
            return scan
        head = head[enc.bom_length :]
        if not head.strip(b"\r\n"):
            scan.errors.append(
                Problem("empty-file", "the file is empty; the service needs at least a header row.", line=1)
            )
            return scan
        sample = head.decode("utf-8", errors="replace")
        scan.delimiter = csv_rules.detect_delimiter(sample)
        scan.line_terminator = _line_terminator(head)
        header, data_offset, header_line = read_header(f, enc.bom_length, size)
    text = header.decode("utf-8", errors="replace")
    records = csv_rules.parse_records(text, scan.delimiter, header_line)
    first = next(iter(records), None)
    scan.headings = first[1] if first else []
    scan.columns = csv_rules.name_columns(scan.headings)
    scan.data_offset = data_offset
    scan.warnings.extend(csv_rules.heading_warnings(scan.headings, scan.columns))
    if records.unterminated_line is not None:
        scan.errors.append(
            Problem(
                "unterminated-quote",
                "the header row opens a quote that is never closed. Add the closing double quote.",
                line=header_line,
                record=1,
            )
        )
        return scan
    if len(scan.columns) > max_columns:
        scan.errors.append(
            Problem(
                "too-many-columns",
                f"the header has {len(scan.columns):,} columns; the service takes at most {max_columns}. "
                "Drop columns or split the file.",
                line=header_line,
                record=1,
            )
        )
        return scan
    data = scan_data(path, data_offset, size, scan.delimiter, len(scan.columns))
    scan.rows = data.records
    line_base = header_line + line_breaks(header)
    scan.data_line = line_base
    for p in data.problems:
        scan.errors.append(Problem(p.code, p.message, shift(p.line, line_base - 1), shift(p.record, 1)))
    if data.ragged_total:
        scan.errors.append(_ragged_problem(data, len(scan.columns), line_base))
    if not data.stopped and data.records == 0:
        scan.warnings.append(Problem("no-rows", "the file has a header but no data rows; the table will be empty."))
    return scan


def _ragged_problem(data: RangeScan, columns: int, line_base: int) -> Problem:
    listed = "; ".join(
        f"record {record + 1} (line {line + line_base - 1}) has {fields} field{'s' if fields != 1 else ''}"
        for record, line, fields in data.ragged
    )
    more = data.ragged_total - len(data.ragged)
    tail = f"; and {more:,} more" if more > 0 else ""
    first_record, first_line, _ = data.ragged[0]
    return Problem(
        "ragged-rows",
        f"{data.ragged_total:,} {'rows do' if data.ragged_total != 1 else 'row does'} not have the header's {columns} "
        f"fields: {listed}{tail}. Every row needs exactly {columns} fields; quote fields that contain the "
        "separator or a line break.",
        line=first_line + line_base - 1,
        record=first_record + 1,
    )


def data_records(scan: FileScan) -> Iterator[tuple[int, list[str]]]:
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
