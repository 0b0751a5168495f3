"""Many part files as one CSV (``combine=``): every part validated, headers matched, the header written once.

The service still receives one CSV (one upload, one credit). Before it is written:

* every part is read as any file is (decompressed, converted from Parquet or JSON Lines, from
  its declared encoding) and validated on its own, so an error names the part and the line in
  it (:class:`~airflow_tables.exceptions.CsvValidationError` with the part's name);
* the parts' headers must name the same columns: in the same order (``combine=True``), or in
  any order (``combine="by_name"``, each part's fields then put in the first part's order);
  the first part that differs is refused, naming both headers;
* the parts' data together must fit the service's limit (512 MB), checked before the combined
  file is written.

The combined file is the first part's header and every part's data rows, in the parts' order.
Parts in the first part's separator and column order are appended as bytes, as they are; the
others (another separator, another column order) are read and written again by Python's
``csv`` module, the slower way. Its fingerprint (``skip_if_unchanged``) is that of these bytes:
it covers every part, in order.
"""

from __future__ import annotations

import contextlib
import csv
import os
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

from airflow_tables.exceptions import CsvValidationError
from airflow_tables.validation import rules

#: Bytes copied at a time from a part into the combined file.
COPY_BLOCK = 1024 * 1024
UTF8_BOM = b"\xef\xbb\xbf"


@contextlib.contextmanager
def combined(parts: Sequence[Any], name: str, label: str, *, by_name: bool = False) -> Iterator[Any]:
    """One local CSV named ``name`` of ``parts`` (Sources), for the time of the block; refused as the module says.

    ``label`` names the whole in messages (the pattern or prefix as given, or ``a list of N files``).
    """
    from airflow_tables.sources import Source, staged
    from airflow_tables.sources.storage import local_opener
    from airflow_tables.validation.report import validate_source

    with contextlib.ExitStack() as stack:
        copies, reports = [], []
        for part in parts:
            copy = stack.enter_context(staged(part, max_bytes=rules.MAX_BYTES))
            report = validate_source(copy)
            if not report.ok:
                raise CsvValidationError(part.label, report.errors)
            copies.append(copy)
            reports.append(report)
        first = reports[0]
        orders = [
            _order(first.columns, report.columns, part.label, parts[0].label, by_name)
            for part, report in zip(parts, reports, strict=True)
        ]
        total = sum(report.size_bytes for report in reports)
        if total > rules.MAX_BYTES:
            raise CsvValidationError(label, [rules.too_large_problem(total, rules.Limits())])
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="airflow-tables-combined-"))
        path = os.path.join(tmp, name)
        with open(path, "wb") as out:
            for index, (copy, report, order) in enumerate(zip(copies, reports, orders, strict=True)):
                assert copy.local_path is not None  # staged: a local file
                if order is None and report.delimiter == first.delimiter:
                    _append_bytes(copy.local_path, out, header=index == 0)
                else:
                    _append_rows(copy.local_path, out, report.delimiter, first.delimiter, order, header=index == 0)
        yield Source(label, name, os.path.getsize(path), path, None, local_opener(path))


def _order(want: Sequence[str], got: Sequence[str], part: str, first: str, by_name: bool) -> list[int] | None:
    """How a part's fields are put in the first part's order: ``None`` when they are in it already."""
    if list(got) == list(want):
        return None
    if by_name and sorted(got) == sorted(want) and len(set(got)) == len(got):
        return [list(got).index(column) for column in want]
    columns = "the same columns (in any order: combine='by_name')" if by_name else "the same columns in the same order"
    problem = rules.PARTS_HEADER.problem(got=list(got), first=first, want=list(want), columns=columns)
    raise CsvValidationError(part, [problem])


def _append_bytes(path: str, out: Any, *, header: bool) -> None:
    """A part's bytes as they are: all of them for the first part, its data rows (after its header) for the others."""
    with open(path, "rb") as f:
        head = f.read(COPY_BLOCK)
        if not header:
            head = head[_header_end(head) :]
        elif head.startswith(UTF8_BOM):
            head = head[len(UTF8_BOM) :]
        last = head[-1:]
        out.write(head)
        while block := f.read(COPY_BLOCK):
            out.write(block)
            last = block[-1:]
    if last not in (b"", b"\n", b"\r"):
        out.write(b"\n")  # a part whose last row has no line break: the next part's first row starts a line


def _append_rows(path: str, out: Any, delimiter: str, to: str, order: list[int] | None, *, header: bool) -> None:
    """A part's records read and written again: another separator, or its fields put in the first part's order."""
    import io

    with open(path, encoding="utf-8-sig", newline="") as f:
        writer = csv.writer(
            text := io.TextIOWrapper(out, encoding="utf-8", newline="", write_through=True),
            delimiter=to,
            lineterminator="\n",
        )
        for number, record in enumerate(csv.reader(f, delimiter=delimiter)):
            if number == 0 and not header:
                continue
            writer.writerow(record if order is None else [record[i] for i in order])
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
