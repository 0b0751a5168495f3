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

    @property
    def ok(self) -> bool:
        return not self.errors

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
            "errors": [p.to_dict() for p in self.errors],
            "warnings": [p.to_dict() for p in self.warnings],
        }

    def summary(self) -> str:
        """One line for a task log: ``validated data.csv: 12 columns, 10,000 rows, comma-separated``."""
        name = csv_rules.DELIMITER_NAMES.get(self.delimiter, repr(self.delimiter))
        state = "ok" if self.ok else f"{len(self.errors)} problem(s)"
        return (
            f"validated {os.path.basename(self.path)}: {len(self.columns)} columns, {self.rows:,} rows, "
            f"{name}-separated, {self.encoding}, {self.size_bytes:,} bytes: {state}"
        )


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
        return CsvReport(
            path=path,
            size_bytes=0,
            delimiter=",",
            columns=[],
            rows=0,
            errors=[csv_rules.unreadable_problem(path, reason)],
        )
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
    )
