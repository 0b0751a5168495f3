"""Many part files as one CSV (``combine=``): headers matched, the header written once, errors named by part and line.

The service still receives one CSV (one upload, one credit). Before it is sent:

* every part is read as any file is (decompressed, converted from Parquet or JSON Lines, from
  its declared encoding) into a local UTF-8 file;
* the parts' headers must name the same columns as the first part's, read with its separator:
  in the same order (``combine=True``), or in any order (``combine="by_name"``, each part's
  fields then put in the first part's order); the first part that differs is refused, naming
  both headers (a part in another separator reads as one column, and is refused so);
* the parts' bytes together must fit the service's limit (512 MB), checked before the combined
  file is written;
* the combined file is validated once, and an error is said of the part it is in, at that part's
  own line (:class:`~airflow_tables.exceptions.CsvValidationError` with the part's name).

The combined file is the first part's header and every part's data rows, in the parts' order:
a part in the first part's column order is taken as its bytes, as they are; one in another
order (``"by_name"``) is read and written again by Python's ``csv`` module, the slower way. The
parts' ranges are read in order as one stream (:class:`~airflow_tables.sources.spliced.SplicedReader`)
and written to the combined file in one pass that the validator scans as it goes
(:func:`~airflow_tables.validation.report.scanned_copy`, as an object's copy is): a copy made
first and scanned after read the bytes twice (``benchmarks/combine.py``: 1.44x one file's import,
for 1,000 parts of 512 KiB). Its fingerprint (``skip_if_unchanged``) is that of these bytes: it
covers every part, in order.
"""

from __future__ import annotations

import bisect
import contextlib
import csv
import dataclasses
import io
import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_tables.exceptions import CsvValidationError
from airflow_tables.validation import rules

if TYPE_CHECKING:
    from airflow_tables.sources.spliced import Piece

#: The most of a part read to find its header's end (a longer header: the part holds no data row).
HEADER_MAX = 1024 * 1024
#: Bytes read at a time when the combined file's lines are counted (to name a problem's part).
READ_BLOCK = 1024 * 1024
#: Bytes read at a time to find a part's header (a 512 KiB part was read whole for it).
HEAD_BLOCK = 16 * 1024
UTF8_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class _Placed:
    """Where a part's data rows are in the combined file: the offset of its first data row, and that row's own line."""

    label: str
    first_byte: int  # the combined file's offset of the part's first data row (0 for the first part: all of it)
    own_first_line: int  # the part's own line of that row (after its header's lines)


@contextlib.contextmanager
def combined(parts: Sequence[Any], name: str, label: str, *, by_name: bool = False) -> Iterator[Any]:
    """One local CSV named ``name`` of ``parts`` (Sources), for the time of the block; refused as the module says.

    ``label`` names the whole in messages (``3 parts (s3://.../day/)``).
    """
    from airflow_tables.sources import staged
    from airflow_tables.sources.spliced import piece_size, pieces_source
    from airflow_tables.validation.report import scanned_copy, validate_source

    with contextlib.ExitStack() as stack:
        copies = [stack.enter_context(staged(part, max_bytes=rules.MAX_BYTES)) for part in parts]
        first = validate_source(copies[0])  # its separator and header; its own errors named as its own
        if not first.ok:
            raise CsvValidationError(parts[0].label, first.errors)
        total = sum(copy.stored_size for copy in copies)
        if total > rules.MAX_BYTES or not all(copy.complete for copy in copies):
            raise CsvValidationError(label, [rules.too_large_problem(total, rules.Limits(), at_least=True)])
        want = _header(copies[0].local_path, first.delimiter)[0]
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="airflow-tables-combined-"))
        pieces: list[Piece] = []
        placed: list[_Placed] = []
        size = 0
        for index, (part, copy) in enumerate(zip(parts, copies, strict=True)):
            got, header_bytes = _header(copy.local_path, first.delimiter)
            order = _order(want, got, part.label, parts[0].label, by_name)
            placed.append(_Placed(part.label, size, 1 if index == 0 else _Lines.of(header_bytes) + 1))
            if order is None:
                more = _data_pieces(copy.local_path, header_bytes, first=index == 0)
            else:
                path = os.path.join(tmp, f"part-{index}.csv")
                with open(path, "wb") as out:
                    _append_rows(copy.local_path, out, first.delimiter, order)
                more = [(path, 0, os.path.getsize(path))]
            pieces.extend(more)
            size += sum(map(piece_size, more))
        # Written once, and scanned as it is written (the validator's two threads on the stream), where
        # writing it and then scanning it read it twice; the scan goes with the copy, so validation
        # asking the same question (the operators' validate) reports from it instead of reading it again.
        source = stack.enter_context(scanned_copy(pieces_source(name, pieces)))
        report = validate_source(source)
        if not report.ok:
            assert source.local_path is not None
            raise _said_of_its_part(report.errors, _first_lines(source.local_path, placed), label)
        yield dataclasses.replace(source, label=label)


def _header(path: str | None, delimiter: str) -> tuple[list[str], bytes]:
    """A part's header fields, read with ``delimiter``, and its bytes (a quoted field may hold a line break)."""
    assert path is not None  # staged: a local file
    with open(path, "rb", buffering=0) as f:
        head = f.read(HEAD_BLOCK)
        while len(head) < HEADER_MAX and _header_end(head) == len(head) and (more := f.read(HEAD_BLOCK)):
            head += more  # the header goes on: a long one, or a quoted name with a line break
    header = head[: _header_end(head)]
    text = header.removeprefix(UTF8_BOM).decode("utf-8", errors="replace")
    return next(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter), []), header


def _order(want: Sequence[str], got: Sequence[str], part: str, first: str, by_name: bool) -> list[int] | None:
    """How a part's fields are put in the first part's order: ``None`` when they are in it already."""
    if list(got) == list(want):
        return None
    if by_name and sorted(got) == sorted(want) and len(set(got)) == len(got):
        return [list(got).index(column) for column in want]
    columns = "the same columns (in any order: combine='by_name')" if by_name else "the same columns in the same order"
    problem = rules.PARTS_HEADER.problem(got=list(got), first=first, want=list(want), columns=columns)
    raise CsvValidationError(part, [problem])


def _first_lines(path: str, placed: Sequence[_Placed]) -> list[tuple[int, _Placed]]:
    """Each part's first line in the combined file, counted (only when a problem must be placed) up to its offset."""
    found, lines, done = [], _Lines(), 0
    with open(path, "rb") as f:
        for part in placed:
            while done < part.first_byte:
                block = f.read(min(READ_BLOCK, part.first_byte - done))
                lines.add(block)
                done += len(block)
            found.append((lines.count + 1, part))
    return found


def _said_of_its_part(problems: Sequence[Any], starts: Sequence[tuple[int, _Placed]], label: str) -> CsvValidationError:
    """The combined file's problems as the part that holds the first one says them, at its own lines."""
    lines = [line for line, _ in starts]

    def part_of(problem: Any) -> tuple[int, _Placed] | None:
        return None if problem.line is None else starts[max(0, bisect.bisect_right(lines, problem.line) - 1)]

    where = part_of(problems[0])
    if where is None:
        return CsvValidationError(label, problems)
    first_line, part = where
    own = [
        dataclasses.replace(p, line=p.line - first_line + part.own_first_line, record=None)
        for p in problems
        if part_of(p) is where
    ]
    return CsvValidationError(part.label, own)


class _Lines:
    """Counts the line breaks (LF, CRLF, CR: one each) of bytes written a block at a time."""

    def __init__(self) -> None:
        self.count = 0
        self._last = b""

    def add(self, data: bytes) -> None:
        if data:
            split_crlf = self._last == b"\r" and data.startswith(b"\n")  # one break, cut between two blocks
            self.count += data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n") - split_crlf
            self._last = data[-1:]

    @staticmethod
    def of(data: bytes) -> int:
        lines = _Lines()
        lines.add(data)
        return lines.count


def _data_pieces(path: str | None, header: bytes, *, first: bool) -> list[Piece]:
    """A part's bytes as they are: all of them for the first part, its data rows (after ``header``) for the others.

    A UTF-8 byte order mark before the first part's header is left out; a part whose last row has
    no line break gets one, so that the next part starts a line.
    """
    assert path is not None
    start = (len(UTF8_BOM) if header.startswith(UTF8_BOM) else 0) if first else len(header)
    size = os.path.getsize(path)
    if size <= start:
        return []
    with open(path, "rb", buffering=0) as f:
        last = os.pread(f.fileno(), 1, size - 1)
    return [(path, start, size - start)] + ([] if last in (b"\n", b"\r") else [b"\n"])


def _append_rows(path: str | None, out: Any, delimiter: str, order: list[int]) -> None:
    """A part's data records read and written again, their fields in the first part's order."""
    assert path is not None
    with open(path, encoding="utf-8-sig", newline="") as f:
        text = io.TextIOWrapper(out, encoding="utf-8", newline="", write_through=True)
        writer = csv.writer(text, delimiter=delimiter, lineterminator="\n")
        reader = csv.reader(f, delimiter=delimiter)
        next(reader, None)  # the header: the first part's is written
        for record in reader:
            row = [record[i] for i in order] if len(record) == len(order) else record
            writer.writerow(row)  # a ragged record is kept as it is, for the validation of the whole to name
        text.detach()  # the combined file stays open for the next part


def _header_end(head: bytes) -> int:
    """The offset just past a CSV's header record in its first bytes (quotes may hold line breaks)."""
    start = len(UTF8_BOM) if head.startswith(UTF8_BOM) else 0
    quoted = False
    for index in range(start, len(head)):
        byte = head[index]
        if byte == 0x22:  # '"': a doubled quote toggles twice
            quoted = not quoted
        elif byte == 0x0A and not quoted:
            return index + 1
        elif byte == 0x0D and not quoted:
            return index + 2 if head[index + 1 : index + 2] == b"\n" else index + 1
    return len(head)  # a header with no line break: the part holds no data row


__all__ = ["combined"]
