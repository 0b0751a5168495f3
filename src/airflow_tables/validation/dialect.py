"""How the service reads a CSV file: separators, quoting, records and column names.

The reading half of the rules stated in :mod:`.rules` (which declares what is refused and
words it): :class:`Records` reads records by the service's quoting rule, :func:`record_shape`
measures one without building its fields, :func:`detect_delimiter` picks the separator and
:func:`name_columns` names the columns as the service will. Standard library only.
"""

from __future__ import annotations

import csv
import io
import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

DELIMITERS = (",", ";", "\t", "|")
QUOTE = '"'
DELIMITER_NAMES = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}

#: How much of the file's start is used to detect the separator and encoding.
SNIFF_BYTES = 64 * 1024


# Appended after the data: if it comes back as a record of its own, every quote was closed.
_SENTINEL = "\x1e\x1f"


class Records:
    """Iterate ``(line number, fields)`` over CSV lines, by the service's quoting rule.

    The rule is RFC 4180 as Python's :mod:`csv` reads it: a double quote opens a
    quoted field only at the start of a field; inside one, separators and line
    breaks are data and ``""`` is a quote; a quote anywhere else is data. Blank
    lines are not records. After iteration, ``unterminated_line`` is the line of a
    record whose quoted field was never closed (``None`` when all were closed).

    ``lines`` are strings that keep their line breaks (``io.StringIO(text, newline="")``
    or a text file opened with ``newline=""``).
    """

    def __init__(self, lines: Iterable[str], delimiter: str, first_line: int = 1) -> None:
        self._lines = lines
        self.delimiter = delimiter
        self.first_line = first_line
        self.unterminated_line: int | None = None

    def __iter__(self) -> Iterator[tuple[int, list[str]]]:
        _raise_field_limit()
        reader = csv.reader(
            itertools.chain(self._lines, ("\n", _SENTINEL + "\n")),
            delimiter=self.delimiter,
            quotechar=QUOTE,
            doublequote=True,
            strict=False,
        )
        start = self.first_line
        pending: tuple[int, list[str]] | None = None
        for fields in reader:
            if fields:
                if pending is not None:
                    yield pending
                pending = (start, fields)
            start = self.first_line + reader.line_num
        if pending is None:
            return
        line, fields = pending
        if fields == [_SENTINEL]:
            return
        self.unterminated_line = line  # the sentinel was swallowed by an open quoted field
        if fields[-1].endswith(_SENTINEL + "\n"):
            fields[-1] = fields[-1][: -len(_SENTINEL) - 2]
        yield line, fields


# A quoted field from its opening quote to its closing one; possessive, so ``"ab""`` (never closed) does not match.
_QUOTED_FIELD = re.compile(rb'"[^"]*+(?:""[^"]*+)*+"')
_LINE_BREAK = re.compile(rb"[\r\n]")


@dataclass(frozen=True)
class RecordShape:
    """Where a record ends and how many fields it has, found without building a string per field.

    ``end`` is the offset just after its line break, or -1 when the bytes run out first (read
    more, unless they are the whole file). ``named_end`` is where its first ``keep`` fields end
    (before the separator of the next one), or -1 when it has no more than ``keep`` fields.
    """

    fields: int
    end: int
    named_end: int
    unterminated: bool  # a quoted field is open when the bytes end


def record_shape(data: bytes | bytearray, start: int, delimiter: str, keep: int, final: bool) -> RecordShape:
    """Measure the record at ``data[start:]`` by the rule of :class:`Records`, in time and memory flat in its fields.

    A header line of millions of fields would cost gigabytes as :mod:`csv` fields; here a
    field is only looked at when it opens with a quote (the one place the rule needs to), and
    separators between such fields are counted by ``bytes.count``. ``final``: the bytes end the
    file (a CR at their end is then a whole line break, and an open quote stays open).
    """
    sep = delimiter.encode()
    pos, fields, named_end = start, 1, -1
    stop = -1  # the next line break at or after pos (len(data): none); searched again only once passed
    while True:
        if data.startswith(b'"', pos):  # a field that opens with a quote: separators and breaks inside are data
            quoted = _QUOTED_FIELD.match(data, pos)
            if quoted is None:
                return RecordShape(fields, -1, named_end, unterminated=True)
            pos = quoted.end()
        if stop < pos:
            brk = _LINE_BREAK.search(data, pos)
            stop = len(data) if brk is None else brk.start()
        opening = data.find(sep + b'"', pos, stop)  # the next field that opens with a quote
        upto = stop if opening == -1 else opening + len(sep)
        more = data.count(sep, pos, upto)
        if named_end == -1 and fields + more > keep:
            named_end = pos
            for _ in range(keep - fields + 1):  # the separator that starts field keep + 1
                named_end = data.index(sep, named_end) + len(sep)
            named_end -= len(sep)
        fields += more
        pos = upto
        if opening != -1:
            continue
        if stop == len(data):
            return RecordShape(fields, len(data) if final else -1, named_end, unterminated=False)
        end = stop + 1
        if data[stop] == 13:  # CR: with the LF after it one break; at the bytes' end it may be half of one
            if end == len(data) and not final:
                return RecordShape(fields, -1, named_end, unterminated=False)
            if data.startswith(b"\n", end):
                end += 1
        return RecordShape(fields, end, named_end, unterminated=False)


def parse_records(text: str, delimiter: str, first_line: int = 1) -> Records:
    """:class:`Records` over a string."""
    return Records(io.StringIO(text, newline=""), delimiter, first_line)


def _raise_field_limit() -> None:
    # csv refuses fields over 128 KiB by default; the service has no such limit.
    if csv.field_size_limit() < 64 * 1024 * 1024:
        csv.field_size_limit(64 * 1024 * 1024)


def detect_delimiter(sample: str) -> str:
    """Pick the separator of a file from its first lines, quote-aware.

    The first record is the heading row, and a separator that does not split it cannot
    make a second column: when no candidate splits the heading, the file is one column
    and reads as comma-separated (so ``sentence`` over ``hello; world`` is one column of
    text, not a ragged semicolon file). Otherwise the sample is read with each candidate,
    by the quoting rule of :class:`Records`, and the one whose most common field count
    (more than one) covers the largest share of the records wins; ties go to the larger
    field count, then to comma, semicolon, tab, pipe in that order. A separator inside
    quoted fields is data and never counts.
    """
    cut = max(sample.rfind("\n"), sample.rfind("\r"))
    if 0 < cut < len(sample) - 1:
        sample = sample[: cut + 1]  # the sample may end in the middle of a line
    best: tuple[float, int, int] | None = None
    chosen = ","
    heading_split = False
    for rank, delim in enumerate(DELIMITERS):
        widths: dict[int, int] = {}
        for record, (_, fields) in enumerate(parse_records(sample, delim)):
            heading_split = heading_split or (record == 0 and len(fields) > 1)
            widths[len(fields)] = widths.get(len(fields), 0) + 1
        wide = {w: n for w, n in widths.items() if w > 1}
        if not wide:
            continue
        width, records = max(wide.items(), key=lambda kv: (kv[1], kv[0]))
        score = (records / sum(widths.values()), width, -rank)
        if best is None or score > best:
            best, chosen = score, delim
    return chosen if heading_split else ","


def name_columns(headings: list[str]) -> list[str]:
    """Name the columns as the service will: trimmed, blanks named, repeats numbered.

    A blank heading at 1-based position *i* becomes ``column_<i>``; the second and
    later occurrences of a name (compared trimmed and case-insensitively) become
    ``<name>_2``, ``<name>_3``..., skipping any number that would collide with a
    name already taken.
    """
    names = [h.strip() or f"column_{i}" for i, h in enumerate(headings, start=1)]
    taken = {n.casefold() for n in names}
    seen: dict[str, int] = {}
    result = []
    for name in names:
        key = name.casefold()
        if key not in seen:
            seen[key] = 1
            result.append(name)
            continue
        n = seen[key]
        while True:
            n += 1
            candidate = f"{name}_{n}"
            if candidate.casefold() not in taken:
                break
        seen[key] = n
        taken.add(candidate.casefold())
        result.append(candidate)
    return result
