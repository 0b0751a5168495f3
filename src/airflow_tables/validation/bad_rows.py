"""Bad rows: every data row of a file that the service would refuse or misread, found in one pass, each once.

``on_bad_rows="quarantine"`` sends a file's good rows and sets its bad ones aside; ``"fail"``
refuses a file with any. A *bad row* is one data record, with a stable code (its rule in
:mod:`.rules`): ``nul-byte``, ``encoding`` (a byte that is not UTF-8), ``field-count`` (not the
header's number of fields), ``record-too-long`` (over :data:`MAX_ROW_BYTES`), ``not-a-long`` (a
value that breaks a column declared ``long``), and a Great Expectations expectation's name
(:mod:`airflow_tables.expectations`). What ends the reading of the file (an unterminated quote
that swallows the rest of it, a record that never ends) is never a bad row: the file is refused.

How, and why not the validator's scan as it is: the kernels of :mod:`.kernels` count the plain
records, as for validation; the validator then reads *everything after* the first record that is
not plain exactly (to name lines), at Python's speed. Here the kernel goes on after the records a
quarantine sets aside most (:meth:`.kernels.Kernel.sort`: plain but for their number of fields, a
NUL byte or a byte that is not UTF-8; the native kernel measures those itself); any other record it
stops on is measured exactly (:func:`.dialect.record_shape`); each is judged alone by the rules, and
the kernel goes on after it (``benchmarks/bad_rows.py`` measures the cost). A plain run that the
pure-Python kernel passed but that holds a byte that is not UTF-8, or a value that breaks a declared
``long`` column, is judged record by record, in a window that shrinks around such runs and grows
back after them.

The good rows are kept as the file's own ranges (``Sorted.kept``, header first): what is sent is
those bytes as they are, read in order, never a copy. Each bad row goes to ``bad`` as it is found,
so memory grows with their number only by a range and a cut each.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from airflow_tables.validation import dialect, kernels, rules, types
from airflow_tables.validation.ranges import CHUNK_BYTES, MAX_RECORD_BYTES
from airflow_tables.validation.row_policy import BadRowPolicy
from airflow_tables.validation.rules import Problem

__all__ = ["BadRow", "BadRowPolicy", "RowSorter", "Sorted", "declared_columns"]

#: A row longer than this is bad (``record-too-long``); the validator stops at a record this long.
MAX_ROW_BYTES = MAX_RECORD_BYTES
#: A record still open after this many bytes ends the reading: a quote is almost certainly never closed.
MAX_OPEN_RECORD_BYTES = 4 * MAX_RECORD_BYTES
#: The smallest window a run with a bad byte or a bad value is judged in, record by record.
SMALL_WINDOW = 64 * 1024
#: How many bad rows a refusal lists one by one (the rejects file has all of them).
MAX_LISTED = 10


def declared_columns(declared: dict[str, str] | None, columns: list[str]) -> tuple[dict[int, str], Problem | None]:
    """The columns ``column_types`` declares ``long``, by position in ``columns``; or the header's problem with them.

    ``declared`` maps a column name (as the service names it) to ``"long"`` or ``"string"``;
    a ``"string"`` column takes any value, so only the ``long`` ones are checked row by row.
    """
    if not declared:
        return {}, None
    for name in declared:
        if name not in columns:
            shown = ", ".join(repr(c) for c in columns[:20]) + (", ..." if len(columns) > 20 else "")
            return {}, rules.DECLARED_COLUMN_MISSING.problem(line=1, column=name, columns=shown or "none")
    return {columns.index(name): name for name, kind in declared.items() if kind == types.LONG}, None


@dataclass(frozen=True)
class BadRow:
    """One bad row: where it starts, why it is bad, and its raw bytes (without its line break)."""

    line: int
    byte_offset: int
    code: str
    message: str
    column: str | None
    record: bytes

    def problem(self) -> Problem:
        return rules.bad_row_problem(self.code, self.message, self.line)


@dataclass
class Sorted:
    """What :class:`RowSorter` found: the good rows written, the bad rows counted, what ended the reading."""

    good_rows: int = 0
    bad_rows: int = 0
    first_bad: list[BadRow] = field(default_factory=list)
    #: The file-level problem that ended the reading (an unterminated quote, a record that never ends).
    stopped: Problem | None = None
    good_bytes: int = 0  # kept, header included
    #: The ranges of the file (offset, length) that hold the good rows, header first: what is sent.
    kept: list[tuple[int, int]] = field(default_factory=list)
    #: The last bad row when it is the file's last record and has fewer fields than the header: what
    #: a file still being written ends with (the operators retry such a file rather than cut it).
    cut_short: BadRow | None = None
    #: Where each bad row was cut out, in order: (offset in the good rows, its bytes, its line breaks).
    #: What maps a place in the good rows back to the file's own (:meth:`in_source`).
    cuts: list[tuple[int, int, int]] = field(default_factory=list)

    def in_source(self, good_offset: int, good_line: int) -> tuple[int, int]:
        """The byte offset and line in the file of the good rows' byte at ``good_offset`` (on ``good_line``)."""
        offset, line = good_offset, good_line
        for at, size, breaks in self.cuts:
            if at > good_offset:
                break
            offset += size
            line += breaks
        return offset, line

    def absorb(self, later: Sorted) -> None:
        """Add what a sorter of the file's next part found (made without the header: its cuts count from its start)."""
        shift = self.good_bytes
        self.cuts.extend((at + shift, size, breaks) for at, size, breaks in later.cuts)
        kept = later.kept  # each list's ranges are apart already: only where they meet may two be one
        if kept and self.kept and sum(self.kept[-1]) == kept[0][0]:
            self.kept[-1] = (self.kept[-1][0], self.kept[-1][1] + kept[0][1])
            kept = kept[1:]
        self.kept.extend(kept)
        self.first_bad.extend(later.first_bad[: MAX_LISTED - len(self.first_bad)])
        self.good_rows += later.good_rows
        self.bad_rows += later.bad_rows
        self.good_bytes += later.good_bytes
        self.stopped = self.stopped or later.stopped
        self.cut_short = later.cut_short

    @property
    def rows(self) -> int:
        """The data rows read: good and bad."""
        return self.good_rows + self.bad_rows

    def refusal(self) -> Problem:
        """``on_bad_rows="fail"``: the problem listing the first bad rows, with their total."""
        shown = "; ".join(f"line {b.line:,} ({b.code}: {b.message})" for b in self.first_bad)
        tail = f"; and {self.bad_rows - len(self.first_bad):,} more" if self.bad_rows > len(self.first_bad) else ""
        are = "is" if self.bad_rows == 1 else "are"
        first = self.first_bad[0].line if self.first_bad else None
        return rules.BAD_ROWS.problem(line=first, bad=self.bad_rows, rows=self.rows, are=are, shown=shown, tail=tail)


class RowSorter:
    """Sorts the data records of a local UTF-8 file into good (``Sorted.kept``) and bad (given to ``bad``).

    ``start`` and ``line`` are where the records start (after the header) and that line's number;
    ``columns`` the header's number of fields; ``names`` the columns' names (to say which column
    a bad value is in); ``declared_long`` the positions of the columns declared ``long``;
    ``states`` (see :mod:`.types`) are folded with the good rows' values when given, so that the
    good rows are typed as the service will type them.
    """

    def __init__(
        self,
        path: str,
        start: int,
        line: int,
        delimiter: str,
        names: list[str],
        columns: int,
        *,
        bad: Callable[[BadRow], None],
        declared_long: dict[int, str] | None = None,
        states: bytearray | None = None,
        header: bool = True,
    ) -> None:
        self.path, self.start, self.delimiter = path, start, delimiter
        self.names, self.columns = names, columns
        self.bad = bad
        self.declared_long = declared_long or {}
        # Declared columns are checked through the kernel's states: give it some, if nobody asked for them.
        self.states = states if states is not None or not self.declared_long else bytearray(columns)
        self.kernel = kernels.kernel(delimiter, columns)
        self.found = Sorted()
        self.window = CHUNK_BYTES
        self.line = line  # the line number of buf[self.counted]
        self.counted = 0
        self.base = start  # the file offset of buf[0]
        self.exact_first = False  # the record at buf[0] is too long for the kernel: judge it exactly
        self.last_bad: tuple[BadRow, int] | None = None  # the last bad row, if short, and where it ends
        self.field_counts: dict[int, str] = {}  # the field-count message, by the row's number of fields
        self.pending = bytearray()  # the start of a record that a read to a ``stop`` left open
        if header:
            self._keep_range(0, start)

    def run(self, stop: int | None = None) -> Sorted:
        """Read the records on from where the last call left off, to ``stop`` (a record boundary) or the file's end.

        The header (``[0, start)``) is kept first, unless the sorter was made without it (a later part
        of the file). When ``stop`` falls inside a record, :attr:`pending` holds its start, and a call
        without ``stop`` reads on from there.
        """
        # One chunk read into again and again: a new one for each read would be new memory each time
        # (1 MiB is above the allocator's threshold for memory of its own), 2 microseconds a page to
        # touch (a tenth of a 512 MiB file's sorting time, in a process that has not read before).
        chunk = memoryview(bytearray(CHUNK_BYTES))
        with open(self.path, "rb", buffering=0) as f:
            buf, self.pending = self.pending, bytearray()
            f.seek(self.base + len(buf))
            final = False
            while not final:
                want = CHUNK_BYTES if stop is None else min(CHUNK_BYTES, stop - self.base - len(buf))
                if want <= 0:
                    self.pending = buf
                    return self.found
                got = f.readinto(chunk[:want])
                final = not got
                buf += chunk[:got]
                used = self._walk(buf, final)
                self._line_at(buf, used)  # the lines of what is let go are counted before it goes
                del buf[:used]
                self.base += used
                self.counted = 0
                if self.found.stopped is not None:
                    break
                if len(buf) > MAX_OPEN_RECORD_BYTES:
                    self._stop(rules.RECORD_TOO_LONG.problem(line=self.line, mib=MAX_OPEN_RECORD_BYTES // 1024**2))
                    break
                # A record that may end up longer than a row may be is judged exactly once it ends: the
                # kernel would count it as plain whatever its length (the next read adds a chunk at most).
                self.exact_first = len(buf) > MAX_ROW_BYTES - CHUNK_BYTES
        if self.last_bad is not None and self.last_bad[1] == self.base and self.found.stopped is None:
            self.found.cut_short = self.last_bad[0]  # the file's last record, short: what a writer leaves
        return self.found

    def _walk(self, buf: bytearray, final: bool) -> int:
        """Sort the whole records at the start of ``buf``; return where the first one not yet whole starts."""
        view = memoryview(buf)
        pos = kept = 0  # kept: where the good bytes not yet written start
        try:
            if self.exact_first:
                end, kept = self._judge(buf, view, pos, kept, final)
                if end is None:
                    return 0
                pos = end
            while pos < len(buf) and self.found.stopped is None:
                limit = min(len(buf), pos + self.window)
                before = bytes(self.states) if self.states is not None else None
                scan = self.kernel.sort(view[pos:limit], final and limit == len(buf), self.states)
                if scan.utf8_error >= 0 or self._declared_broken():
                    self.window = SMALL_WINDOW  # trouble comes in clusters: look closer for a while
                    self._restore(before)
                    if scan.utf8_error >= 0:  # the plain records before the bad byte's are good as they are
                        head = self.kernel.scan(view[pos : pos + scan.utf8_error], False, self.states)
                        if not self._declared_broken():
                            self.found.good_rows += head.records
                            pos += head.consumed
                            end, kept = self._judge(buf, view, pos, kept, final)  # the bad byte's record
                            if end is None:
                                break
                            pos = end
                            continue
                        self._restore(before)
                    pos, kept = self._judge_each(buf, view, pos, pos + scan.consumed, kept, final)
                    continue
                self.found.good_rows += scan.records
                for start, end, fields in scan.bad:  # measured by the kernel: judged here by the rules
                    kept = self._set_aside(buf, view, pos + start, pos + end, fields, kept)
                pos += scan.consumed
                if self.window < CHUNK_BYTES and scan.consumed:
                    self.window = min(CHUNK_BYTES, self.window * 2)
                if scan.stopped and not scan.consumed and self.kernel.name == "python":
                    # That kernel hands back a whole window with any record that is not plain: read it exactly.
                    self.window = SMALL_WINDOW
                    start = pos
                    pos, kept = self._judge_each(buf, view, pos, limit, kept, final)
                    if pos == start:  # its first record is not whole yet: read on
                        break
                    continue
                if scan.stopped:  # the record at pos is not plain: judge it exactly
                    end, kept = self._judge(buf, view, pos, kept, final)
                    if end is None:
                        break
                    pos = end
                elif limit < len(buf):
                    if not scan.consumed:  # a record longer than the window
                        self.window *= 2
                else:
                    break
            self._keep(kept, pos)
            return pos
        finally:
            view.release()

    def _restore(self, before: bytes | None) -> None:
        """Put the columns' states back as they were before a run that is judged again."""
        if before is not None and self.states is not None:
            self.states[:] = before

    def _declared_broken(self) -> bool:
        states = self.states
        return states is not None and any(states[c] == types.NOT_LONG for c in self.declared_long)

    def _judge_each(
        self, buf: bytearray, view: memoryview, pos: int, end: int, kept: int, final: bool
    ) -> tuple[int, int]:
        """Judge the records of ``[pos, end)`` (whole records) one at a time; return where they end."""
        while pos < end and self.found.stopped is None:
            judged, kept = self._judge(buf, view, pos, kept, final)
            if judged is None:
                break
            pos = judged
        return pos, kept

    def _judge(self, buf: bytearray, view: memoryview, pos: int, kept: int, final: bool) -> tuple[int | None, int]:
        """Judge the one record at ``pos``: return where it ends (None: not whole yet) and where kept bytes start."""
        shape = dialect.record_shape(buf, pos, self.delimiter, self.columns, final)
        if shape.end == -1:
            if final:  # a quote opened in this record runs to the end of the file
                self._stop(rules.UNTERMINATED_QUOTE.problem(line=self._line_at(buf, pos)))
            return None, kept
        if not view[pos : shape.end].tobytes().strip(b"\r\n"):  # a blank line is not a record: kept as it is
            return shape.end, kept
        return shape.end, self._set_aside(buf, view, pos, shape.end, shape.fields, kept)

    def _set_aside(self, buf: bytearray, view: memoryview, pos: int, end: int, fields: int, kept: int) -> int:
        """Judge the record ``[pos, end)`` of ``fields`` fields; set it aside if bad. Return where kept bytes start."""
        record = bytes(view[pos:end])
        why = self._why_bad(record, fields)
        found = self.found
        if why is None:
            found.good_rows += 1
            return kept
        self._keep(kept, pos)
        line = self._line_at(buf, pos)
        spans = self._lines_of(record, end)
        found.cuts.append((found.good_bytes, end - pos, spans))
        code, column, message = why
        row = BadRow(line, self.base + pos, code, message, column, without_break(record))
        found.bad_rows += 1
        if len(found.first_bad) < MAX_LISTED:
            found.first_bad.append(row)
        short = code == rules.ROW_FIELD_COUNT.code and fields < self.columns
        self.last_bad = (row, self.base + end) if short else None
        self.bad(row)
        return end

    def _why_bad(self, record: bytes, fields: int) -> tuple[str, str | None, str] | None:
        """The code of the rule ``record`` breaks, the column it breaks it in, and the message; None for a good row."""
        if (at := record.find(b"\x00")) >= 0:
            return rules.ROW_NUL_BYTE.code, None, rules.ROW_NUL_BYTE.message(at=at + 1)
        if (at := kernels.first_non_utf8(record)) >= 0:
            return rules.ROW_NOT_UTF8.code, None, rules.ROW_NOT_UTF8.message(byte=record[at], at=at + 1)
        if fields != self.columns:
            message = self.field_counts.get(fields)
            if message is None:  # one wording per count: most bad rows of a file share a few
                message = rules.ROW_FIELD_COUNT.message(
                    fields=fields, s="" if fields == 1 else "s", columns=self.columns
                )
                self.field_counts[fields] = message
            return rules.ROW_FIELD_COUNT.code, None, message
        if len(record) > MAX_ROW_BYTES:
            return rules.ROW_TOO_LONG.code, None, rules.ROW_TOO_LONG.message(size=len(record), limit=MAX_ROW_BYTES)
        if self.states is None:
            return None
        values = next(iter(dialect.parse_records(record.decode("utf-8"), self.delimiter)))[1]
        for column, name in self.declared_long.items():
            if types.value_kind(values[column]) == types.NOT_A_LONG:
                return (
                    rules.ROW_NOT_A_LONG.code,
                    name,
                    rules.ROW_NOT_A_LONG.message(value=_shown(values[column]), column=name),
                )
        states = self.states
        for column, value in enumerate(values):  # a good row: its values type the columns
            if states[column] != types.NOT_LONG:
                states[column] = max(states[column], types.value_kind(value))
        return None

    def _keep(self, start: int, end: int) -> None:
        """Keep the good bytes ``[start, end)`` of the buffer."""
        self._keep_range(self.base + start, end - start)

    def _keep_range(self, offset: int, length: int) -> None:
        if length <= 0:
            return
        kept = self.found.kept
        if kept and sum(kept[-1]) == offset:  # the good rows of two reads are one range
            kept[-1] = (kept[-1][0], kept[-1][1] + length)
        else:
            kept.append((offset, length))
        self.found.good_bytes += length

    def _line_at(self, buf: bytearray, pos: int) -> int:
        """The line number of ``buf[pos]`` (counted on from the last one asked for)."""
        self.line += self.kernel.line_breaks(buf, self.counted, pos)
        self.counted = pos
        return self.line

    def _lines_of(self, record: bytes, end: int) -> int:
        """The line breaks of ``record`` (the buffer's bytes up to ``end``), counted from its own bytes.

        The count of lines is then at ``end``: the next :meth:`_line_at` counts on from there.
        """
        spans = self.kernel.line_breaks(record, 0, len(record))
        self.line += spans
        self.counted = end
        return spans

    def _stop(self, problem: Problem) -> None:
        self.found.stopped = problem


def without_break(record: bytes) -> bytes:
    if record.endswith(b"\r\n"):
        return record[:-2]
    return record[:-1] if record.endswith((b"\n", b"\r")) else record


def _shown(value: str, limit: int = 60) -> str:
    return value if len(value) <= limit else value[:limit] + "..."
