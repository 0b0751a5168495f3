"""Check a CSV file against the Data Tables Service's rules before it is uploaded.

Every import costs a credit, so the question "will the service take this file, and
how will it read it?" is answered here, locally, in one streaming pass. The rules
themselves live in :mod:`airflow_tables.csv_rules`; the emulator reads files through
the same rules, so what this says is what the emulator does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from airflow_tables import csv_rules
from airflow_tables.csv_rules import Problem
from airflow_tables.csv_scan import scan_file
from airflow_tables.exceptions import CsvValidationError

__all__ = ["CsvReport", "CsvValidationError", "Problem", "validate_csv"]


@dataclass
class CsvReport:
    """How the service will read a file, and everything that stops it from doing so."""

    path: str
    size_bytes: int
    delimiter: str
    columns: list[str]
    rows: int
    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    encoding: str = "utf-8"
    line_terminator: str = "\n"
    headings: list[str] = field(default_factory=list)
    #: The error that ended the reading before the end of the file: ``rows`` counts only what came before it.
    stopped: Problem | None = None

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def read(self) -> bool:
        """False when the file could not be opened at all (missing, a directory, no permission)."""
        return self.stopped is None or self.stopped.code != csv_rules.UNREADABLE

    def raise_for_errors(self) -> None:
        """Raise :class:`CsvValidationError` listing every problem, if there is any."""
        if self.errors:
            raise CsvValidationError(self.path, self.errors)

    def to_dict(self) -> dict:
        """A JSON-able form, for ``--json`` and XCom."""
        return {
            "path": self.path,
            "ok": self.ok,
            "size_bytes": self.size_bytes,
            "delimiter": self.delimiter,
            "encoding": self.encoding,
            "line_terminator": self.line_terminator,
            "columns": self.columns,
            "rows": self.rows,
            "stopped": None if self.stopped is None else self.stopped.to_dict(),
            "errors": [p.to_dict() for p in self.errors],
            "warnings": [p.to_dict() for p in self.warnings],
        }

    def counts(self) -> str:
        """What was counted (``12 columns, 10,000 rows``), or that counting stopped, where and why."""
        if not self.read:
            return "not read"
        columns = _count(len(self.columns), "column")
        if self.stopped is None:
            return f"{columns}, {_count(self.rows, 'row')}"
        where = f" at line {self.stopped.line:,}" if self.stopped.line is not None else ""
        why = f"reading stopped{where} ({self.stopped.code})"
        if self.rows:
            return f"{columns}, at least {_count(self.rows, 'row')}: {why}"
        if not self.columns:
            return f"columns and rows not counted: {why}"
        return f"{columns}, rows not counted: {why}"

    def describe(self) -> str:
        """How the service will read the file: ``12 columns, 10,000 rows, comma-separated, utf-8, 1,234 bytes``."""
        if not self.read:
            return self.counts()
        parts = [self.counts()]
        if self.columns:  # a file with no heading has no separator or encoding worth naming
            parts += [f"{csv_rules.DELIMITER_NAMES.get(self.delimiter, repr(self.delimiter))}-separated", self.encoding]
        return ", ".join([*parts, f"{self.size_bytes:,} bytes"])

    def summary(self) -> str:
        """One line for a task log: ``validated data.csv: 12 columns, 10,000 rows, comma-separated, ...: ok``."""
        state = "ok" if self.ok else _count(len(self.errors), "problem")
        return f"validated {os.path.basename(self.path)}: {self.describe()}: {state}"


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def validate_csv(
    path: str | os.PathLike,
    *,
    max_columns: int = csv_rules.MAX_COLUMNS,
    max_bytes: int = csv_rules.MAX_BYTES,
) -> CsvReport:
    """Read ``path`` once, streaming, in bounded memory, and report what the service will make of it.

    Never raises for a bad file: every problem is in ``errors`` (call
    :meth:`CsvReport.raise_for_errors` to fail). A path that is missing, a
    directory or unreadable is reported the same way, naming the path.
    """
    path = os.fspath(path)
    limits = csv_rules.Limits(max_columns=max_columns, max_bytes=max_bytes)
    try:
        scan = scan_file(path, limits)
    except OSError as err:
        reason = err.strerror or err.__class__.__name__
        if os.path.isdir(path):
            reason = "it is a directory, not a file"
        problem = csv_rules.unreadable_problem(path, reason)
        return CsvReport(path=path, size_bytes=0, delimiter=",", columns=[], rows=0, errors=[problem], stopped=problem)
    return CsvReport(
        path=scan.path,
        size_bytes=scan.size_bytes,
        delimiter=scan.delimiter,
        columns=scan.columns,
        rows=scan.rows,
        errors=scan.errors,
        warnings=scan.warnings,
        encoding=scan.encoding,
        line_terminator=scan.line_terminator,
        headings=scan.headings,
        stopped=scan.stopped,
    )
