"""The scan's fast path: how many well-formed records a block of CSV bytes starts with.

Nearly all of a real file is *plain*: every record has the header's number of fields,
and every field is either unquoted or quoted from its first byte to a closing quote
that stands right before a separator or a line break. Recognising plain records, and
checking that their bytes are UTF-8, is all the fast path does. The first record that is
anything else (a ragged row, a blank line, a quote used as data, a NUL byte, a quote
never closed) is handed back, and :mod:`ranges` reads from there exactly, with
:class:`dialect.Records`, which is what names the problem. So the fast path decides
nothing the rules do not: it only says "nothing to see here" faster.

Two kernels give the same answers (``tests/validation/test_kernels.py`` holds them to it):

* :class:`NativeKernel`, the C extension ``airflow_tables.validation._speedups``: one pass that reads
  64 bytes at a time as bit masks (the technique of simdjson and simdcsv), checking UTF-8
  on the way. ``setup.py`` builds it where a C compiler exists; it is optional.
* :class:`PythonKernel`, bytes operations on a block at a time (``bytes.translate`` keeps
  only separators, line breaks and quotes; quoted parts are dropped; what is left must
  repeat the header's pattern). Slower (measured in ``benchmarks/validate.py``), and it pairs quotes wherever
  they stand, so it also reads the first :data:`VERIFY_BYTES` of every range exactly to
  catch files whose quotes are data.

``AIRFLOW_TABLES_PURE_PYTHON=1`` selects the pure-Python kernel even where the native one
is built.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import NamedTuple, Protocol

from airflow_tables.validation import dialect, rules, types

_speedups: ModuleType | None
try:
    # A compiled module: no stub, so the checker does not know it (see setup.py).
    from airflow_tables.validation import _speedups  # type: ignore[no-redef]
except ImportError:  # not built here (no C compiler at install time): the pure-Python kernel does
    _speedups = None

#: Set to a true value to use the pure-Python kernel even where the native one is built.
PURE_PYTHON_ENV = "AIRFLOW_TABLES_PURE_PYTHON"
#: The pure-Python kernel reads the first bytes of every range exactly as well (see the module doc).
VERIFY_BYTES = 1024 * 1024


class BlockScan(NamedTuple):
    """What a kernel found at the start of a block (which starts on a record boundary)."""

    records: int  # plain records read
    consumed: int  # where they end
    stopped: bool  # the record at ``consumed`` is not plain: read it exactly (else the block ran out)
    utf8_error: int  # offset of the first byte before ``consumed`` that is not UTF-8, or -1


class BlockSort(NamedTuple):
    """What a kernel's :meth:`~Kernel.sort` found: a scan that went on after the bad records it could measure."""

    records: int  # plain records read (the bad ones are not counted)
    consumed: int  # where the records read end
    stopped: bool  # the record at ``consumed`` needs an exact read (else the block ran out)
    utf8_error: int  # as in BlockScan: a plain record before ``consumed`` with a byte that is not UTF-8
    #: (start, end, fields) of each record that is plain but for its fields, a stop byte or a byte
    #: that is not UTF-8: what a quarantine sets aside, measured without an exact read.
    bad: list[tuple[int, int, int]]


class Kernel(Protocol):
    name: str
    #: Files with more data than this are scanned on two processes (see ranges.scan_data).
    parallel_min_bytes: int

    def scan(self, block: memoryview, final: bool, states: bytearray | None = None) -> BlockScan:
        """Read the plain records at the start of ``block``; ``final`` when it ends the file.

        ``states``: one byte per column (see :mod:`.types`), folded with the values of
        the plain records read (only those: a record handed back is typed by the exact read).
        """

    def sort(self, block: memoryview, final: bool, states: bytearray | None = None) -> BlockSort:
        """:meth:`scan`, going on after the records a quarantine sets aside, as far as this kernel can."""

    def line_breaks(self, data: bytes | bytearray, start: int, end: int) -> int:
        """Line breaks in ``data[start:end]``, as :func:`line_breaks` counts them."""


def native_available() -> bool:
    return _speedups is not None


def kernel(delimiter: str, columns: int) -> Kernel:
    """The kernel to scan with: the native one when it is built and not switched off."""
    if _speedups is not None and not os.environ.get(PURE_PYTHON_ENV):
        return NativeKernel(delimiter, columns)
    return PythonKernel(delimiter, columns)


def first_non_utf8(data: bytes) -> int:
    """The offset of the first byte sequence in ``data`` that is not UTF-8, or -1."""
    if data.isascii():
        return -1
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        return err.start
    return -1


def line_breaks(data: bytes | bytearray, start: int = 0, end: int | None = None) -> int:
    """Line breaks in ``data[start:end]``: LF, CRLF and lone CR each count once (one pass where native)."""
    end = len(data) if end is None else end
    if _speedups is not None and not os.environ.get(PURE_PYTHON_ENV):
        return int(_speedups.line_breaks(data, start, end))
    return _line_breaks(data, start, end)


def _line_breaks(data: bytes | bytearray, start: int, end: int) -> int:
    breaks = data.count(b"\n", start, end)
    if data.find(b"\r", start, end) != -1:  # most files have no CR at all: one pass for them
        breaks += data.count(b"\r", start, end) - data.count(b"\r\n", start, end)
    return breaks


class NativeKernel:
    """The C kernel: one pass, UTF-8 included, and exact (no verification needed)."""

    name = "native"
    # Below this the second process costs more to start than it saves (measured in benchmarks/validate.py).
    parallel_min_bytes = 128 * 1024 * 1024

    def __init__(self, delimiter: str, columns: int) -> None:
        if _speedups is None:
            raise RuntimeError("the native kernel is not built here; use native_available() to choose")
        self._native = _speedups
        self.delimiter = delimiter
        self.columns = columns

    def scan(self, block: memoryview, final: bool, states: bytearray | None = None) -> BlockScan:
        records, consumed, stopped, utf8_error = self._native.plain_records(
            block, self.delimiter, self.columns, final, rules.STOP_BYTES, states
        )
        return BlockScan(records, consumed, stopped, utf8_error if 0 <= utf8_error < consumed else -1)

    def sort(self, block: memoryview, final: bool, states: bytearray | None = None) -> BlockSort:
        records, consumed, stopped, bad = self._native.sort_records(
            block, self.delimiter, self.columns, final, rules.STOP_BYTES, states
        )
        return BlockSort(records, consumed, stopped, -1, bad)

    def line_breaks(self, data: bytes | bytearray, start: int, end: int) -> int:
        return int(self._native.line_breaks(data, start, end))


_KEEP = {d: bytes([ord(d), 10, 13, 34]) for d in dialect.DELIMITERS}
_DELETE = {d: bytes(b for b in range(256) if b not in keep) for d, keep in _KEEP.items()}


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


class PythonKernel:
    """The pure-Python kernel: whole blocks at a time, a block either plain or handed back.

    The skeleton comparison pairs quotes wherever they stand; the service opens a quoted
    field only at a field's start. On files that quote by the rules the two agree; on
    files with quotes inside unquoted fields (inch marks, JSON, prose) they usually
    disagree within the first megabyte, which is why that much of every range is also
    read exactly. A range whose quotes first turn out to be data after
    that is the one case where this kernel can be wrong; the native kernel cannot.
    """

    name = "python"
    parallel_min_bytes = 32 * 1024 * 1024

    def __init__(self, delimiter: str, columns: int, verify_bytes: int | None = None) -> None:
        self.delimiter = delimiter
        self.columns = columns
        self.delete = _DELETE[delimiter]
        self.stops = tuple(bytes([b]) for b in rules.STOP_BYTES)
        self.line_pattern = delimiter.encode() * (columns - 1) + b"\n"
        self.verify_bytes = VERIFY_BYTES if verify_bytes is None else verify_bytes
        self.verified = 0

    def scan(self, block: memoryview, final: bool, states: bytearray | None = None) -> BlockScan:
        found = self._scan(block, final)
        if states is not None and found.records and min(states, default=types.NOT_LONG) < types.NOT_LONG:
            self._fold_types(bytes(block[: found.consumed]), states)
        return found

    def sort(self, block: memoryview, final: bool, states: bytearray | None = None) -> BlockSort:
        """:meth:`scan` as it is: every record it stops on is read exactly by the caller."""
        return BlockSort(*self.scan(block, final, states), bad=[])

    def line_breaks(self, data: bytes | bytearray, start: int, end: int) -> int:
        return _line_breaks(data, start, end)

    def _fold_types(self, data: bytes, states: bytearray) -> None:
        """Fold the values of ``data`` (plain records, each of the header's width) into ``states``.

        Column by column, a batch at a time (:func:`types.fold`), and only for the columns
        not yet known to be ``string``. Plain records without a quote split on the separator
        alone; with one, :class:`dialect.Records` reads them (quotes removed, ``""`` read as ``"``).
        """
        text = data.decode("utf-8", errors="replace")
        if '"' in text:
            rows = [fields for _, fields in dialect.parse_records(text, self.delimiter)]
        else:
            lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
            if lines and not lines[-1]:
                lines.pop()  # the last record's line break
            rows = [line.split(self.delimiter) for line in lines]
        rows = [row for row in rows if len(row) == self.columns]  # past the verified bytes, see the class doc
        open_columns = [c for c, state in enumerate(states) if state != types.NOT_LONG]
        for column in open_columns:
            states[column] = types.fold(states[column], [row[column] for row in rows])

    def _scan(self, block: memoryview, final: bool) -> BlockScan:
        data = bytes(block)
        skeleton = _Skeleton(data, self.delete)
        if final:
            if skeleton.parity:
                return BlockScan(0, 0, True, -1)  # a quote is never closed
            outside = skeleton.outside
        else:
            cut = _last_boundary(data, skeleton.parity)
            if cut == -1:
                return BlockScan(0, 0, False, -1)  # no record ends in the block yet
            outside = skeleton.outside
            if cut < len(data):  # the rest starts on a boundary: its skeleton is a suffix of the whole one
                outside = outside[: len(outside) - len(_Skeleton(data[cut:], self.delete).outside)]
            data = data[:cut]
        records = self._plain_records(data, outside, final)
        if records is None:
            return BlockScan(0, 0, True, -1)
        self.verified += len(data)
        return BlockScan(records, len(data), False, first_non_utf8(data))

    def _plain_records(self, data: bytes, outside: bytes, final: bool) -> int | None:
        """How many records ``data`` (whole records, skeleton ``outside``) holds if all are plain, else None."""
        if any(stop in data for stop in self.stops):  # a byte a rule stops on: the exact read names it
            return None
        if b"\r" in outside:
            # In the skeleton a lone CR and the next record's LF can stand side by side like a CRLF.
            crlf = data.count(b"\r\n")
            if crlf == data.count(b"\r"):  # every CR starts a CRLF
                outside = outside.replace(b"\r\n", b"\n")
            elif crlf == 0:  # old Mac files: every CR is a line break of its own
                outside = outside.replace(b"\r", b"\n")
            else:
                return None  # both kinds: the exact read tells them apart
        if final and data and not data.endswith((b"\n", b"\r")):
            outside += b"\n"  # the last record needs no line break
        records = outside.count(b"\n")
        if outside != self.line_pattern * records:
            return None
        if self.columns == 1 and (data[:1] in (b"\n", b"\r") or b"\n\n" in data or b"\n\r" in data or b"\r\r" in data):
            return None  # one column: a blank line looks like a record until read exactly
        if self.verified < self.verify_bytes and not self._agrees_with_exact(data, records):
            return None
        return records

    def _agrees_with_exact(self, data: bytes, records: int) -> bool:
        """True when the rules read ``data`` as ``records`` records of the header's width, every quote closed.

        The quote state is compared too: a quote that is data can pair up in the skeleton with
        one that opens a field (``x",",``), and the widths then agree although that field never ends.
        """
        exact = dialect.parse_records(data.decode("latin-1"), self.delimiter)
        widths = [len(fields) for _, fields in exact]
        return exact.unterminated_line is None and len(widths) == records and all(w == self.columns for w in widths)
