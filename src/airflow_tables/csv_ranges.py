"""Scanning byte ranges of a CSV file for its structure, a megabyte at a time, on up to two processes.

The machinery behind :mod:`airflow_tables.csv_scan` (which reads the header and puts a
file's report together). Why a scan of its own and not :mod:`csv`: the stdlib reader
builds every field as a Python object (4-5 s for 512 MiB), and the libraries that are
faster hold hundreds of MiB or miss ragged rows (``shared/bench/ANCHORS.md``). What the
service cares about is structure: how many records, and whether every record has as
many fields as the header. That can be checked with a handful of C-level bytes
operations:

1. cut the buffer at the last line break outside quotes (quote parity, counted on the
   short tail only), so every block starts and ends at a record boundary;
2. ``bytes.translate`` deletes every byte that is not a separator, a line break or a
   quote, leaving a string about a tenth of the size;
3. adjacent quote pairs carry no structure (an empty or separator-free quoted field,
   a doubled quote) and are removed; the few quoted parts left are dropped by parity;
4. what remains must equal ``(separator * (columns - 1) + newline) * records``.

A block that fails the comparison (a ragged row, a blank line, a NUL byte, an open
quote, a quote that is data) switches the rest of the file to an exact read by
:class:`csv_rules.Records`, which names the records and lines. Files over
:data:`PARALLEL_MIN_BYTES` are split in two at a verified record boundary and the
second half is scanned by a child process (``python -m airflow_tables.csv_ranges``);
if the split still falls inside a quoted field, the child's answer is thrown away and
the scan goes on alone, so the result never depends on the split.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field

from airflow_tables import csv_rules
from airflow_tables.csv_rules import Problem

CHUNK_BYTES = 1024 * 1024
#: A record longer than this is almost certainly an unclosed quote; stop rather than grow.
MAX_RECORD_BYTES = 16 * 1024 * 1024
PARALLEL_MIN_BYTES = 32 * 1024 * 1024
#: The first bytes of every range are also read exactly, to catch quotes that are data.
VERIFY_BYTES = 1024 * 1024
#: How many ragged rows are listed one by one (the total is always counted).
MAX_LISTED = 10

_KEEP = {d: bytes([ord(d), 10, 13, 34]) for d in csv_rules.DELIMITERS}
_DELETE = {d: bytes(b for b in range(256) if b not in keep) for d, keep in _KEEP.items()}


@dataclass
class RangeScan:
    """What a scan of a byte range found; line and record numbers are relative to its start.

    ``lines`` (line breaks in the range) is only counted when a later range's problems
    need renumbering, or when a block had to be read exactly: the fast path never
    counts lines, which saves a pass over every byte.
    """

    start: int
    end: int = 0
    records: int = 0
    lines: int | None = None
    ragged_total: int = 0
    ragged: list[tuple[int, int, int]] = field(default_factory=list)  # (record, line, fields)
    problems: list[Problem] = field(default_factory=list)
    stopped: bool = False  # an unrecoverable problem ended the scan early
    resume_offset: int | None = None  # set when the range did not end on a record boundary
    to_eof: bool = False  # the scan read exactly past its range, to the end of the file

    def to_json(self) -> str:
        data = dict(self.__dict__)
        data["problems"] = [p.to_dict() for p in self.problems]
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> RangeScan:
        data = json.loads(text)
        data["problems"] = [Problem(**p) for p in data["problems"]]
        data["ragged"] = [tuple(r) for r in data["ragged"]]
        return cls(**data)

    def count_lines(self, path: str | os.PathLike) -> int:
        if self.lines is None:
            with open(path, "rb") as f:
                self.lines = count_breaks(f, self.start, self.end)
        return self.lines

    def absorb(self, other: RangeScan, path: str | os.PathLike) -> None:
        """Append the next range's findings, renumbering its records and lines."""
        if other.ragged or other.problems:
            self.count_lines(path)
        for record, line, fields in other.ragged:
            if len(self.ragged) < MAX_LISTED:
                self.ragged.append((record + self.records, line + (self.lines or 0), fields))
        for p in other.problems:
            if not any(q.code == p.code for q in self.problems):
                self.problems.append(
                    Problem(p.code, p.message, shift(p.line, self.lines or 0), shift(p.record, self.records))
                )
        self.ragged_total += other.ragged_total
        self.records += other.records
        self.lines = None if self.lines is None or other.lines is None else self.lines + other.lines
        self.end = other.end
        self.stopped = self.stopped or other.stopped
        self.resume_offset = other.resume_offset
        self.to_eof = other.to_eof


def shift(n: int | None, by: int) -> int | None:
    return None if n is None else n + by


def line_breaks(data: bytes) -> int:
    """Line breaks in ``data``: LF, CRLF and lone CR each count once."""
    return data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")


def count_breaks(f, start: int, end: int) -> int:
    """Line breaks in ``[start, end)`` of an open binary file, reading it a block at a time."""
    f.seek(start)
    total = 0
    left = end - start
    prev_cr = False
    while left > 0:
        data = f.read(min(CHUNK_BYTES, left))
        if not data:
            break
        left -= len(data)
        total += line_breaks(data)
        if prev_cr and data[:1] == b"\n":
            total -= 1  # a CRLF split between two reads was counted twice
        prev_cr = data[-1:] == b"\r"
    return total


def byte_blocks(f, offset: int) -> Iterator[bytes]:
    """Blocks of about :data:`CHUNK_BYTES` from ``offset`` on, each ending after a line break (but the last)."""
    f.seek(offset)
    carry = b""
    while True:
        data = f.read(CHUNK_BYTES)
        buf = carry + data if carry else data
        if not data:
            if buf:
                yield buf
            return
        cut = buf.rfind(b"\n")
        if cut == -1:
            cut = buf.rfind(b"\r", 0, len(buf) - 1)  # a CR at the very end may be half a CRLF
        if cut == -1:
            carry = buf
            continue
        carry = buf[cut + 1 :]
        yield buf[: cut + 1]


def first_boundary(buf: bytes, start: int = 0) -> int:
    """Index just after the first line break outside quotes at or after ``start``, or -1."""
    quotes = 0
    pos = start
    while True:
        nl, cr = buf.find(b"\n", pos), buf.find(b"\r", pos)
        if nl == -1 and cr == -1:
            return -1
        brk = cr if nl == -1 or (cr != -1 and cr < nl) else nl
        quotes += buf.count(b'"', pos, brk)
        end = brk + 1
        if buf[brk] == 13:  # CR: a CRLF pair is one break; a CR at the end may be half of one
            if end == len(buf):
                return -1
            if buf[end] == 10:
                end += 1
        if quotes % 2 == 0:
            return end
        pos = end


def _last_boundary(buf: bytes, parity: int) -> int:
    """Index just after the last line break outside quotes, given the buffer's quote parity; or -1."""
    if b"\n" in buf:
        brk, limit = b"\n", len(buf)
    else:  # old Mac files break lines with CR alone; a CR at the very end may be half a CRLF
        brk, limit = b"\r", len(buf) - 1
    tail_quotes = 0
    prev = len(buf)
    while True:
        cut = buf.rfind(brk, 0, min(prev, limit))
        if cut == -1:
            return -1
        tail_quotes += buf.count(b'"', cut, prev)
        prev = cut
        if (parity + tail_quotes) % 2 == 0:
            return cut + 1
        opening = buf.rfind(b'"', 0, cut)  # the line break is inside a quoted field
        if opening == -1:
            return -1
        tail_quotes += buf.count(b'"', opening, prev)
        prev = opening


class _Skeleton:
    """The structure of a buffer: its separators and line breaks outside quotes.

    ``bytes.translate`` keeps only separators, line breaks and quotes (a tenth of the
    bytes or less); adjacent quote pairs enclose no structure and are dropped; what
    is left between the remaining quotes is inside quoted fields and dropped by
    parity. ``parity`` is the quote count modulo 2.
    """

    __slots__ = ("outside", "parity")

    def __init__(self, buf: bytes, delete: bytes) -> None:
        kept = buf.translate(None, delete)
        self.parity = 0
        if b'"' in kept:
            kept = kept.replace(b'""', b"")
            if b'"' in kept:
                parts = kept.split(b'"')
                self.parity = (len(parts) - 1) & 1
                kept = b"".join(parts[0::2])
        self.outside = kept


class _RangeReader:
    """Scans a byte range block by block, falling back to an exact read when a block is not plain.

    A block is *plain* when its skeleton matches the header's shape exactly. Anything
    else (a ragged row, a blank line, a NUL byte, a quote in the middle of a field, a
    quote left open) makes the rest be read exactly, by :class:`csv_rules.Records`,
    which is what names the records and lines. The exact read goes on to the end of
    the file, because once a block was not plain its end is no longer known to be a
    record boundary.
    """

    def __init__(self, path: str | os.PathLike, start: int, delimiter: str, columns: int) -> None:
        self.path = path
        self.delimiter = delimiter
        self.columns = columns
        self.delete = _DELETE[delimiter]
        self.line_pattern = delimiter.encode() * (columns - 1) + b"\n"
        self.result = RangeScan(start=start, end=start)
        self.utf8_ok = True

    def skeleton(self, buf: bytes) -> _Skeleton:
        return _Skeleton(buf, self.delete)

    def whole_records(self, buf: bytes, skeleton: _Skeleton) -> tuple[bytes, bytes, bytes] | None:
        """Split ``buf`` after its last whole record: (block, block's skeleton, the rest); None if none ends."""
        cut = _last_boundary(buf, skeleton.parity)
        if cut == -1:
            return None
        outside = skeleton.outside
        rest = buf[cut:]
        if rest:  # the rest starts on a boundary, so its skeleton is a suffix of the whole one
            outside = outside[: len(outside) - len(self.skeleton(rest).outside)]
        return buf[:cut], outside, rest

    def plain_block(self, block: bytes, outside: bytes, final: bool, verify: bool = False) -> bool:
        """Account for ``block`` if it is plain and return True; otherwise change nothing.

        ``outside`` is the block's skeleton. ``verify`` also reads the block exactly and
        requires the same answer (see :meth:`agrees_with_exact`).
        """
        if b"\x00" in block:
            return False
        if b"\r" in outside:
            outside = outside.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if final and block and not block.endswith((b"\n", b"\r")):
            outside += b"\n"  # the last record needs no line break
        records = outside.count(b"\n")
        if outside != self.line_pattern * records:
            return False
        if self.columns == 1 and (
            block[:1] in (b"\n", b"\r") or b"\n\n" in block or b"\n\r" in block or b"\r\r" in block
        ):
            return False  # one column: a blank line looks like a record until read exactly
        if verify and not self.agrees_with_exact(block, records):
            return False
        self._check_utf8(block)
        self.result.records += records
        self.result.end += len(block)
        return True

    def agrees_with_exact(self, block: bytes, records: int) -> bool:
        """Whether an exact read of the block finds what the fast scan found.

        The fast scan pairs quotes wherever they stand; the service opens a quoted
        field only at a field's start. On files that quote by the rules the two agree;
        on files with quotes inside unquoted fields (inch marks, JSON, prose) they
        usually disagree in the first megabyte already, and the whole range is then
        read exactly. Costs about 10 ms per range.
        """
        text = block.decode("latin-1")
        widths = [len(fields) for _, fields in csv_rules.parse_records(text, self.delimiter)]
        return len(widths) == records and all(w == self.columns for w in widths)

    def exact_to_end(self, f, offset: int) -> None:
        """Read records exactly from ``offset`` (a record boundary) to the end of the file."""
        res = self.result
        res.to_eof = True
        res.lines = count_breaks(f, res.start, offset)
        records = csv_rules.Records(self._text_lines(f, offset), self.delimiter, res.lines + 1)
        for line, fields in records:
            res.records += 1
            if len(fields) != self.columns:
                res.ragged_total += 1
                if len(res.ragged) < MAX_LISTED:
                    res.ragged.append((res.records, line, len(fields)))
        if records.unterminated_line is not None:
            res.problems.append(
                Problem(
                    "unterminated-quote",
                    "a quoted field starts in this record and is never closed, so everything after it "
                    "is read as one cell. Add the closing double quote (or double any quote that is "
                    'data: "").',
                    line=records.unterminated_line,
                    record=res.records,
                )
            )

    def _text_lines(self, f, offset: int) -> Iterator[str]:
        """The file's lines from ``offset``, checking each block's bytes and counting its lines."""
        for block in byte_blocks(f, offset):
            self._check_utf8(block)
            self._check_nul(block)
            yield from io.StringIO(block.decode("latin-1"), newline="")  # one char per byte
            self.result.lines += line_breaks(block)
            self.result.end = f.tell()

    def _line_at(self, block: bytes, index: int) -> int:
        """The 1-based line (relative to the range) of ``block[index]``."""
        if self.result.lines is not None:  # exact mode keeps count
            return self.result.lines + 1 + line_breaks(block[:index])
        with open(self.path, "rb") as f:
            before = count_breaks(f, self.result.start, self.result.end)
        return before + 1 + line_breaks(block[:index])

    def _check_nul(self, block: bytes) -> None:
        at = block.find(b"\x00")
        if at == -1 or any(p.code == "nul-byte" for p in self.result.problems):
            return
        self.result.problems.append(
            Problem(
                "nul-byte",
                "contains a NUL byte (0x00): the file is binary, UTF-16 or damaged. "
                "Export it again as a UTF-8 text CSV.",
                line=self._line_at(block, at),
            )
        )

    def _check_utf8(self, block: bytes) -> None:
        if not self.utf8_ok or block.isascii():
            return
        try:
            block.decode("utf-8")
        except UnicodeDecodeError as err:
            self.utf8_ok = False
            line = self._line_at(block, err.start)
            self.result.problems.append(csv_rules.non_utf8_problem(line, block[err.start]))

    def too_long(self) -> None:
        self.result.stopped = True
        self.result.problems.append(
            Problem(
                "record-too-long",
                f"a record starts here and runs on for more than {MAX_RECORD_BYTES // 1024**2} MiB "
                "without ending; most likely a quote is never closed. Check the quoting from this line on.",
                line=self._line_at(b"", 0),
            )
        )


def scan_range(path: str | os.PathLike, start: int, stop: int | None, delimiter: str, columns: int) -> RangeScan:
    """Scan ``path`` from ``start`` (a record boundary) to ``stop`` (or the end).

    With a ``stop``, the range must end on a record boundary; when it does not (the
    split fell inside a quoted field), the result covers up to the last boundary and
    ``resume_offset`` says where to go on from. When a block is not plain the scan goes
    on exactly to the end of the file and ``to_eof`` is set.
    """
    reader = _RangeReader(path, start, delimiter, columns)
    with open(path, "rb") as f:
        f.seek(start)
        pos = start
        carry = b""
        verified = 0
        while True:
            want = CHUNK_BYTES if stop is None else min(CHUNK_BYTES, stop - pos)
            data = f.read(want) if want > 0 else b""
            pos += len(data)
            buf = carry + data if carry else data
            offset = pos - len(buf)
            verify = verified < VERIFY_BYTES
            skeleton = reader.skeleton(buf)
            if stop is None and not data:  # the end of the file
                if not reader.plain_block(buf, skeleton.outside, final=True, verify=verify):
                    reader.exact_to_end(f, offset)
                return reader.result
            if stop is not None and (pos >= stop or not data):  # the end of the range
                if buf and (skeleton.parity or not buf.endswith((b"\n", b"\r"))):
                    reader.result.resume_offset = offset  # it ends inside a record
                elif not reader.plain_block(buf, skeleton.outside, final=False, verify=verify):
                    reader.exact_to_end(f, offset)
                return reader.result
            split = reader.whole_records(buf, skeleton)
            if split is None:
                if len(buf) > MAX_RECORD_BYTES:
                    reader.too_long()
                    return reader.result
                carry = buf
                continue
            block, outside, carry = split
            if not reader.plain_block(block, outside, final=False, verify=verify):
                reader.exact_to_end(f, offset)
                return reader.result
            verified += len(block)


def split_point(path: str | os.PathLike, start: int, size: int, delimiter: str, columns: int) -> int | None:
    """A record boundary near the middle of ``[start, size)`` to split the scan at, or None.

    Tries the line starts after the middle until the next 256 KiB read from there are
    plain and agree with an exact read, so the split rarely falls inside a quoted
    field; when it still does, :func:`scan_data` notices and carries on alone.
    """
    middle = start + (size - start) // 2
    with open(path, "rb") as f:
        f.seek(middle)
        window = f.read(CHUNK_BYTES)
    probe = _RangeReader(path, middle, delimiter, columns)
    pos = window.find(b"\n") + 1
    for _ in range(64):
        if pos <= 0:
            return None
        sample = window[pos : pos + 256 * 1024]
        split = probe.whole_records(sample, probe.skeleton(sample))
        if split is not None and probe.plain_block(split[0], split[1], final=False, verify=True):
            return middle + pos
        pos = window.find(b"\n", pos) + 1
    return None


def scan_data(path: str | os.PathLike, start: int, size: int, delimiter: str, columns: int) -> RangeScan:
    """Scan the records after the header, on two processes when the file is large."""
    mid = None
    if size - start >= PARALLEL_MIN_BYTES and (os.cpu_count() or 1) > 1:
        mid = split_point(path, start, size, delimiter, columns)
    if mid is None:
        return scan_range(path, start, None, delimiter, columns)
    import subprocess  # only large files pay for it

    child = subprocess.Popen(
        [sys.executable, "-m", "airflow_tables.csv_ranges", os.fspath(path), str(mid), delimiter, str(columns)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        first = scan_range(path, start, mid, delimiter, columns)
        if first.stopped or first.to_eof or first.resume_offset is not None:
            if first.resume_offset is not None:  # the split fell inside a quoted field
                first.absorb(scan_range(path, first.resume_offset, None, delimiter, columns), path)
                first.resume_offset = None
            return first
        out, _ = child.communicate()
        if child.returncode != 0:  # the child died (out of memory, killed): do its half here
            first.absorb(scan_range(path, mid, None, delimiter, columns), path)
        else:
            first.absorb(RangeScan.from_json(out.decode()), path)
        return first
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def _worker_main(argv: list[str]) -> int:
    """The child half of :func:`scan_data`: scan from an offset to the end, print JSON."""
    path, start, delimiter, columns = argv[0], int(argv[1]), argv[2], int(argv[3])
    sys.stdout.write(scan_range(path, start, None, delimiter, columns).to_json())
    return 0


if __name__ == "__main__":
    sys.exit(_worker_main(sys.argv[1:]))
