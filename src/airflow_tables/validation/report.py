"""The report on a CSV file: :func:`validate_csv`, :func:`validate_source` and :class:`CsvReport`.

Every import costs a credit, so the question "will the service take this file, and
how will it read it?" is answered here, locally, in one streaming pass, from what
:mod:`.scan` finds and the wording of :mod:`.rules`.
"""

from __future__ import annotations

import codecs
import contextlib
import dataclasses
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_tables.exceptions import CsvValidationError
from airflow_tables.validation import dialect, rules
from airflow_tables.validation.rules import Problem
from airflow_tables.validation.scan import FileScan, Findings, scan_file, scan_stream

if TYPE_CHECKING:
    from airflow_tables.sources import ReadPlan, Source
    from airflow_tables.sources.transcode import Codec

__all__ = ["CsvReport", "scanned_copy", "validate_csv", "validate_source"]

log = logging.getLogger(__name__)


@dataclass
class CsvReport(Findings):
    """How the service will read a file, and everything that stops it from doing so.

    ``size_bytes`` is the file's own size; a file in a declared encoding is sent converted
    to UTF-8, and ``converted_bytes`` is then the size the service receives (None otherwise).
    """

    converted_bytes: int | None = None

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def read(self) -> bool:
        """False when the file could not be opened at all (missing, a directory, no permission)."""
        return self.stopped is None or self.stopped.code != rules.UNREADABLE.code

    def cut_short(self) -> Problem | None:
        """The file's problem when its only one is a last record cut short, as a file still being written ends.

        That record (the header is record 1) has fewer fields than the header, or opens a
        quote it never closes. The operators retry such a file when it changed moments ago
        (``operators._checks``) instead of failing it for good; ``None`` for anything else.
        """
        last = self.rows + 1
        if not self.errors or any(p.record != last for p in self.errors):
            return None
        for problem in self.errors:
            facts = problem.facts or {}
            one_short_row = (
                problem.code == rules.RAGGED_ROWS.code
                and facts.get("total") == 1
                and facts.get("fields", self.column_count) < self.column_count
            )
            if not (one_short_row or problem.code == rules.UNTERMINATED_QUOTE.code):
                return None
        return self.errors[0]

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
            "converted_bytes": self.converted_bytes,
            "delimiter": self.delimiter,
            "encoding": self.encoding,
            "line_terminator": self.line_terminator,
            "columns": self.columns,
            "column_count": self.column_count,
            "rows": self.rows,
            "column_types": self.column_types,
            "stopped": None if self.stopped is None else self.stopped.to_dict(),
            "errors": [p.to_dict() for p in self.errors],
            "warnings": [p.to_dict() for p in self.warnings],
        }

    def counts(self) -> str:
        """What was counted (``12 columns, 10,000 rows``), or that counting stopped, where and why."""
        if not self.read:
            return "not read"
        columns = _count(self.column_count, "column")
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
            parts += [f"{dialect.DELIMITER_NAMES.get(self.delimiter, repr(self.delimiter))}-separated", self.encoding]
        size = f"{self.size_bytes:,} bytes"
        if self.converted_bytes is not None and self.converted_bytes != self.size_bytes:
            size += f" ({self.converted_bytes:,} as UTF-8)"
        return ", ".join([*parts, size])

    def summary(self) -> str:
        """One line for a task log: ``validated data.csv: 12 columns, 10,000 rows, comma-separated, ...: ok``."""
        state = "ok" if self.ok else _count(len(self.errors), "problem")
        return f"validated {os.path.basename(self.path)}: {self.describe()}: {state}"


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def validate_csv(
    path: str | os.PathLike | Any,
    *,
    max_columns: int = rules.MAX_COLUMNS,
    max_bytes: int = rules.MAX_BYTES,
    encoding: str | None = None,
    column_types: bool = False,
    spelling: rules.Spelling = rules.PYTHON,
) -> CsvReport:
    """Read ``path`` once, streaming, in bounded memory, and report what the service will make of it.

    ``path`` is a local path, an ``airflow.sdk.ObjectStoragePath`` or a URI
    (``s3://aws_conn@bucket/key.csv``); an object in storage is scanned as it streams,
    or, when it needs an exact read (a ragged row, a bad byte) or is in a declared
    encoding, copied to a local temporary file first, at most ``max_bytes`` of it
    (``docs/sources.md`` says why).
    ``encoding`` declares the file's encoding (any Python codec name): the file is then
    checked as text in it, as the UTF-8 it will be sent as, and a byte not valid in it
    is an ``encoding`` error with its line. Without it, the file must be UTF-8.
    ``column_types``: also type each column by the service's rule (``long`` or ``string``,
    see :mod:`airflow_tables.validation.types`) in the same single pass, into
    :attr:`CsvReport.column_types` (None when an error stopped the reading).
    ``spelling``: whose terms the advice is worded in (``rules.PYTHON``: ``encoding='cp1252'``;
    ``rules.CLI``: ``--encoding cp1252``).

    Never raises for a bad file: every problem is in ``errors`` (call
    :meth:`CsvReport.raise_for_errors` to fail). A path that is missing, a
    directory or unreadable, and an object that storage cannot serve, are reported the
    same way, naming them. An unknown ``encoding`` raises :class:`ValueError`.
    """
    # Here, not at import: `airflow-tables validate` and DAG files import this module and must stay light.
    from airflow_tables.sources import SourceError, open_source

    try:
        source = open_source(path, encoding=encoding)
    except SourceError as err:
        return _unreadable(err.label, err.reason)
    return validate_source(
        source, max_columns=max_columns, max_bytes=max_bytes, column_types=column_types, spelling=spelling
    )


def validate_source(
    source: Source,
    *,
    max_columns: int = rules.MAX_COLUMNS,
    max_bytes: int = rules.MAX_BYTES,
    column_types: bool = False,
    spelling: rules.Spelling = rules.PYTHON,
) -> CsvReport:
    """:func:`validate_csv` for a :class:`~airflow_tables.sources.Source`, read as its plan says.

    A local UTF-8 file is scanned where it lies. An object in UTF-8 is scanned as it streams
    (read once, nothing written); when it holds something only an exact read can describe
    (a ragged row, a bad byte), or is in a declared encoding, it is copied to a local
    temporary file and that is scanned (``docs/sources.md`` has the measurements). Which of
    these applies is :func:`airflow_tables.sources.read_plan`'s decision, taken as it is. A
    copy made by :func:`scanned_copy` with the same arguments is reported from the scan made
    while it was written; with other arguments it is scanned again, and the log says why.
    """
    from airflow_tables.sources import read_plan

    question = ScanQuestion(rules.Limits(max_columns=max_columns, max_bytes=max_bytes), column_types)
    report = _follow(read_plan(source, max_bytes=max_bytes), question)
    if spelling == rules.PYTHON:
        return report
    return dataclasses.replace(
        report,
        errors=[p.spoken(spelling) for p in report.errors],
        warnings=[p.spoken(spelling) for p in report.warnings],
        stopped=None if report.stopped is None else report.stopped.spoken(spelling),
    )


@dataclass(frozen=True)
class ScanQuestion:
    """What a scan is asked (its limits, and whether it types the columns): a scan answers only its own question."""

    limits: rules.Limits
    column_types: bool

    def __str__(self) -> str:
        types = "with" if self.column_types else "without"
        return f"max_columns={self.limits.max_columns}, max_bytes={self.limits.max_bytes:,}, {types} column types"


@contextlib.contextmanager
def scanned_copy(
    source: Source,
    *,
    max_columns: int = rules.MAX_COLUMNS,
    max_bytes: int = rules.MAX_BYTES,
    column_types: bool = False,
) -> Iterator[Source]:
    """The read plan's local file (``ReadPlan.local_file``), an object in UTF-8 scanned in the pass that copies it.

    :func:`validate_source` of the copy, with the same arguments, then reports from that scan
    instead of reading the copy again (when the scan describes the file: see
    :func:`.scan.scan_stream`). The operators validate what they upload this way. A local UTF-8
    file is not copied (it is yielded as it is), nor scanned here: it is read in place.
    """
    from airflow_tables.sources import CopyScan, read_plan

    question = ScanQuestion(rules.Limits(max_columns=max_columns, max_bytes=max_bytes), column_types)
    with read_plan(source, max_bytes=max_bytes).staging() as copy:
        scan = None
        if copy.stream is not None:
            found = scan_stream(
                copy.stream, source.label, source.stored_size, question.limits, column_types=column_types
            )
            scan = CopyScan(found, question)
        yield copy.done(scan)


def _follow(plan: ReadPlan, question: ScanQuestion) -> CsvReport:
    """Read the file as ``plan`` says and report what the scan found; nothing here decides how it is read.

    A streamed object that only an exact read can describe is read again from the plan's
    local file. An object that does not have the size it was listed with is refused by the
    read itself (:meth:`~airflow_tables.sources.Source.open_listed`).
    """
    from airflow_tables.sources import CompressedAfterAll, Reading, SourceError, read_plan

    source, limits = plan.source, question.limits
    if plan.too_large is not None:  # not worth reading (an object is not copied out of storage to say more)
        too_large = rules.too_large_problem(plan.too_large.size, limits, at_least=plan.too_large.at_least)
        return _report(source, errors=[too_large])
    try:
        if plan.reading is Reading.STREAMED:
            try:
                with source.open_listed() as stream:
                    scan = scan_stream(
                        stream, source.label, source.stored_size, limits, column_types=question.column_types
                    )
            except CompressedAfterAll as found:  # named as plain, stored compressed: read it as what it is
                return _follow(read_plan(found.source_in(source), max_bytes=plan.max_bytes), question)
            if scan is not None:
                return _scanned(source, scan)
        with plan.local_file() as local:  # the file itself when it is read in place
            return _scan_local(source, local, question)
    except SourceError as err:
        return _unreadable(err.label, err.reason)
    except OSError as err:
        reason = err.strerror or err.__class__.__name__
        if source.is_local_utf8 and os.path.isdir(source.label):
            reason = "it is a directory, not a file"
        return _unreadable(source.label, reason)


def _scan_local(source: Source, local: Source, question: ScanQuestion) -> CsvReport:
    """The report of ``source`` from its local UTF-8 file (``local``: itself, or its copy), which is read here.

    The scan is the one made while the copy was written when it answers ``question`` (a scan
    with other arguments cannot, and the log says the copy is read again), else one of the
    file now (:func:`local_report` says the rest).
    """
    from airflow_tables.sources import NotCopyScanned

    limits = question.limits
    if not local.complete:  # the copy stopped at its limit
        return _report(source, errors=[rules.too_large_problem(limits.max_bytes, limits, at_least=True)])
    copied = local.copy_scan_for(question)
    if isinstance(copied, NotCopyScanned) or copied.found is None:
        if isinstance(copied, NotCopyScanned) and copied.other_arguments:  # paid for, cannot answer: say so
            log.info("%s: %s; the copy is scanned again", local.label, copied)
        assert local.local_path is not None  # the plan's local file
        scan = scan_file(local.local_path, limits, column_types=question.column_types)
    else:
        scan = copied.found
    return local_report(source, local, scan)


def local_report(source: Source, local: Source, scan: FileScan) -> CsvReport:
    """The report of ``source`` from ``scan``, a scan of its local UTF-8 file ``local`` (itself, or its copy).

    A copy converted from a declared encoding also says what the conversion found: its first
    undecodable bytes, and a declaration its stored bytes contradict (:func:`_utf8_declared_otherwise`);
    a file in UTF-8 as it is pays nothing for that.
    """
    if local.converted_from is None:
        return _scanned(source, scan)
    from airflow_tables.sources.transcode import byte_order

    found, undecodable = local.undecodable(), None
    if found is not None:
        order = byte_order(found.encoding, found.bad) if found.offset == 0 else None
        undecodable = rules.undecodable_problem(found.line, found.encoding, found.offset, found.bad, order)
    return _scanned(source, scan, undecodable, _utf8_declared_otherwise(local.converted_from, local.stored_head or b""))


#: How much of a file in a declared encoding is looked at to see whether it is UTF-8 after all
#: (as much as a staged copy keeps of the stored bytes: ``sources.streams.STORED_HEAD_BYTES``).
MISREAD_SAMPLE_BYTES = 64 * 1024
_WIDE = ("utf-16", "utf-32")
_NON_ASCII_WORD = re.compile(r'[^\s,;|"]{0,12}[^\x00-\x7f][^\s,;|"]{0,12}')


def _utf8_declared_otherwise(codec: Codec, stored_head: bytes) -> list[Problem]:
    """Problems of a UTF-8 file declared in another encoding, from a bounded sample of its stored bytes.

    A file in a declared encoding is always read from its staged copy (``sources.read_plan``),
    converted, whose UTF-8 says nothing of the declaration: it is judged by the first
    :data:`MISREAD_SAMPLE_BYTES` as stored, which the copy kept as it was made (``stored_head``:
    no second read), and a plain UTF-8 file pays nothing. When they
    decode as UTF-8 and hold no NUL byte: declared UTF-16/32 is an error (converted, the file is
    nonsense); a declared single-byte code page (cp1252, latin-1...) is a ``mojibake`` warning
    when they hold anything but ASCII (``café`` would be imported as ``cafÃ©``), not an error:
    the file converts, and a real cp1252 text can look like this.
    """
    if not (codec.table is not None or codec.name.startswith(_WIDE)):
        return []
    sample = stored_head[:MISREAD_SAMPLE_BYTES]
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(sample, final=False)  # the sample may cut a character
    except UnicodeDecodeError:
        return []
    if not text or "\x00" in text:
        return []
    if codec.table is None:
        return [rules.UTF8_DECLARED_WIDE.problem(line=1, encoding=codec.name)]
    word = _NON_ASCII_WORD.search(text)
    if word is None:
        return []
    misread = word.group().encode().decode(codec.name, errors="replace")
    return [rules.MOJIBAKE.problem(encoding=codec.name, word=word.group(), misread=misread)]


def _scanned(
    source: Source, scan: FileScan, undecodable: Problem | None = None, misread: list[Problem] | None = None
) -> CsvReport:
    """The report of a scanned file, under the name it was given, with its first undecodable bytes if any.

    ``misread``: what :func:`_utf8_declared_otherwise` found. A file its declared encoding
    cannot decode has no row count worth a "no data rows" warning (a UTF-8 file read as
    UTF-16 is one line of nonsense): the encoding is what is wrong, and the errors say so.
    """
    misread = misread or []
    # A UTF-8 file declared UTF-16/32: advice about the wide encoding's bytes (declare its byte order) is wrong.
    utf8_declared_wide = any(p.code == rules.UTF8_DECLARED_WIDE.code for p in misread)
    shown = [undecodable] if undecodable and not utf8_declared_wide else []
    errors = [p for p in misread if p.code != "mojibake"] + shown + scan.errors
    warnings = scan.warnings + [p for p in misread if p.code == "mojibake"]
    if undecodable or any(p.code == "encoding" for p in misread):
        warnings = [w for w in warnings if w.code != "no-rows"]
    converted = source.codec is not None  # the scan read the UTF-8 it converts to: the file's own size is stored
    return CsvReport(
        **{
            **scan.findings(),
            "size_bytes": source.stored_size if converted else scan.size_bytes,
            "converted_bytes": scan.size_bytes if converted else None,
            "path": source.label,
            "errors": errors,
            "warnings": warnings,
            "encoding": source.encoding or scan.encoding,
            "stopped": undecodable or scan.stopped,
            "column_types": None if undecodable else scan.column_types,
        }
    )


def _report(source: Source, errors: list[Problem]) -> CsvReport:
    """A report of a file that was not scanned: its name and the problems found without reading it."""
    name_problem = rules.check_file_name(source.name)
    return CsvReport(
        path=source.label,
        size_bytes=source.stored_size,
        delimiter=",",
        columns=[],
        rows=0,
        errors=[name_problem, *errors] if name_problem else errors,
        encoding=source.encoding or "utf-8",
        stopped=errors[0] if errors else None,
    )


def _unreadable(label: str, reason: str) -> CsvReport:
    problem = rules.UNREADABLE.problem(path=label, reason=reason)
    return CsvReport(path=label, size_bytes=0, delimiter=",", columns=[], rows=0, errors=[problem], stopped=problem)
