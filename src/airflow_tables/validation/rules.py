"""The Data Tables Service's rules for reading a CSV file, in one place.

Each rule is a :class:`Rule` declared once below (its code, what it looks at, its wording,
the bytes it stops on); how a file is read by them (quoting, separators, column names) is
:mod:`.dialect`. The validator (:mod:`airflow_tables.validation`) and the emulator's reader
(:mod:`airflow_tables.emulator.reader`) both read files through these modules and
:mod:`airflow_tables.validation.scan`, so the two can never disagree about what a file
contains. Standard library only: ``airflow-tables validate`` must start in
milliseconds and the emulator must not depend on the client.

What the service's interface document states (section 4.4 and 8) and what we
chose where it is silent (see ``docs/validation.md``):

* The file name ends in ``.csv`` (stated).
* The separator is detected among comma, semicolon, tab and pipe (stated). We
  count separators outside quotes on the first lines and pick the one whose
  count is the same on the most lines; a file whose heading row none of them
  splits is one column and reads as comma-separated (chosen).
* The first record holds the column names (stated). Blank headings get a name
  and repeated headings get a number (stated); the scheme is ours:
  ``column_<position>`` for a blank heading, ``<name>_<n>`` for the n-th
  occurrence of a name, compared after trimming whitespace and ignoring case.
* At most 300 columns and 512 MB (stated; 512 MB read as 512 MiB, the larger
  reading, since the document does not define MB).
* A heading of at most 1,024 characters (chosen, defensively: the document shows
  no limit, and a heading is a name shown in the table, the logs, the Data Tables
  page and the approval form; a 15 MiB one passed validation and reached them all).
* Quoting follows RFC 4180 as Python's csv module reads it: a field may be
  enclosed in double quotes, inside which separators and line breaks are data
  and a doubled quote is one quote; a quote in the middle of an unquoted field is
  data (chosen: it is how pandas and most services read). Blank lines are not
  records.
* Encoding: UTF-8, with or without a byte-order mark (the mark is not part of the
  first heading). Anything else is refused before upload (chosen, defensively:
  the document names no encoding, and a misread file still costs a credit), unless
  its encoding is declared: it is then converted to UTF-8 before these rules read
  it (:mod:`airflow_tables.sources`).
"""

from __future__ import annotations

import codecs
import dataclasses
import os
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

MAX_COLUMNS = 300
#: The longest heading taken, in characters (not shown by the interface: chosen, see the module's list).
MAX_HEADING_CHARS = 1024
MAX_BYTES = 512 * 1024**2
MEDIA_TYPE = "text/csv"
FILE_SUFFIX = ".csv"


@dataclass(frozen=True)
class Limits:
    """The service's size limits, as one value the validator and the emulator pass around.

    Defaults are the service's own (300 columns, 512 MiB); tests and the emulator's
    configuration lower them.
    """

    max_columns: int = MAX_COLUMNS
    max_bytes: int = MAX_BYTES

    def __post_init__(self) -> None:
        for name in ("max_columns", "max_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number of at least 1, not {value!r}")


#: The service's limits.
SERVICE_LIMITS = Limits()


@dataclass(frozen=True)
class Spelling:
    """How advice writes the encoding setting, for the caller a report is worded for.

    A rule's wording writes ``{how:cp1252}`` for "declare cp1252" and ``{how:}`` for the
    setting itself; :data:`PYTHON` spells them ``encoding='cp1252'`` and ``encoding=`` (the
    argument of ``validate_csv``, ``import_csv`` and the operators), :data:`CLI` spells them
    ``--encoding cp1252`` and ``--encoding`` (``airflow-tables validate``).
    """

    name: str
    setting: str  # the setting alone
    declared: str  # a template over ``encoding``
    any: str  # "declare the right one"

    def __format__(self, encoding: str) -> str:
        if encoding == "...":
            return self.any
        return self.declared.format(encoding=encoding) if encoding else self.setting


PYTHON = Spelling("python", "encoding=", "encoding={encoding!r}", "encoding=...")
CLI = Spelling("cli", "--encoding", "--encoding {encoding}", "--encoding ...")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a file, located as precisely as we know it.

    ``code`` is stable and machine-readable (``ragged-rows``, ``too-many-columns``...);
    ``message`` is for people and says what to do, worded for Python callers unless
    :meth:`spoken` for another (``wording`` and ``facts`` are what it is worded from).
    """

    code: str
    message: str
    line: int | None = None
    record: int | None = None
    wording: str | None = field(default=None, compare=False, repr=False)
    facts: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    def spoken(self, how: Spelling) -> Problem:
        """The same problem with its advice spelled for ``how``'s callers (``--encoding cp1252`` for the CLI)."""
        if self.wording is None or self.facts is None:
            return self
        return dataclasses.replace(self, message=self.wording.format(how=how, **self.facts))

    def where(self) -> str:
        """``line 12 (record 11)``, or as much of it as is known."""
        parts = []
        if self.line is not None:
            parts.append(f"line {self.line}")
        if self.record is not None:
            parts.append(f"record {self.record}" if not parts else f"(record {self.record})")
        return " ".join(parts)

    def __str__(self) -> str:
        where = self.where()
        return f"{where}: {self.message}" if where else self.message

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "line": self.line, "record": self.record}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Problem:
        """The inverse of :meth:`to_dict`, ``wording`` and ``facts`` too (a scan's second half reports through JSON)."""
        return cls(
            data["code"], data["message"], data.get("line"), data.get("record"), data.get("wording"), data.get("facts")
        )

    def moved(self, lines: int, records: int) -> Problem:
        """The same problem, found in a part of the file that starts ``lines`` lines and ``records`` records in."""
        return dataclasses.replace(
            self,
            line=None if self.line is None else self.line + lines,
            record=None if self.record is None else self.record + records,
        )


@dataclass
class Encoding:
    """What the file's first bytes say about its encoding."""

    name: str  # "utf-8", "utf-8-sig", "utf-16-le", "utf-16-be"
    bom_length: int = 0
    problems: list[Problem] = field(default_factory=list)


def sniff_encoding(head: bytes) -> Encoding:
    """Tell the encoding from the byte-order mark, refusing UTF-16 and UTF-32."""
    if head.startswith(codecs.BOM_UTF8):
        return Encoding("utf-8-sig", len(codecs.BOM_UTF8))
    for bom, name in (
        (codecs.BOM_UTF32_LE, "utf-32-le"),
        (codecs.BOM_UTF32_BE, "utf-32-be"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
    ):
        if head.startswith(bom):
            return Encoding(name, len(bom), [_wide_encoding_problem(name)])
    # UTF-16 without a mark: every other byte of ASCII text is NUL.
    sample = head[:1024]
    if len(sample) >= 4 and sample[1::2].count(0) > len(sample) // 4 and sample[0::2].count(0) == 0:
        return Encoding("utf-16-le", 0, [_wide_encoding_problem("utf-16-le", bom=False)])
    if len(sample) >= 4 and sample[0::2].count(0) > len(sample) // 4 and sample[1::2].count(0) == 0:
        return Encoding("utf-16-be", 0, [_wide_encoding_problem("utf-16-be", bom=False)])
    return Encoding("utf-8")


#: What files often mistaken for a CSV start with: (first bytes, what the file is, what to do).
_SPREADSHEET_ADVICE = "open it in the spreadsheet program and save it as 'CSV UTF-8'"
_OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # Office 97-2003 files
_SIGNATURES: tuple[tuple[bytes, str, str], ...] = (
    (b"\x1f\x8b", "a gzip file", "decompress it first (gunzip)"),
    (b"PK\x03\x04", "a zip archive", "extract the CSV from it first (unzip)"),
    (b"BZh", "a bzip2 file", "decompress it first (bunzip2)"),
    (b"\xfd7zXZ\x00", "an xz file", "decompress it first (unxz)"),
    (b"\x28\xb5\x2f\xfd", "a zstd file", "decompress it first (unzstd)"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive", "extract the CSV from it first"),
    (_OLE, "an Excel 97-2003 workbook (xls) or another Office file", _SPREADSHEET_ADVICE),
    (
        b"PAR1",
        "a Parquet file",
        "a whole one (ending, as it began, with PAR1) is converted to CSV with airflow-tables[parquet]; "
        "this one is cut short or damaged",
    ),
    (b"%PDF-", "a PDF document", "export the table from its source as CSV instead"),
    (b"SQLite format 3\x00", "an SQLite database", "export the table as CSV first (sqlite3 -csv -header)"),
    (b"\x89PNG", "a PNG image", "export the data as CSV instead"),
    (b"\xff\xd8\xff", "a JPEG image", "export the data as CSV instead"),
)
#: Inside a zip archive, what its member names say it is.
_ZIP_KINDS = (
    (b"xl/", "an Excel workbook (xlsx)", _SPREADSHEET_ADVICE),
    (b"opendocument.spreadsheet", "an OpenDocument spreadsheet (ods)", _SPREADSHEET_ADVICE),
    (b"word/", "a Word document (docx)", "export the table from it as CSV instead"),
)
# Bytes no text file holds: C0 controls other than tab, line feed and carriage return, and DEL.
_CONTROL = bytes(b for b in range(32) if b not in (9, 10, 13)) + b"\x7f"
_TEXT_BYTES = bytes(b for b in range(256) if b not in _CONTROL)


def binary_signature(head: bytes) -> tuple[str, str] | None:
    """``(what the file is, what to do)`` when ``head`` (a file's first bytes) is a known binary format.

    A signature only counts when the head also holds bytes no text has (control
    characters), so a CSV whose first heading happens to be ``PAR1`` or ``BZh`` is still a CSV.
    """
    for magic, kind, advice in _SIGNATURES:
        if head.startswith(magic) and head.translate(None, _TEXT_BYTES):
            if magic == b"PK\x03\x04":
                kind, advice = next(((k, a) for name, k, a in _ZIP_KINDS if name in head), (kind, advice))
            return kind, advice
    return None


# -- Every problem a scan can report, declared here and worded nowhere else -------------------
#
# Codes are stable (tests, --json and the emulator's 422 rely on them); messages say what is
# wrong and what to do. Line and record numbers are 1-based and count from the file's start.


#: Where a scan applies a rule, in the order it reads a file.
LOOKS_AT = ("name", "size", "start", "header", "records", "bytes")


@dataclass(frozen=True)
class Rule:
    """One of the service's rules: its stable code, what it looks at, its wording, and the bytes it stops on.

    ``looks_at`` says where a scan applies it: ``name`` (the file name), ``size``, ``start`` (the
    first bytes: binary formats, encoding marks), ``header`` (the heading row), ``records`` (each
    record's shape, counted by the kernels and named by the exact read), ``bytes`` (every byte
    of the header and the records). ``wording`` is a :meth:`str.format` template over the facts
    a problem is made with. A ``bytes`` rule names the bytes no plain record holds in
    ``stops_on``: both kernels stop a plain run on every byte of :data:`STOP_BYTES`, the exact read
    finds the first and reports it with its line (:func:`byte_problems`), so such a rule is
    this one declaration and its test.
    """

    code: str
    looks_at: str
    wording: str
    stops_on: bytes = b""

    def __post_init__(self) -> None:
        # Where a rule looks decides which scan applies it: a "bytes" rule is a byte the kernels stop on.
        if self.looks_at not in LOOKS_AT:
            raise ValueError(f"rule {self.code!r} looks at {self.looks_at!r}, not one of {', '.join(LOOKS_AT)}")
        if self.stops_on and self.looks_at != "bytes":
            raise ValueError(f"rule {self.code!r} stops on bytes, so it looks at the bytes, not at the {self.looks_at}")

    def problem(
        self, *, line: int | None = None, record: int | None = None, how: Spelling = PYTHON, **facts: Any
    ) -> Problem:
        """This rule's problem, worded from ``facts`` for ``how``'s callers (see :class:`Spelling`)."""
        return Problem(self.code, self.message(how=how, **facts), line, record, self.wording, facts)

    def message(self, *, how: Spelling = PYTHON, **facts: Any) -> str:
        """This rule's wording with ``facts``: a problem's message, without the problem (a bad row's, per row)."""
        return self.wording.format(how=how, **facts)


FILE_NAME_GZIP = Rule(
    "file-name",
    "name",
    "the file name {name!r} is that of a gzip-compressed CSV; the service takes only an uncompressed file "
    "whose name ends in '.csv'. Decompress it first (gunzip -k {name}) and name it {plain!r}.",
)
PARTS_HEADER = Rule(
    "parts-header",
    "header",
    "its header {got} is not the first part's ({first}: {want}); the parts of one table must name {columns}",
)
FILE_NAME_SUFFIX = Rule(
    "file-name",
    "name",
    "the file name {name!r} does not end in '.csv'; the service refuses any other name, and names "
    "the table after the file. Rename the file so that it ends in .csv.",
)
FILE_NAME_EMPTY = Rule(
    "file-name",
    "name",
    "the file name {name!r} has nothing before '.csv', and the service names the table after it. "
    "Rename the file (for example orders.csv).",
)
TOO_LARGE = Rule(
    "too-large",
    "size",
    "the file is {more}{size:,} bytes; the service takes at most {limit:,} bytes{mib}. Split it or drop columns.",
)
UNREADABLE = Rule("unreadable", "size", "cannot read {path}: {reason}")
SIZE_UNKNOWN = Rule(
    "unreadable",
    "size",
    "cannot read {path}: its size reads {size:,} bytes but it holds more: it is still being written, or it is "
    "not a regular file (a /proc or device file). Validate it once it is complete, or copy it to a regular file "
    "first.",
)
NOT_CSV = Rule("not-csv", "start", "this is {kind}, not a CSV: {advice}.")
EMPTY_FILE = Rule("empty-file", "start", "the file is empty; the service needs at least a header row.")
WIDE_ENCODING = Rule(
    "encoding",
    "start",
    "the file is encoded as {upper}; the service reads UTF-8. Declare its encoding ({how:{declare}}) to have "
    "it converted on upload, or re-save it as UTF-8 (for example: iconv -f {upper} -t UTF-8 in.csv > out.csv).",
)
UTF8_DECLARED_WIDE = Rule(
    "encoding",
    "start",
    "the file is UTF-8, not {encoding}: its first bytes decode as UTF-8 and hold no NUL byte, while in "
    "{encoding} every separator and line break has one. Leave {how:} out (UTF-8 is the default).",
)
MOJIBAKE = Rule(
    "mojibake",
    "start",
    "the file reads as UTF-8 ({word!r}), but {how:{encoding}} was declared, which turns it into "
    "{misread!r} (UTF-8 bytes read as {encoding}). If the file is UTF-8, leave {how:} out; "
    "if it really is {encoding}, this warning can be ignored.",
)
#: Found by the source that converts the file (:class:`~airflow_tables.sources.transcode.Undecodable`).
UNDECODABLE = Rule(
    "encoding",
    "bytes",
    "{bad} (offset {offset:,}) {verb} not valid {encoding}: the file was written in another encoding, or is "
    "damaged. Declare the encoding it was written in ({how:...}).",
)
#: UTF-16 or UTF-32 declared without its byte order, in a file without a byte-order mark.
NO_BYTE_ORDER_MARK = Rule(
    "encoding",
    "bytes",
    "the file has no byte-order mark, which {encoding} needs to tell its byte order; its bytes ({bad}) read as "
    "{endian}. Declare {how:{declare}}.",
)
NO_BYTE_ORDER_MARK_UNKNOWN = Rule(
    "encoding",
    "bytes",
    "the file has no byte-order mark, which {encoding} needs to tell its byte order. "
    "Declare {how:{encoding}-le} or {how:{encoding}-be}, whichever it was written in.",
)
NOT_UTF8 = Rule(
    "encoding",
    "bytes",
    "byte 0x{byte:02X} is not valid UTF-8 (the file looks like Latin-1, "
    "Windows-1252 or another legacy encoding); the service reads UTF-8 and would garble it. "
    "Declare the file's encoding ({how:cp1252}, for example) to have it converted on upload, "
    "or re-save it as UTF-8 (for example: iconv -f CP1252 -t UTF-8 in.csv > out.csv).",
)
NUL_BYTE = Rule(
    "nul-byte",
    "bytes",
    "contains a NUL byte (0x00): the file is binary, UTF-16 or damaged. Export it again as a UTF-8 text CSV.",
    stops_on=b"\x00",
)
HEADER_UNTERMINATED = Rule(
    "unterminated-quote",
    "header",
    "the header row opens a quote that is never closed. Add the closing double quote.",
)
TOO_MANY_COLUMNS = Rule(
    "too-many-columns",
    "header",
    "the header has {columns:,} columns; the service takes at most {limit}. Drop columns or split the file.",
)
HEADING_TOO_LONG = Rule(
    "heading-too-long",
    "header",
    "column {position}'s heading is {length:,} characters long ({start!r}...); at most {limit:,} are taken, since "
    "a heading is a name people read. Shorten it.",
)
BLANK_HEADING = Rule("blank-heading", "header", "column {position} has no heading; it will be named {name!r}")
REPEATED_HEADING = Rule(
    "repeated-heading", "header", "column {position} repeats the heading {heading!r}; it will be named {name!r}"
)
UNTERMINATED_QUOTE = Rule(
    "unterminated-quote",
    "records",
    "a quoted field starts in this record and is never closed, so everything after it "
    'is read as one cell. Add the closing double quote (or double any quote that is data: "").',
)
RECORD_TOO_LONG = Rule(
    "record-too-long",
    "records",
    "a record starts here and runs on for more than {mib} MiB "
    "without ending; most likely a quote is never closed. Check the quoting from this line on.",
)
RAGGED_ROWS = Rule(
    "ragged-rows",
    "records",
    "{total:,} {rows_do} not have the header's {columns} fields: {shown}{tail}. Every row needs exactly "
    "{columns} fields; quote fields that contain the separator or a line break.",
)
NO_ROWS = Rule("no-rows", "records", "the file has a header but no data rows; the table will be empty.")

# -- Bad rows: one data row each, which ``on_bad_rows="quarantine"`` sets aside (:mod:`.bad_rows`) --------
ROW_NUL_BYTE = Rule("nul-byte", "records", "the row holds a NUL byte (0x00) at byte {at:,} of it")
ROW_NOT_UTF8 = Rule("encoding", "records", "byte 0x{byte:02X} (byte {at:,} of the row) is not valid UTF-8")
ROW_FIELD_COUNT = Rule("field-count", "records", "the row has {fields:,} field{s}; the header has {columns:,}")
ROW_TOO_LONG = Rule("record-too-long", "records", "the row is {size:,} bytes long; a row may hold at most {limit:,}")
ROW_NOT_A_LONG = Rule(
    "not-a-long",
    "records",
    "{value!r} in column {column!r} is not a whole number from -2**63 to 2**63-1, and column_types declares it long",
)
ROWS_NOT_UTF8 = Rule(
    "encoding-rows",
    "records",
    "{count:,} {rows_hold} bytes that are not UTF-8 and {were} set aside. If the file is in another encoding "
    "(Windows-1252, Latin-1...), declare it ({how:cp1252}) to have every row converted instead.",
)
DECLARED_COLUMN_MISSING = Rule(
    "declared-column-missing",
    "header",
    "column_types declares the column {column!r}, which the header does not have (it has {columns}). "
    "Declare the columns by the names the header gives them.",
)
BAD_ROWS = Rule(
    "bad-rows",
    "records",
    "{bad:,} of the {rows:,} data rows {are} bad: {shown}{tail}. Fix them, or set on_bad_rows='quarantine' to send "
    "the good rows and set these aside.",
)
TOO_MANY_BAD_ROWS = Rule(
    "too-many-bad-rows",
    "records",
    "{bad:,} of the {rows:,} data rows are bad ({fraction}), over {limit}; nothing was sent. "
    "The bad rows are listed in {rejects}.",
)
NO_GOOD_ROWS = Rule(
    "no-good-rows",
    "records",
    "all {rows:,} data rows are bad; a table of none would be sent, so nothing was. "
    "The bad rows are listed in {rejects}.",
)

#: Every rule, in the order a scan applies them.
RULES: tuple[Rule, ...] = tuple(v for v in list(globals().values()) if isinstance(v, Rule))
#: The rules about single bytes, and the table of bytes both kernels stop a plain run on.
BYTE_RULES: tuple[Rule, ...] = tuple(r for r in RULES if r.looks_at == "bytes" and r.stops_on)
STOP_BYTES: bytes = b"".join(r.stops_on for r in BYTE_RULES)


def bad_row_problem(code: str, message: str, line: int) -> Problem:
    """One bad row as a problem of its file (worded by its rule above, or by a Great Expectations expectation)."""
    return Problem(code, message, line)


def byte_problems(data: bytes, line_of: Callable[[int], int], skip: Collection[str] = ()) -> list[Problem]:
    """The first byte of ``data`` each byte rule stops on, as its problem (``line_of``: an offset's line).

    ``skip``: the codes already reported (only the first of a kind is).
    """
    problems = []
    for rule in BYTE_RULES:
        if rule.code in skip:
            continue
        found = [at for stop in rule.stops_on if (at := data.find(stop)) >= 0]
        if found:
            at = min(found)
            problems.append(rule.problem(line=line_of(at), byte=data[at]))
    return problems


def check_file_name(path: str | os.PathLike) -> Problem | None:
    """Return a problem when the name would be refused by the service (it must end in ``.csv``)."""
    name = os.path.basename(os.fspath(path))
    if name.lower().endswith(FILE_SUFFIX + ".gz") and len(name) > len(FILE_SUFFIX + ".gz"):
        # The service takes no compressed upload; the table is named after the file, so say what to name it.
        plain = name[: -len(".gz")]
        return FILE_NAME_GZIP.problem(name=name, plain=plain[: -len(FILE_SUFFIX)] + FILE_SUFFIX)
    if not name.lower().endswith(FILE_SUFFIX):
        return FILE_NAME_SUFFIX.problem(name=name)
    if len(name) == len(FILE_SUFFIX):
        return FILE_NAME_EMPTY.problem(name=name)
    return None


def _wide_encoding_problem(name: str, bom: bool = True) -> Problem:
    # With a byte-order mark, Python's "utf-16" reads either byte order; without one, the order must be named.
    declare = name.rsplit("-", 1)[0] if bom else name
    return WIDE_ENCODING.problem(line=1, upper=name.upper(), declare=declare)


_ENDIAN = {"le": "little-endian", "be": "big-endian"}


def undecodable_problem(
    line: int, encoding: str, offset: int, bad: bytes, order: str | None, how: Spelling = PYTHON
) -> Problem:
    """The ``encoding`` problem of bytes not valid in the declared ``encoding`` (at ``offset`` as stored).

    For UTF-16 or UTF-32 declared without a byte order in a file without a mark (nothing
    decodes: ``offset`` 0), it says which order to declare: ``order`` (``"le"``, ``"be"``,
    or None when the first bytes do not show it).
    """
    shown = " ".join(f"0x{b:02X}" for b in bad[:4])
    if encoding in ("utf-16", "utf-32") and offset == 0:
        if order is None:
            return NO_BYTE_ORDER_MARK_UNKNOWN.problem(line=line, how=how, encoding=encoding)
        endian, declare = _ENDIAN[order], f"{encoding}-{order}"
        return NO_BYTE_ORDER_MARK.problem(
            line=line, how=how, encoding=encoding, bad=shown, endian=endian, declare=declare
        )
    many = len(bad) > 1
    bytes_ = f"byte{'s' if many else ''} {shown}"
    verb = "are" if many else "is"
    return UNDECODABLE.problem(line=line, how=how, bad=bytes_, offset=offset, verb=verb, encoding=encoding)


def too_large_problem(size: int, limits: Limits, *, at_least: bool = False) -> Problem:
    """The problem for a file over the size limit (``at_least``: it was not read to its end)."""
    mib = f" ({limits.max_bytes // 1024**2} MiB)" if limits.max_bytes % 1024**2 == 0 else ""
    return TOO_LARGE.problem(more="more than " if at_least else "", size=size, limit=limits.max_bytes, mib=mib)


def ragged_rows_problem(total: int, listed: list[tuple[int, int, int]], columns: int) -> Problem:
    """``total`` records lack the header's ``columns`` fields; ``listed``: the first ones, (record, line, fields)."""
    shown = "; ".join(
        f"record {record} (line {line}) has {fields} field{'s' if fields != 1 else ''}"
        for record, line, fields in listed
    )
    more = total - len(listed)
    first_record, first_line, first_fields = listed[0]
    return RAGGED_ROWS.problem(
        line=first_line,
        record=first_record,
        total=total,
        fields=first_fields,
        rows_do="rows do" if total != 1 else "row does",
        columns=columns,
        shown=shown,
        tail=f"; and {more:,} more" if more > 0 else "",
    )


def heading_warnings(headings: list[str], names: list[str]) -> list[Problem]:
    """Say which headings the service will rename, so nobody is surprised by the table."""
    warnings = []
    for i, (heading, name) in enumerate(zip(headings, names, strict=True), start=1):
        if len(heading) > MAX_HEADING_CHARS:
            continue  # refused (heading_length_problems); a warning would quote all of it
        if not heading.strip():
            warnings.append(BLANK_HEADING.problem(position=i, name=name))
        elif heading.strip() != name:
            warnings.append(REPEATED_HEADING.problem(position=i, heading=heading.strip(), name=name))
    return warnings


def heading_length_problems(headings: list[str], line: int) -> list[Problem]:
    """The headings longer than :data:`MAX_HEADING_CHARS`, each named by its position and its first characters."""
    return [
        HEADING_TOO_LONG.problem(
            line=line, record=1, position=i, length=len(heading), start=heading[:40], limit=MAX_HEADING_CHARS
        )
        for i, heading in enumerate(headings, start=1)
        if len(heading) > MAX_HEADING_CHARS
    ]
