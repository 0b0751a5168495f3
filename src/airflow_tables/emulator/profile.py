"""What a file's values say: each column's ``DataType`` and the descriptions the service writes.

The seed says the service writes the table and column descriptions itself when it
reads the file; ours say something true about the data (type, distinct values, a
range, blanks):

* ``DataType`` is decided on the **whole file**, by the rule of
  :mod:`airflow_tables.validation.types` (``long`` when every non-blank value is an
  integer literal that fits in 64 bits and one value is not blank, else ``string``),
  from the very scan that checked the file (``scan_file(..., column_types=True)``), so the
  validator's ``column_types`` and the table's ``DataType`` cannot differ;
* the descriptions are computed from a bounded sample so that reading a 512 MiB file
  costs little more than scanning it: the first :data:`SAMPLE_ROWS` rows, or fewer for a
  wide table (at most :data:`SAMPLE_VALUES` values); they say so when the sample is
  not the whole table;
* distinct values are counted exactly up to :data:`DISTINCT_CAP`, then reported
  as "more than" it, so memory stays bounded however wide the table.

Values arrive a batch of rows at a time and are handled a column at a time with
C-level operations (``map``, ``str.join``, ``set.update``); a per-value Python
loop only runs for columns that hold signed numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from airflow_tables.validation import dialect, rules
from airflow_tables.validation.scan import FileScan, data_records, scan_file
from airflow_tables.validation.types import LONG, SAMPLE_ROWS, SAMPLE_VALUES, STRING, long_range, sample_rows, strip

if TYPE_CHECKING:
    from airflow_tables.emulator.config import Connector

__all__ = ["SAMPLE_ROWS", "SAMPLE_VALUES", "ColumnStats", "TableProfile", "connector_columns", "profile_file"]

BATCH_VALUES = 16_000
DISTINCT_CAP = 1_000
EXAMPLES = 3


@dataclass
class ColumnStats:
    """Running facts about one column's values."""

    name: str
    values: int = 0
    blanks: int = 0
    integer: bool = True
    lo: int | None = None
    hi: int | None = None
    distinct: set[str] | None = field(default_factory=set)  # None once past DISTINCT_CAP
    examples: list[str] = field(default_factory=list)
    longest: int = 0
    #: The column's type on the whole file (from the scan); None: from the values added.
    whole_file_type: str | None = None

    def add(self, values: Sequence[str]) -> None:
        stripped = list(map(strip, values))
        blanks = stripped.count("")
        self.values += len(stripped)
        self.blanks += blanks
        if blanks == len(stripped):
            return
        if self.distinct is not None:
            self.distinct.update(stripped)
            self.distinct.discard("")
            if len(self.distinct) > DISTINCT_CAP:
                self.distinct = None
        if len(self.examples) < EXAMPLES:
            for value in stripped:
                if value and value not in self.examples:
                    self.examples.append(value)
                    if len(self.examples) == EXAMPLES:
                        break
        self.longest = max(self.longest, max(map(len, stripped)))
        if self.integer:
            self._add_integers(stripped)

    def _add_integers(self, stripped: list[str]) -> None:
        found = long_range(stripped)
        if found is None:
            self.integer = False
            return
        lo, hi = found
        self.lo = lo if self.lo is None else min(self.lo, lo)
        self.hi = hi if self.hi is None else max(self.hi, hi)

    @property
    def data_type(self) -> str:
        if self.whole_file_type is not None:
            return self.whole_file_type
        return LONG if self.integer and self.values > self.blanks else STRING

    def describe(self, sampled: int, total: int) -> str:
        """One or two sentences that are true of the sampled values."""
        prefix = f"In the first {sampled:,} of {total:,} rows: " if sampled < total else ""
        if self.values == 0:
            return "No values: the file has a header and no rows."
        if self.values == self.blanks:
            return f"{prefix}Always blank."
        count = f"more than {DISTINCT_CAP:,}" if self.distinct is None else f"{len(self.distinct):,}"
        single = self.distinct is not None and len(self.distinct) == 1
        if self.data_type == "long":
            what = (
                f"Whole number (long), always {self.lo:,}"
                if single
                else f"Whole numbers (long) from {self.lo:,} to {self.hi:,}, {count} distinct values"
            )
        else:
            shown = ", ".join(_quote(v) for v in self.examples)
            what = (
                f"Text, always {shown}"
                if single
                else f"Text, {count} distinct values such as {shown}, up to {self.longest:,} characters"
            )
        return f"{prefix}{what}; {self._blanks()}."

    def _blanks(self) -> str:
        if not self.blanks:
            return "no blanks"
        return f"{self.blanks:,} blank ({self.blanks / self.values:.1%})"


def _quote(value: str, limit: int = 40) -> str:
    return repr(value if len(value) <= limit else value[: limit - 1] + "…")


@dataclass
class TableProfile:
    """What the service shows about a table once its file is read."""

    rows: int
    columns: list[dict]
    description: str


def profile_file(scan: FileScan, file_name: str, limits: rules.Limits = rules.SERVICE_LIMITS) -> TableProfile:
    """Profile an accepted file from its scan: shape and types from the full scan, descriptions from a sample.

    A scan made without ``column_types`` (an older caller) is made again with them: the
    types are always the whole file's.
    """
    types = scan.column_types
    if types is None:
        types = scan_file(scan.path, limits, column_types=True).column_types or [STRING] * len(scan.columns)
    stats = [ColumnStats(name, whole_file_type=kind) for name, kind in zip(scan.columns, types, strict=True)]
    width = len(stats)
    limit = sample_rows(width)
    batch_rows = max(1, BATCH_VALUES // max(width, 1))
    batch: list[list[str]] = []
    sampled = 0

    def flush() -> None:
        if batch:
            for column, values in zip(stats, zip(*batch, strict=True), strict=True):
                column.add(values)
            batch.clear()

    if scan.rows:
        with closing(data_records(scan)) as records:
            for _, fields in records:
                if len(fields) != width:  # an accepted file has none; a damaged one is not profiled wrongly
                    continue
                batch.append(fields)
                sampled += 1
                if len(batch) >= batch_rows:
                    flush()
                if sampled >= limit:
                    break
        flush()
    columns = [
        {"ColumnName": c.name, "ColumnDescription": c.describe(sampled, scan.rows), "DataType": c.data_type}
        for c in stats
    ]
    return TableProfile(scan.rows, columns, _table_description(scan, stats, sampled, file_name))


def _names(names: list[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return f"{shown} and {len(names) - limit} more" if len(names) > limit else shown


def _table_description(scan: FileScan, stats: list[ColumnStats], sampled: int, file_name: str) -> str:
    separator = dialect.DELIMITER_NAMES.get(scan.delimiter, repr(scan.delimiter))
    parts = [
        f"{scan.rows:,} rows and {len(stats)} columns read from {file_name} ({separator}-separated, "
        f"{'UTF-8 with a byte-order mark' if scan.encoding == 'utf-8-sig' else 'UTF-8'})."
    ]
    numbers = [c.name for c in stats if c.data_type == "long"]
    texts = [c.name for c in stats if c.data_type == "string"]
    kinds = []
    if numbers:
        kinds.append(f"{len(numbers)} whole-number column{'s' if len(numbers) != 1 else ''} ({_names(numbers)})")
    if texts:
        kinds.append(f"{len(texts)} text column{'s' if len(texts) != 1 else ''} ({_names(texts)})")
    if kinds and scan.rows:
        parts.append(f"It has {' and '.join(kinds)}.")
    renamed = [w.message for w in scan.warnings if w.code in ("blank-heading", "repeated-heading")]
    if renamed:
        parts.append(f"Headings named by the service: {'; '.join(renamed[:5])}.")
    if not scan.rows:
        parts.append("The file has a header and no rows.")
    elif sampled < scan.rows:
        parts.append(f"Values were profiled from the first {sampled:,} rows.")
    return " ".join(parts)


def connector_columns(connector: Connector) -> list[dict]:
    """Column records of a connector table, from the types its configuration declares."""
    kind = {"long": "whole numbers (long)", "string": "text"}
    return [
        {
            "ColumnName": name,
            "ColumnDescription": f"Synchronised from {connector.source}; holds {kind[dtype]}.",
            "DataType": dtype,
        }
        for name, dtype in connector.columns
    ]
