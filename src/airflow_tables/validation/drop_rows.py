"""Leave given data rows out of a clean file: the rows a suite's row-wise expectations set aside.

A quarantine first sorts a file's rows by the service's rules (:class:`.bad_rows.RowSorter`);
the good rows' file it writes is clean, every record well-formed. A Great Expectations suite then
names more rows by their position among the data rows (:mod:`airflow_tables.expectations.rows`),
and :func:`drop_rows` copies that file once more without them: header first, then every other
byte as it is, so what is sent is the file minus those records exactly. Each row left out goes
to ``bad`` as a :class:`.bad_rows.BadRow` whose line and byte offset are the *source's* (the
clean file's own, mapped back past the rows cut before it by ``in_source``: ``Sorted.in_source``).

Records are found as the validator finds them: the kernels of :mod:`.kernels` count runs of
plain records at their speed, up to the next row to leave out; :func:`.dialect.record_shape`
measures exactly the records the kernel stops on (a blank line, which is not a row, a quote
it hands back) and the rows left out. The file is read a chunk at a time, so memory stays flat.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from airflow_tables.validation import dialect, kernels
from airflow_tables.validation.bad_rows import SMALL_WINDOW, BadRow, without_break
from airflow_tables.validation.ranges import CHUNK_BYTES

__all__ = ["Dropped", "RowVerdict", "drop_rows"]

#: Up to this many rows before the next one to leave out, the kernel is given no more line breaks
#: than that (found one by one), so it cannot pass it; further away it reads a whole window, which
#: shrinks when it finds more records than that.
FEW = 1024


@dataclass(frozen=True)
class RowVerdict:
    """Why a data row is left out (a row-wise expectation's: :mod:`airflow_tables.expectations.rows`)."""

    code: str  # what the rejects file says the row breaks, e.g. ``expect_column_values_to_be_between``
    message: str  # one line: the value(s), the column(s), the expectation with its arguments
    column: str | None  # the column to blame; None when there are several


@dataclass(frozen=True)
class Dropped:
    """What :func:`drop_rows` did: the rows it left out (each given to ``bad``) and the bytes it wrote."""

    rows: int
    good_bytes: int  # header included


def drop_rows(
    path: str,
    data_offset: int,
    data_line: int,
    delimiter: str,
    columns: int,
    rows: dict[int, RowVerdict],
    *,
    good: BinaryIO,
    bad: Callable[[BadRow], None],
    in_source: Callable[[int, int], tuple[int, int]],
) -> Dropped:
    """Copy the clean file at ``path`` to ``good`` without the data rows ``rows`` names; give each to ``bad``.

    ``data_offset`` and ``data_line`` are where the data records start and that line's number
    (``FileScan``); ``columns`` is the header's number of fields. ``rows`` maps a row's 0-based
    position among the data rows (blank lines are not rows) to why it is left out.
    ``in_source(offset, line)`` maps a place in this file to the source's. Raises
    :class:`ValueError` when a position is past the file's last row, or a quote is never closed
    (the file is not the clean one it must be).
    """
    with open(path, "rb", buffering=0) as f:
        return _Dropper(f, data_offset, data_line, delimiter, columns, good, bad, in_source).run(rows)


class _Dropper:
    """The walk of :func:`drop_rows`: a buffer of the file from a record boundary, and the row at ``pos``."""

    def __init__(
        self,
        f: BinaryIO,
        data_offset: int,
        data_line: int,
        delimiter: str,
        columns: int,
        good: BinaryIO,
        bad: Callable[[BadRow], None],
        in_source: Callable[[int, int], tuple[int, int]],
    ) -> None:
        self.f, self.delimiter, self.columns = f, delimiter, columns
        self.good, self.bad, self.in_source = good, bad, in_source
        self.kernel = kernels.kernel(delimiter, columns)
        self.buf = bytearray()
        self.eof = False
        self.base = data_offset  # the file offset of buf[0]
        self.pos = 0  # where the data row numbered ``row`` (or a blank line before it) starts
        self.row = 0
        self.kept = 0  # where the buffer's bytes not yet written start
        self.line, self.counted = data_line, 0  # the line number of buf[counted]
        self.window = CHUNK_BYTES
        self.written = self.dropped = 0
        self.brk = b"\n"  # what ends a line: LF (and CRLF), or CR in a file that has no LF

    def run(self, rows: dict[int, RowVerdict]) -> Dropped:
        self._copy(0, self.base)
        self.f.seek(self.base)
        self._read()
        self.brk = b"\n" if b"\n" in self.buf or b"\r" not in self.buf else b"\r"
        for target in sorted(rows):
            if target < 0:
                raise ValueError(f"row {target} is not a data row's position (they count from 0)")
            end = self._seek_row(target)
            self._drop(end, rows[target])
        self._write(len(self.buf))
        self._copy(self.base + len(self.buf), None)
        return Dropped(self.dropped, self.written)

    def _seek_row(self, target: int) -> int:
        """Walk to the data row ``target``, whole in the buffer at ``pos``; return where it ends."""
        while True:
            need = target - self.row
            if need:
                limit = self._limit(need)
                scan = self.kernel.scan(memoryview(self.buf)[self.pos : limit], self.eof and limit == len(self.buf))
                if 0 < scan.records <= need:  # plain records, none of them the target: passed at the kernel's speed
                    self.pos += scan.consumed
                    self.row += scan.records
                    self.window = min(CHUNK_BYTES, self.window * 2)
                    continue
                if scan.records > need > FEW:
                    self.window = max(SMALL_WINDOW, self.window // 8)  # the target is in the window: come closer
                    continue
                self.window = SMALL_WINDOW  # what stops it comes in clusters (blank lines): look closer a while
            end = self._measure()  # the record at pos, exactly
            if end is None:
                self._read_or_fail(target)
            elif end < 0:
                self.pos = -end  # a blank line: not a row
            elif self.row == target:
                return end
            else:
                self.pos = end
                self.row += 1

    def _limit(self, need: int) -> int:
        """Where the kernel may read to: a window, past at most ``need`` line breaks when the target is near."""
        buf, brk, end = self.buf, self.brk, min(len(self.buf), self.pos + self.window)
        if need > FEW:  # far from the target: the whole window, unless the kernel finds more records than that
            return end
        at = self.pos
        for _ in range(need):
            at = buf.find(brk, at, end) + 1
            if not at:
                return end
        return at

    def _measure(self) -> int | None:
        """Where the record at ``pos`` ends; minus that for a blank line; None when the buffer holds no whole record."""
        if self.pos == len(self.buf) and not self.eof:
            return None
        shape = dialect.record_shape(self.buf, self.pos, self.delimiter, self.columns, self.eof)
        if shape.end == -1 or shape.end == self.pos:
            return None
        blank = not self.buf[self.pos : shape.end].strip(b"\r\n")
        return -shape.end if blank else shape.end

    def _drop(self, end: int, verdict: RowVerdict) -> None:
        """Leave out the row at ``pos`` (ending at ``end``): write the bytes before it, give it to ``bad``."""
        self._write(self.pos)
        self._count_lines(self.pos)
        offset, line = self.in_source(self.base + self.pos, self.line)
        record = without_break(bytes(self.buf[self.pos : end]))
        self.bad(BadRow(line, offset, verdict.code, verdict.message, verdict.column, record))
        self.pos = self.kept = end
        self.row += 1
        self.dropped += 1

    def _read_or_fail(self, target: int) -> None:
        """Read on; or say why the file ended before the row ``target``."""
        if not self.eof:
            self._read()
        elif self.pos == len(self.buf):
            raise ValueError(f"row {target:,} is past the file's last data row (it has {self.row:,})")
        else:
            raise ValueError(f"a quote opened on line {self._count_lines(self.pos):,} is never closed")

    def _read(self) -> None:
        """Let the bytes before ``pos`` go (written, lines counted), then read the next chunk after the rest."""
        self._write(self.pos)
        self._count_lines(self.pos)
        del self.buf[: self.pos]
        self.base += self.pos
        self.pos = self.kept = self.counted = 0
        more = self.f.read(CHUNK_BYTES)
        self.eof = not more
        self.buf += more

    def _write(self, end: int) -> None:
        """Write the kept bytes ``[kept, end)`` of the buffer."""
        if end > self.kept:
            self.good.write(memoryview(self.buf)[self.kept : end])
            self.written += end - self.kept
            self.kept = end

    def _count_lines(self, pos: int) -> int:
        """The line number of ``buf[pos]`` (counted on from the last one asked for)."""
        buf, start = self.buf, self.counted
        self.line += buf.count(b"\n", start, pos)
        if cr := buf.count(b"\r", start, pos):  # lone CRs break lines too; those of CRLFs were counted
            self.line += cr - buf.count(b"\r\n", start, pos)
        self.counted = pos
        return self.line

    def _copy(self, start: int, end: int | None) -> None:
        """Copy the file's bytes ``[start, end)`` (to its end: None) to ``good`` as they are, a chunk at a time."""
        self.f.seek(start)
        left = -1 if end is None else end - start
        while left:
            data = self.f.read(CHUNK_BYTES if left < 0 else min(left, CHUNK_BYTES))
            if not data:
                break
            self.good.write(data)
            self.written += len(data)
            left -= len(data) if left > 0 else 0
