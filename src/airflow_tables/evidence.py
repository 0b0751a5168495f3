"""What proves that a table the service made holds the file an import sent: one rule, no I/O.

When an import's answer is lost, the service may or may not have made the table, and a
retry must neither pay twice nor claim another importer's table. A table read after the
import was sent is taken as its own only when it holds what the file holds: the rows, and
the columns by name and type, as validation counted them (:class:`FileFacts`). A sibling
export of the same size (another region's ``orders.csv``, with the same rows and column
count but other headings or other kinds of values) is then told apart, where a comparison
of counts took it for ours. The hook's ``import_csv`` in a ``@task`` and both operators
judge by :func:`unlike`, so the rule cannot differ between them.

The name the service gives an upload is also decided here (:func:`upload_name`,
:func:`stored_names`): the service names a table after the file part's name without ``.csv``
(the seed's 4.4), but the interface does not show what it does with a ``"`` or a ``\\`` that
the part's header escapes (``%22``, ``\\\\``), so every spelling a service could store is
evidence, and only those.

And the note an import leaves before it sends (:class:`SentImport`, one schema for the hook and
the operators), and the judge that reads a department against it (:func:`judge`): the table a
lost answer made (proven), none (the file never arrived: send it), or uncertain, with the
reason for each candidate. :mod:`airflow_tables.hooks.send_once` does the looking; this
module only decides, so it is tested without a server.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeGuard
from urllib.parse import unquote

from airflow_tables.model import TableDetail, TableStatus, TableSummary

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


#: Why nothing can be proven of a file whose rows and columns validation could not count.
NOT_COUNTED = "the file's rows and columns could not be counted to compare"


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
        return NOT_COUNTED
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


# -- the name of an upload --------------------------------------------------------------------


def upload_name(file_name: str, table_name: str | None = None) -> str:
    """The name of the file part: ``<table_name>.csv`` when a table name is given, else the file's base name.

    A ``table_name`` that would name the table otherwise than it reads is refused, before
    anything is sent: ``"None"`` (a template that rendered nothing), a name ending in ``.csv``
    (the service takes one ``.csv`` off, so ``orders.csv`` would be the table's name), and a
    ``"`` (the part's header carries it as ``%22``, which people would see).
    """
    if table_name is None:
        return file_name
    if not isinstance(table_name, str) or not table_name.strip() or table_name != table_name.strip():
        raise ValueError(f"table_name {table_name!r} must be a name without surrounding blanks, or None")
    if any(c in table_name for c in "/\\\r\n"):
        raise ValueError(f"table_name {table_name!r} may not hold a slash, a backslash or a line break")
    if table_name == "None":
        raise ValueError(
            "table_name rendered as 'None': its template found nothing (a missing param or XCom); give a name, "
            "or leave table_name out to name the table after the file"
        )
    if table_name.lower().endswith(SUFFIX):
        raise ValueError(
            f"table_name {table_name!r} ends in {SUFFIX}: the table would be named {table_name!r} (the service takes "
            f"off only the {SUFFIX} the file part is sent with); give {table_name[: -len(SUFFIX)]!r}"
        )
    if '"' in table_name:
        raise ValueError(
            f"table_name {table_name!r} may not hold a double quote: the file part's header carries it as %22, "
            "and the table would be named so"
        )
    return f"{table_name}{SUFFIX}"


def stored_name(upload: str) -> str:
    """The name the service gives a table made from a file part called ``upload``, as the emulator stores it.

    The name goes in the part's ``Content-Disposition`` escaped as browsers do
    (:func:`part_name`), which the emulator keeps as it comes. A service may as well undo the
    escape: adoption takes every spelling of :func:`stored_names`, never this one alone.
    """
    return _stem(part_name(upload))


def _loose(name: str) -> str:
    """A name with case, Unicode form (NFKC) and percent-escapes set aside, for finding candidates."""
    return unicodedata.normalize("NFKC", unquote(name)).casefold()


def named_after(table: TableSummary, file_name: str) -> bool:
    """Whether a table may be an upload of ``file_name``: its name is the stored name, loosely compared.

    Used to list the candidates, broadly (a service could change the case, the Unicode form of
    ``données``, or undo the ``%22`` of a quote): a table missed here would be paid for twice.
    Adopting one needs the exact stored name (:func:`judge`).
    """
    name = _loose(table.name or "")
    spellings = {*stored_names(file_name), os.path.splitext(file_name)[0], file_name}
    return name in {_loose(spelling) for spelling in spellings}


def now_in_service_time() -> str:
    """Now as the service writes ``UploadCompletionTime`` (``YYYY-MM-DDTHH:MM:SS``, UTC, no offset)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S")


# -- the note an import leaves before it sends -------------------------------------------------


def _is(value: object, *kinds: type) -> bool:
    """``isinstance``, except that a JSON boolean is no number."""
    return bool in kinds if isinstance(value, bool) else isinstance(value, kinds)


#: The JSON types of a note's evidence (absent in a note of an older release: read as ``None``).
_EVIDENCE: dict[str, tuple[type, ...]] = {
    "sent_at": (str, type(None)),
    "series": (int, type(None)),
    "facts": (dict, type(None)),
    "answer": (str, type(None)),
}
#: A note's time when it has none (an older release's): any read counts as after it.
_EPOCH = "1970-01-01T00:00:00"


@dataclass(frozen=True)
class SentImport:
    """The note of an import about to be sent: a new table (``file``, ``before``) or a replacement (``card_id``).

    Written before the file is sent, so that a try whose answer was lost leaves the next one
    what to look for; it then holds the ``answer`` until the task instance ends, so that a try
    failing on a later step is followed by one that returns the CardID instead of paying again.

    :param file: the file part's name (:func:`upload_name`); the service names the table after it.
    :param before: the CardIDs of the department's tables named after it just before sending.
    :param card_id: the replaced table.
    :param replaced_after: its previous read's ``UploadCompletionTime``.
    :param sent_at: when the note was written, just before the file was sent, as the service writes times.
    :param series: the task instance's series of tries (a note of a cleared series is not resumed).
    :param facts: what validation found that the table must show (:class:`FileFacts`); ``None``:
        counted when the note is read.
    :param answer: the CardID the service answered with, once it did.
    """

    project_id: str
    file: str | None = None
    before: tuple[str, ...] = ()
    card_id: str | None = None
    replaced_after: str | None = None
    sent_at: str | None = None
    series: int | None = None
    facts: FileFacts | None = None
    answer: str | None = None

    @property
    def what(self) -> str:
        """The import in words: ``the import of orders.csv`` or ``the replacement of CRD-1``."""
        return f"the replacement of {self.card_id}" if self.card_id is not None else f"the import of {self.file}"

    def of_series(self, series: int) -> bool:
        """Whether the note belongs to this series of tries (a retry, not a clear); an older release's has none."""
        return self.series is None or self.series == series

    def to_json(self) -> dict[str, Any]:
        evidence = {
            "sent_at": self.sent_at,
            "series": self.series,
            "facts": None if self.facts is None else self.facts.to_json(),
            "answer": self.answer,
        }
        if self.card_id is not None:
            return {
                "project_id": self.project_id,
                "card_id": self.card_id,
                "replaced_after": self.replaced_after,
                **evidence,
            }
        return {"project_id": self.project_id, "file": self.file, "before": list(self.before), **evidence}

    @classmethod
    def from_json(cls, value: object) -> SentImport | None:
        """The note, ``None`` when there is none; ``ValueError`` for a note this provider did not write."""
        if value is None:
            return None
        if isinstance(value, dict) and isinstance(value.get("project_id"), str) and _evidence_ok(value):
            evidence: dict[str, Any] = {k: value.get(k) for k in _EVIDENCE}
            evidence["facts"] = FileFacts.from_json(evidence["facts"])
            card_id, after, before = value.get("card_id"), value.get("replaced_after"), value.get("before")
            if isinstance(card_id, str) and card_id and _is(after, str, type(None)) and "file" not in value:
                return cls(value["project_id"], card_id=card_id, replaced_after=after, **evidence)
            if isinstance(value.get("file"), str) and _strings(before) and "card_id" not in value:
                return cls(value["project_id"], file=value["file"], before=tuple(before), **evidence)
        raise ValueError(f"the stored note of a sent import {value!r} is not one this provider wrote")


def _evidence_ok(value: dict) -> bool:
    return all(_is(value.get(k), *kinds) for k, kinds in _EVIDENCE.items())


# -- the judge ------------------------------------------------------------------------------


def candidates(note: SentImport, tables: Iterable[TableSummary]) -> list[TableSummary]:
    """The tables a lost answer may have made: for a new table, those new since the note and named after its file.

    For a replacement, the replaced table when it shows a read since the note (being read, or
    read at another time than ``replaced_after``); none when it is gone or unchanged: the
    service did not take the file.
    """
    if note.card_id is not None:
        return [
            t
            for t in tables
            if t.card_id == note.card_id
            and (t.status is TableStatus.BEING_READ or t.completion_time != note.replaced_after)
        ]
    assert note.file is not None  # from_json made sure
    known = set(note.before)
    return [t for t in tables if t.card_id not in known and named_after(t, note.file)]


def first_doubt(note: SentImport, table: TableSummary) -> str | None:
    """Why a candidate, as its summary shows it, is not this import's; ``None``: compare its columns next."""
    if note.file is not None and table.name not in stored_names(note.file):
        names = " or ".join(repr(n) for n in sorted(stored_names(note.file)))
        return f"its name is not {names}, the name the service gives this upload"
    if table.status is TableStatus.BEING_READ:
        return "it is still being read"
    if table.status is TableStatus.FAILED:
        return "its reading failed (SuccessfulUpload is false), so its rows cannot be compared"
    sent_at = note.sent_at or _EPOCH
    before = _before(table.completion_time, sent_at)
    if before is None:
        return f"its UploadCompletionTime {table.completion_time!r} cannot be compared with {sent_at}"
    if before:
        return f"it was read at {table.completion_time}, before this import was sent at {sent_at}"
    if note.facts is None:
        return NOT_COUNTED
    if table.rows != note.facts.rows:
        return f"it has {table.rows} rows, the file {note.facts.rows}"
    return None


@dataclass(frozen=True)
class Verdict:
    """What the evidence says of a lost answer: the table it made, none (send the file), or uncertain.

    :param proven: the table shown to be this import's (exactly one candidate without a doubt).
    :param doubts: every candidate with why it is not proven (``None``: it matches, but so does another).
    """

    note: SentImport
    proven: TableSummary | None
    doubts: tuple[tuple[TableSummary, str | None], ...] = ()

    @property
    def nothing_arrived(self) -> bool:
        """No candidate at all: the service did not receive the file, and it may be sent again."""
        return self.proven is None and not self.doubts

    def uncertainty(self) -> str:
        """The sentence for a person when neither is proven: each candidate, and why."""
        note = self.note
        tables = "; ".join(f"{_described(t)}: {why or 'matches, but so does another'}" for t, why in self.doubts)
        if note.card_id is None:
            return (
                f"the import of {note.file} into department {note.project_id} lost its answer, and the evidence does "
                f"not show which table, if any, it made: {tables}. Nothing was imported again (no credit spent). "
                "Look at these tables: if one is this file's, use its CardID (card_id=...); if none is, clear the "
                "task to import the file again."
            )
        return (
            f"the replacement of {note.card_id} in department {note.project_id} lost its answer, and the table was "
            f"read since (it was last read at {note.replaced_after} before), but the evidence does not show that "
            f"read was this file's: {tables}. Nothing was sent again (no credit spent). Look at the table: if it "
            "holds this file's data, nothing is left to do; if not, clear the task to send the file again."
        )


def judge(note: SentImport, read: Sequence[tuple[TableSummary, TableDetail | None]]) -> Verdict:
    """The verdict on the candidates as last seen (each with its detail, fetched when :func:`first_doubt` had none).

    Exactly one candidate without a doubt is proven; none at all means nothing arrived;
    anything else is uncertain: paying twice, or claiming another import's table (another file
    of the same name, a refresh by another client), are both worse than asking a person.
    """
    doubts = tuple(
        (table, first_doubt(note, table) or (unlike(detail, note.facts) if detail else "its columns were not fetched"))
        for table, detail in read
    )
    proven = [table for table, why in doubts if why is None]
    return Verdict(note, proven[0], ()) if len(proven) == 1 else Verdict(note, None, doubts)


def _before(completion_time: str | None, sent_at: str) -> bool | None:
    """Whether a read ended before the import was sent; ``None`` when a time cannot be read."""
    if not completion_time:
        return None
    try:
        return datetime.fromisoformat(completion_time) < datetime.fromisoformat(sent_at)
    except ValueError:
        return None


def _described(table: TableSummary) -> str:
    return f"{table.card_id} (named {table.name!r}, read at {table.completion_time or 'not yet'}, {table.rows} rows)"


__all__ = [
    "FileFacts",
    "SentImport",
    "Verdict",
    "candidates",
    "first_doubt",
    "judge",
    "named_after",
    "now_in_service_time",
    "part_name",
    "stored_name",
    "stored_names",
    "unlike",
    "upload_name",
]
