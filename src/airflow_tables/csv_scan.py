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
from collections.abc import Generator
from dataclasses import dataclass, field

from airflow_tables import csv_fastpath, csv_rules
from airflow_tables.csv_ranges import (
    MAX_RECORD_BYTES,
    byte_blocks,
    first_boundary,
    line_breaks,
    scan_data,
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


def scan_file(path: str | os.PathLike, limits: csv_rules.Limits = csv_rules.SERVICE_LIMITS) -> FileScan:
    """Read ``path`` once, streaming, and report everything the service's rules say about it."""
    path = os.fspath(path)
    size = os.stat(path).st_size
    scan = FileScan(path=path, size_bytes=size)
    if (problem := csv_rules.check_file_name(path)) is not None:
        scan.errors.append(problem)
    if size > limits.max_bytes:
        scan.errors.append(csv_rules.too_large_problem(size, limits))
    with open(path, "rb") as f:
        head = f.read(csv_rules.SNIFF_BYTES)
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
            scan.headings = first[1] if first else []
            scan.columns = csv_rules.name_columns(scan.headings)
            return scan
        head = head[enc.bom_length :]
        if not head.strip(b"\r\n"):
            scan.errors.append(csv_rules.empty_file_problem())
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
    scan.errors.extend(_heading_byte_problems(header, header_line))
    if records.unterminated_line is not None:
        return scan.stop(csv_rules.header_unterminated_problem(header_line))
    if len(scan.columns) > limits.max_columns:  # refused, but the rows are still counted for the report
        scan.errors.append(csv_rules.too_many_columns_problem(len(scan.columns), limits, header_line))
    data = scan_data(path, data_offset, size, scan.delimiter, len(scan.columns))
    scan.rows = data.records
    line_base = header_line + line_breaks(header)
    scan.data_line = line_base
    found = {p.code for p in scan.errors}  # only the first bad byte of a kind is reported, so the heading's wins
    for p in data.problems:
        if p.code not in found:
            scan.errors.append(p.moved(lines=line_base - 1, records=1))
            if data.stopped and p.code == csv_rules.RECORD_TOO_LONG:  # the one problem that ends a scan
                scan.stopped = scan.errors[-1]
    if data.ragged_total:
        listed = [(record + 1, line + line_base - 1, fields) for record, line, fields in data.ragged]
        scan.errors.append(csv_rules.ragged_rows_problem(data.ragged_total, listed, len(scan.columns)))
    if not data.stopped and data.records == 0:
        scan.warnings.append(csv_rules.no_rows_warning())
    return scan


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
