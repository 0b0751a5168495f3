"""Scanning byte ranges of a CSV file for its structure, a megabyte at a time, on up to two processes.

The machinery behind :mod:`.scan` (which reads the header and puts a
file's report together). Why a scan of its own and not :mod:`csv`: the stdlib reader
builds every field as a Python object (``benchmarks/validate.py``: "python csv"), and the libraries that are
faster hold hundreds of MiB or miss ragged rows (``shared/bench/ANCHORS.md``). What the
service cares about is structure: how many records, and whether every record has as
many fields as the header.

A range is read into one reused buffer, a megabyte at a time. A kernel of
:mod:`kernels` counts the plain records at the start of the buffer (and checks their
bytes are UTF-8); the incomplete record at its end is carried into the next read. The
first record that is not plain (a ragged row, a blank line, a NUL byte, an open quote, a
quote that is data) switches the rest of the file to an exact read by
:class:`dialect.Records`, which names the records and lines. Large files are split in
two at a verified record boundary and the second half is scanned by a child process
(``python -m airflow_tables.validation.ranges``); if the split still falls inside a quoted
field, the child's answer is thrown away and the scan goes on alone, so the result never
depends on the split.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field

from airflow_tables.validation import dialect, kernels, rules, segments, types
from airflow_tables.validation.kernels import line_breaks
from airflow_tables.validation.rules import Problem

CHUNK_BYTES = 1024 * 1024
#: A record longer than this is almost certainly an unclosed quote; stop rather than grow.
MAX_RECORD_BYTES = 16 * 1024 * 1024
#: How many ragged rows are listed one by one (the total is always counted).
MAX_LISTED = 10


class NotPlain(Exception):
    """A stream holds something only an exact read can describe (a record that is not plain, a
    byte that is not UTF-8, a record too long), and a stream cannot be read again to find its
    line: the caller scans a local copy instead (:func:`scan_stream`)."""


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
    #: Each column's state by :mod:`.types` (UNSEEN, SEEN_LONG, NOT_LONG), when the scan was asked to type them.
    types: list[int] | None = None

    def to_json(self) -> str:
        data = dict(self.__dict__)
        data["problems"] = [{**p.to_dict(), "wording": p.wording, "facts": p.facts} for p in self.problems]
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> RangeScan:
        data = json.loads(text)
        data["problems"] = [Problem.from_dict(p) for p in data["problems"]]
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
                self.problems.append(p.moved(lines=self.lines or 0, records=self.records))
        self.ragged_total += other.ragged_total
        if self.types is not None and other.types is not None:
            self.types = list(map(max, self.types, other.types))
        self.records += other.records
        self.lines = None if self.lines is None or other.lines is None else self.lines + other.lines
        self.end = other.end
        self.stopped = self.stopped or other.stopped
        self.resume_offset = other.resume_offset
        self.to_eof = other.to_eof


def count_breaks(f, start: int, end: int) -> int:
    """Line breaks in ``[start, end)`` of an open binary file, reading it a block at a time."""
    f.seek(start)
    total = 0
    left = end - start
    prev_cr = False
    chunk = bytearray(min(CHUNK_BYTES, max(left, 0)))  # read into again and again: no new memory to touch
    view = memoryview(chunk)
    while left > 0:
        got = f.readinto(view[: min(CHUNK_BYTES, left)])
        if not got:
            break
        left -= got
        total += line_breaks(chunk, 0, got)
        if prev_cr and chunk[0] == 10:
            total -= 1  # a CRLF split between two reads was counted twice
        prev_cr = chunk[got - 1] == 13
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


class RangeReader:
    """Scans a byte range with a fast-path kernel, falling back to an exact read at the first record that is not plain.

    Anything not plain (a ragged row, a blank line, a NUL byte, a quote in the middle of
    a field, a quote left open) makes the rest be read exactly, by
    :class:`dialect.Records`, which is what names the records and lines. The exact
    read goes on to the end of the file, because a record that is not plain may run on
    past the end of the range. :func:`.segments.scan_segments` fills one too (the plain
    records of a stream scanned on two threads), so the name is not private to this module.
    """

    def __init__(
        self, path: str | os.PathLike | None, start: int, delimiter: str, columns: int, column_types: bool = False
    ) -> None:
        self.path = path  # None for a stream, which cannot be read again
        self.delimiter = delimiter
        self.columns = columns
        self.kernel = kernels.kernel(delimiter, columns)
        self.result = RangeScan(start=start, end=start)
        self.utf8_ok = True
        #: The columns' states (see :mod:`.types`), updated by the kernel in the same pass; None when not asked.
        self.types = bytearray(columns) if column_types else None

    def finish(self) -> RangeScan:
        """The range's findings, with the columns' states when they were asked for."""
        if self.types is not None:
            self.result.types = list(self.types)
        return self.result

    def plain(self, block: memoryview, final: bool) -> kernels.BlockScan:
        """Account for the plain records at the start of ``block`` (which starts at ``result.end``)."""
        found = self.kernel.scan(block, final, self.types)
        if found.utf8_error >= 0:
            self._utf8_problem(bytes(block[: found.utf8_error + 1]), found.utf8_error)
        self.result.records += found.records
        self.result.end += found.consumed
        return found

    def exact_to_end(self, f, offset: int) -> None:
        """Read records exactly from ``offset`` (a record boundary) to the end of the file."""
        res = self.result
        res.to_eof = True
        res.lines = count_breaks(f, res.start, offset)
        records = dialect.Records(self._text_lines(f, offset), self.delimiter, res.lines + 1)
        states = self.types
        for line, fields in records:
            res.records += 1
            if len(fields) != self.columns:
                res.ragged_total += 1
                if len(res.ragged) < MAX_LISTED:
                    res.ragged.append((res.records, line, len(fields)))
            elif states is not None:  # a ragged record is refused, not typed: the service never reads it
                for column, value in enumerate(fields):
                    if states[column] != types.NOT_LONG:
                        states[column] = max(states[column], types.value_kind(value))
        if records.unterminated_line is not None:
            res.problems.append(rules.UNTERMINATED_QUOTE.problem(line=records.unterminated_line, record=res.records))

    def _text_lines(self, f, offset: int) -> Iterator[str]:
        """The file's lines from ``offset``, checking each block's bytes and counting its lines."""
        for block in byte_blocks(f, offset):
            self._check_utf8(block)
            self._check_bytes(block)
            yield from io.StringIO(block.decode("latin-1"), newline="")  # one char per byte
            self.result.lines = (self.result.lines or 0) + line_breaks(block)
            self.result.end = f.tell()

    def _line_at(self, block: bytes, index: int) -> int:
        """The 1-based line (relative to the range) of ``block[index]``."""
        if self.result.lines is not None:  # exact mode keeps count
            return self.result.lines + 1 + line_breaks(block[:index])
        if self.path is None:
            raise NotPlain("the line of a problem needs a second read")
        with open(self.path, "rb") as f:
            before = count_breaks(f, self.result.start, self.result.end)
        return before + 1 + line_breaks(block[:index])

    def _check_bytes(self, block: bytes) -> None:
        """Report the first byte each byte rule stops on (only the first of a kind, in the whole range)."""
        reported = {p.code for p in self.result.problems}
        self.result.problems += rules.byte_problems(block, lambda at: self._line_at(block, at), reported)

    def _check_utf8(self, block: bytes) -> None:
        if self.utf8_ok and (at := kernels.first_non_utf8(block)) >= 0:
            self._utf8_problem(block, at)

    def _utf8_problem(self, block: bytes, at: int) -> None:
        """Note that ``block[at]`` starts the first sequence that is not UTF-8 (only the first is reported)."""
        if self.utf8_ok:
            self.utf8_ok = False
            self.result.problems.append(rules.NOT_UTF8.problem(line=self._line_at(block, at), byte=block[at]))

    def too_long(self) -> None:
        self.result.stopped = True
        self.result.problems.append(
            rules.RECORD_TOO_LONG.problem(line=self._line_at(b"", 0), mib=MAX_RECORD_BYTES // 1024**2)
        )


class _Buffer:
    """One reused buffer that a range is read into, a chunk at a time, behind the carried rest of the last one.

    Reusing it (``readinto``) instead of reading new ``bytes`` saves an allocation and
    its page faults per megabyte, a large share of the native scan's time (measured in ``benchmarks/validate.py``).
    """

    def __init__(self, f) -> None:
        self.f = f
        self.data = bytearray(2 * CHUNK_BYTES)
        self.view = memoryview(self.data)
        self.size = 0  # bytes held: the carried rest, then what was read

    def read(self, want: int) -> int:
        """Read up to ``want`` more bytes after the held ones; return how many came."""
        if self.size + want > len(self.data):  # a record longer than a chunk is being carried
            self.view.release()
            self.data = self.data[: self.size] + bytearray(want + CHUNK_BYTES)
            self.view = memoryview(self.data)
        got = self.f.readinto(self.view[self.size : self.size + want]) if want > 0 else 0
        self.size += got
        return got

    def keep_from(self, offset: int) -> None:
        """Carry the bytes from ``offset`` on to the buffer's start."""
        rest = self.size - offset
        if rest:
            self.data[:rest] = bytes(self.view[offset : self.size])  # a copy: the two may overlap
        self.size = rest


def scan_range(
    path: str | os.PathLike,
    start: int,
    stop: int | None,
    delimiter: str,
    columns: int,
    column_types: bool = False,
    plain_only: bool = False,
) -> RangeScan:
    """Scan ``path`` from ``start`` (a record boundary) to ``stop`` (or the end).

    With a ``stop``, the range must end on a record boundary; when it does not (the
    split fell inside a quoted field), the result covers up to the last boundary and
    ``resume_offset`` says where to go on from. When a record is not plain the scan goes
    on exactly to the end of the file and ``to_eof`` is set. ``column_types``: also
    keep each column's state by :mod:`.types` (``RangeScan.types``), in the same pass.
    ``plain_only``: raise :class:`NotPlain` at a record that is not plain instead of reading on
    exactly (a caller that reads such files another way: :mod:`.bad_rows`).
    """
    reader = RangeReader(path, start, delimiter, columns, column_types)
    with open(path, "rb", buffering=0) as f:
        f.seek(start)
        if not _read_plain(reader, f, start, stop):
            if plain_only:
                raise NotPlain("a record that is not plain")
            reader.exact_to_end(f, reader.result.end)
    return reader.finish()


def scan_stream(
    f, start: int, delimiter: str, columns: int, column_types: bool = False, size: int | None = None
) -> RangeScan:
    """Scan a binary stream positioned at ``start`` (a record boundary) to its end, reading it once.

    Only plain records can be scanned this way; anything else raises :class:`NotPlain`.
    ``size``, the stream's expected length, lets a large one be scanned on two threads
    (:mod:`.segments`); what is found is the same.
    """
    reader = RangeReader(None, start, delimiter, columns, column_types)
    if size is not None and segments.worth_splitting(reader.kernel, size - start):
        f = segments.scan_segments(f, reader)
        if f is None:
            return reader.finish()
    if not _read_plain(reader, f, reader.result.end, None):
        raise NotPlain("a record that is not plain")
    return reader.finish()


def _read_plain(reader: RangeReader, f, start: int, stop: int | None) -> bool:
    """Count the plain records of ``f`` from ``start`` to ``stop`` (or its end); False at one that is not plain.

    ``f`` is read forward only, a chunk at a time into one reused buffer; the record cut
    off at a chunk's end is carried into the next.
    """
    buf = _Buffer(f)
    pos = start  # the file offset after the held bytes
    while True:
        got = buf.read(CHUNK_BYTES if stop is None else min(CHUNK_BYTES, stop - pos))
        pos += got
        at_eof = stop is None and got == 0
        found = reader.plain(buf.view[: buf.size], final=at_eof)
        if found.stopped:
            return False
        buf.keep_from(found.consumed)
        if at_eof:
            return True
        if stop is not None and (pos >= stop or got == 0):  # the end of the range
            if buf.size:
                reader.result.resume_offset = reader.result.end  # it ends inside a record
            return True
        if buf.size > MAX_RECORD_BYTES:
            reader.too_long()
            return True


def split_point(
    path: str | os.PathLike,
    start: int,
    size: int,
    delimiter: str,
    columns: int,
    plain_records: int | None = None,
) -> int | None:
    """A record boundary near the middle of ``[start, size)`` to split the scan at, or None.

    Tries the line starts after the middle until the next 256 KiB read from there are
    plain (or, with ``plain_records``, the next that many lines: a file with bad rows has some in
    every 256 KiB), so the split rarely falls inside a quoted field; when it still does,
    :func:`scan_data` (and :mod:`.sort_halves`) notice and carry on alone.
    """
    middle = start + (size - start) // 2
    with open(path, "rb") as f:
        f.seek(middle)
        window = f.read(CHUNK_BYTES)
    pos = window.find(b"\n") + 1
    for _ in range(64):
        if pos <= 0:
            return None
        end = pos + 256 * 1024
        if plain_records is not None:  # the next that many lines
            end = pos
            for _ in range(plain_records):
                end = window.find(b"\n", end) + 1
                if end <= 0:
                    return None
        probe = kernels.kernel(delimiter, columns)
        found = probe.scan(memoryview(window)[pos:end], final=False)
        if found.records and not found.stopped:
            return middle + pos
        pos = window.find(b"\n", pos) + 1
    return None


def scan_data(
    path: str | os.PathLike,
    start: int,
    size: int,
    delimiter: str,
    columns: int,
    column_types: bool = False,
    plain_only: bool = False,
) -> RangeScan:
    """Scan the records after the header, on two processes when the file is large.

    ``plain_only``: raise :class:`NotPlain` at the first record that is not plain (see :func:`scan_range`).
    """
    mid = None
    if size - start >= kernels.kernel(delimiter, columns).parallel_min_bytes and (os.cpu_count() or 1) > 1:
        mid = split_point(path, start, size, delimiter, columns)
    if mid is None:
        return scan_range(path, start, None, delimiter, columns, column_types, plain_only)
    import subprocess  # only large files pay for it

    child = subprocess.Popen(
        [
            *(sys.executable, "-m", "airflow_tables.validation.ranges", os.fspath(path)),
            *(str(mid), delimiter, str(columns), str(int(column_types)), str(int(plain_only))),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        first = scan_range(path, start, mid, delimiter, columns, column_types, plain_only)
        if first.stopped or first.to_eof or first.resume_offset is not None:
            if first.resume_offset is not None:  # the split fell inside a quoted field
                rest = scan_range(path, first.resume_offset, None, delimiter, columns, column_types, plain_only)
                first.absorb(rest, path)
                first.resume_offset = None
            return first
        out, _ = child.communicate()
        if child.returncode == _NOT_PLAIN:
            raise NotPlain("a record that is not plain")
        if child.returncode != 0:  # the child died (out of memory, killed): do its half here
            first.absorb(scan_range(path, mid, None, delimiter, columns, column_types, plain_only), path)
        else:
            first.absorb(RangeScan.from_json(out.decode()), path)
        return first
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


#: The child's exit status when it was asked for plain records only and found one that is not.
_NOT_PLAIN = 3


def _worker_main(argv: list[str]) -> int:
    """The child half of :func:`scan_data`: scan from an offset to the end, print JSON."""
    path, start, delimiter, columns, column_types = argv[0], int(argv[1]), argv[2], int(argv[3]), argv[4] == "1"
    plain_only = len(argv) > 5 and argv[5] == "1"
    try:
        sys.stdout.write(scan_range(path, start, None, delimiter, columns, column_types, plain_only).to_json())
    except NotPlain:
        return _NOT_PLAIN
    return 0


if __name__ == "__main__":
    sys.exit(_worker_main(sys.argv[1:]))
