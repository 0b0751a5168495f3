"""What proves that a table the service made holds the file an import sent: one rule, no I/O.

When an import's answer is lost, the service may or may not have made the table, and a
retry must neither pay twice nor claim another importer's table. A table read after the
import was sent is taken as its own only when it holds what the file holds: the rows, and
the columns by name and type, as validation counted them (:class:`FileFacts`). A sibling
export of the same size (another region's ``orders.csv``, with the same rows and column
count but other headings or other kinds of values) is then told apart, where a comparison
of counts took it for ours. The hook's ``import_csv`` in a ``@task`` and both operators
judge by :func:`unlike`, so the rule cannot differ between them.

The name the service gives an upload is also decided here (:func:`stored_names`): the
service names a table after the file part's name without ``.csv`` (the seed's 4.4), but the
interface does not show what it does with a ``"`` or a ``\\`` that the part's header escapes
(``%22``, ``\\\\``), so every spelling a service could store is evidence, and only those.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from airflow_tables.model import TableDetail

#: The suffix the service takes off a file part's name to name the table.
SUFFIX = ".csv"


@dataclass(frozen=True)
class FileFacts:
    """What validation found in a file that the table made of it must show once read.

    :param rows: the data rows.
    :param columns: the column names, as the service will name them.
    :param types: each column's ``DataType`` by the service's rule (``long`` or ``string``);
        ``None`` when validation did not type them (then only names and rows are compared).
    """

    rows: int
    columns: tuple[str, ...]
    types: tuple[str, ...] | None = None

    @classmethod
    def of(cls, report: Any) -> FileFacts | None:
        """The facts of a validation report (``CsvReport``); ``None`` for a file validation refused."""
        if report is None or not report.ok or report.column_count != len(report.columns):
            return None
        types = tuple(report.column_types) if report.column_types is not None else None
        return cls(int(report.rows), tuple(report.columns), types)

    def to_json(self) -> dict[str, Any]:
        types = None if self.types is None else list(self.types)
        return {"rows": self.rows, "columns": list(self.columns), "types": types}

    @classmethod
    def from_json(cls, value: object) -> FileFacts | None:
        """The facts a note kept; ``None`` for anything else (then the file is counted again)."""
        if not isinstance(value, dict):
            return None
        rows, columns, types = value.get("rows"), value.get("columns"), value.get("types")
        if (
            isinstance(rows, bool)
            or not isinstance(rows, int)
            or not isinstance(columns, list)
            or not _strings(columns)
        ):
            return None
        if types is not None and (not _strings(types) or len(types) != len(columns)):
            return None
        assert isinstance(columns, list)  # _strings made sure
        return cls(rows, tuple(columns), None if types is None else tuple(types))


def _strings(value: object) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def part_name(upload: str) -> str:
    """The name as the file part's ``Content-Disposition`` carries it: escaped as browsers escape it.

    No quote or line break can end the header: ``\\`` is doubled, ``"`` becomes ``%22``, CR and LF
    ``%0D`` and ``%0A``. The multipart body (:mod:`airflow_tables.hooks._multipart`) sends this.
    """
    return upload.replace("\\", "\\\\").replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")


def stored_names(upload: str) -> frozenset[str]:
    """Every name the service may give a table made from a file part called ``upload``.

    The part carries the name escaped (:func:`part_name`). A service may keep the escaped form
    or undo it; the interface shows neither, so both are this upload's name (``say "hi"`` and
    ``say %22hi%22``, ``back\\slash`` and ``back\\\\slash``). A server that reads the name as a
    Windows path keeps only what follows its last backslash (``slash``: the emulator's multipart
    parser does, as servers do for the full paths old browsers sent), so that is one too; no
    other spelling is.
    """
    quotes_only = upload.replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")
    spellings = {upload, part_name(upload), quotes_only, upload.rsplit("\\", 1)[-1]}
    return frozenset(_stem(name) for name in spellings)


def _stem(name: str) -> str:
    return name[: -len(SUFFIX)] if name.lower().endswith(SUFFIX) else name


def unlike(table: TableDetail, facts: FileFacts | None) -> str | None:
    """Why a table read well is not shown to hold the file of ``facts``; ``None`` when it is.

    Rows, then the number of columns, their names in order, and their types where validation
    typed them: a same-shape sibling differs in a heading or a column's kind of values.
    """
    if facts is None:
        return "the file's rows and columns could not be counted to compare"
    if table.rows != facts.rows:
        return f"it has {table.rows} rows, the file {facts.rows}"
    names = tuple(column.name or "" for column in table.columns)
    if len(names) != len(facts.columns):
        return f"it has {len(names)} columns, the file {len(facts.columns)}"
    differ = _first_difference(names, facts.columns)
    if differ is not None:
        return f"its column {differ + 1} is named {names[differ]!r}, the file's {facts.columns[differ]!r}"
    if facts.types is not None:
        types = tuple(column.data_type or "" for column in table.columns)
        differ = _first_difference(types, facts.types)
        if differ is not None:
            return f"its column {names[differ]!r} holds {types[differ]} values, the file's {facts.types[differ]} values"
    return None


def _first_difference(ours: Sequence[str], theirs: Sequence[str]) -> int | None:
    return next((i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b), None)


__all__ = ["FileFacts", "part_name", "stored_names", "unlike"]
